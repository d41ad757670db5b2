"""The floor: a tiny grpc.aio server, run in its own process like turngate, with two methods.

`Empty` answers an empty message at once; `RedisGet` first does one Redis round trip (a GET, with
the same redis-py asyncio client turngate uses). Requests and replies are raw bytes, so no proto
is needed. Run: `python bench/floor_server.py PORT REDIS_URL KEY`; it exits on SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import grpc
from redis.asyncio import Redis

SERVICE = "bench.Floor"
EMPTY = f"/{SERVICE}/Empty"
REDIS_GET = f"/{SERVICE}/RedisGet"


def _handler(redis: Redis, key: str) -> grpc.GenericRpcHandler:
    async def empty(_request: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return b""

    async def redis_get(_request: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        await redis.get(key)
        return b""

    methods: dict[str, grpc.RpcMethodHandler[bytes, bytes]] = {
        name.rsplit("/", 1)[1]: grpc.unary_unary_rpc_method_handler(method)
        for name, method in ((EMPTY, empty), (REDIS_GET, redis_get))
    }
    return grpc.method_handlers_generic_handler(SERVICE, methods)


async def serve_until_terminated(server: grpc.aio.Server, port: int) -> None:
    """Serves on 127.0.0.1:`port` until SIGTERM."""
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(None)


async def serve(port: int, redis_url: str, key: str) -> None:
    redis = Redis.from_url(redis_url)
    await redis.ping()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_handler(redis, key),))
    await serve_until_terminated(server, port)
    await redis.aclose()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
