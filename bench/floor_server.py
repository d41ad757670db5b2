"""The floor: a tiny grpc.aio server, run in its own process like turngate, with three methods.

`Empty` answers an empty message at once; `RedisGet` first does one Redis round trip (a GET), with
the same redis-py asyncio client turngate uses: on one server `Redis.from_url`, on a Redis Cluster
or behind Sentinel the client turngate's store makes (store/redis/connection.py `connect`), so the
GET goes to the master owning the key, or to the primary the sentinels name. `WriteWait` (with a
WAIT count given) does what turngate does for a write with TURNGATE_REDIS_WAIT_REPLICAS: a SET and
`WAIT n` sent together on one connection to the key's master, in one round trip, which returns once
n replicas have the write. `Script` runs turngate's compare-and-set script (EVALSHA of cas.lua)
with what an AdmitTurn of a new session writes (its document, one event, the session's deadline),
on a new session each call, on the client `RedisGet` uses: what an admission costs Redis and the
client, without turngate's decision, API or listeners (an intermediate floor). Requests and
replies are raw bytes, so no proto is needed.
Run: `python bench/floor_server.py PORT REDIS_URL KEY [WAIT_REPLICAS]`; it exits on SIGTERM.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

import grpc
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from turngate.service.api import parse
from turngate.service.api.policy import Policy
from turngate.service.config import Settings
from turngate.service.core import Session, SessionKey, decide
from turngate.service.redis_url import RedisUrl
from turngate.service.store.redis.connection import Client, connect
from turngate.service.store.redis.keys import Keyspace
from turngate.service.store.redis.script import CAS, CAS_SHA, change_args
from turngate.v1 import turngate_pb2 as pb

SERVICE = "bench.Floor"
EMPTY = f"/{SERVICE}/Empty"
REDIS_GET = f"/{SERVICE}/RedisGet"
WRITE_WAIT = f"/{SERVICE}/WriteWait"
SCRIPT = f"/{SERVICE}/Script"
# Printed once it listens: with several processes on one port, answering calls proves only one.
LISTENING = "floor listening"
# turngate's default TURNGATE_REDIS_TIMEOUT and TURNGATE_REDIS_WAIT_TIMEOUT.
TIMEOUT_S = 2.0
WAIT_TIMEOUT_MS = 500


async def _set_and_wait(redis: Client, key: str, replicas: int) -> int:
    """SET `key` and WAIT for `replicas` on one connection to its master, in one round trip; how
    many replicas confirmed it."""
    if not isinstance(redis, RedisCluster):
        async with redis.pipeline(transaction=False) as pipe:
            pipe.set(key, b"floor")
            pipe.wait(replicas, WAIT_TIMEOUT_MS)
            _, confirmed = await pipe.execute()
        return int(confirmed)
    # A cluster pipeline would send WAIT to any node: both go on a connection of the key's master.
    node = redis.get_node_from_key(key)
    assert node is not None, f"no node serves {key!r}"
    connection = node.acquire_connection()
    try:
        commands: list[tuple[Any, ...]] = [("SET", key, b"floor"), ("WAIT", replicas, WAIT_TIMEOUT_MS)]
        await connection.send_packed_command(connection.pack_commands(commands))
        await connection.read_response()
        confirmed = int(await connection.read_response())
    except BaseException:
        await connection.disconnect()  # a reply may be left unread: never reuse it
        raise
    finally:
        node.release(connection)
    return confirmed


# Bounds on how far a decision's `now` may stray from TIME that any instant meets: the script's
# clock check passes whenever it runs, as it does for a decision turngate sends at once.
_ANY_INSTANT_US = 10**15


class ScriptAdmissions:
    """cas.lua's keys and arguments for an AdmitTurn of a new session each call, as the server
    parses the bench's request and decides it (at start: the decision is not the floor's work)."""

    def __init__(self, prefix: str) -> None:
        settings = Settings()
        self._keys = Keyspace(prefix, settings.redis_buckets)
        self._retention = settings.event_retention
        request = pb.AdmitTurnRequest(
            session=pb.SessionRef(project_id="bench", session_id="floor-0"),
            turn_id="turn-1",
            runner_id="bench-runner",
        )
        _, admit = parse.admit(request, Policy.from_settings(settings), "", "", may_stop_others=False)
        self._decision = decide(Session(), admit, time.time_ns() // 1_000)
        self._sessions: Iterator[int] = itertools.count()

    def next(self) -> tuple[list[str], list[Any]]:
        key = SessionKey("bench", f"floor-{next(self._sessions)}")
        change = change_args(key, self._decision, retention=self._retention, max_event_age=None)
        args = [0, self._decision.state.epoch, time.time_ns() // 1_000, _ANY_INSTANT_US, _ANY_INSTANT_US]
        return self._keys.script_keys(key), [*args, "", "", *change]


def _handler(redis: Client, key: str, wait_replicas: int) -> grpc.GenericRpcHandler:
    async def empty(_request: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return b""

    async def redis_get(_request: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        await redis.get(key)
        return b""

    async def write_wait(_request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        confirmed = await _set_and_wait(redis, key, wait_replicas)
        if confirmed < wait_replicas:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"{confirmed} of {wait_replicas} replicas")
        return b""

    admissions = ScriptAdmissions(key)

    async def script(_request: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        keys, args = admissions.next()
        await redis.evalsha(CAS_SHA, len(keys), *keys, *args)
        return b""

    handlers = ((EMPTY, empty), (REDIS_GET, redis_get), (WRITE_WAIT, write_wait), (SCRIPT, script))
    methods: dict[str, grpc.RpcMethodHandler[bytes, bytes]] = {
        name.rsplit("/", 1)[1]: grpc.unary_unary_rpc_method_handler(method) for name, method in handlers
    }
    return grpc.method_handlers_generic_handler(SERVICE, methods)


async def serve_until_terminated(server: grpc.aio.Server, port: int) -> None:
    """Serves on 127.0.0.1:`port` until SIGTERM."""
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(LISTENING, flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(None)


async def serve(port: int, redis_url: str, key: str, wait_replicas: int) -> None:
    redis: Client
    if RedisUrl.parse(redis_url).kind == "standalone":
        redis = Redis.from_url(redis_url)
    else:
        redis = connect(redis_url, TIMEOUT_S)
    await redis.ping()
    if isinstance(redis, RedisCluster):
        await redis.initialize()  # the slot map, before the first WriteWait looks a key up in it
    await redis.script_load(CAS)  # on every master of a cluster
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_handler(redis, key, wait_replicas),))
    await serve_until_terminated(server, port)
    await redis.aclose()


if __name__ == "__main__":
    wait = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    asyncio.run(serve(int(sys.argv[1]), sys.argv[2], sys.argv[3], wait))
