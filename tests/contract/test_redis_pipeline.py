"""A node's pipe (store/redis/pipeline.py), on a real connection to the shared Redis: a command
with nothing in flight leaves at once, those sent behind it in one loop tick leave together in one
write, none waits past FLUSH_AFTER_S, each call gets its own replies in order, and a failure fails
each call as what it may have done."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import Connection, ConnectionPool

from tests.support.shared_redis import REDIS_SERVER, REDIS_TIMEOUT_S, unique_prefix
from turngate.service.ports.store import StoreUnavailable, WriteOutcomeUnknown
from turngate.service.store.redis.connection import close_client, connect, failure
from turngate.service.store.redis.held import ConnectionLender
from turngate.service.store.redis.pipeline import FLUSH_AFTER_S, Pipe, Pipes
from turngate.service.store.redis.resp import packed

pytestmark = pytest.mark.redis


@dataclass
class Piped:
    """A pipe on a connection of its own, the writes it made, and how often it released."""

    pipe: Pipe
    connection: Connection
    name: str
    writes: list[bytes] = field(default_factory=list)
    released: int = 0

    def release(self) -> None:
        self.released += 1


@pytest.fixture
async def piped() -> AsyncIterator[Piped]:
    name = unique_prefix()
    pool = ConnectionPool.from_url(REDIS_SERVER, socket_timeout=REDIS_TIMEOUT_S, client_name=name)
    connection: Connection = pool.make_connection()  # type: ignore[no-untyped-call]
    await connection.connect()  # type: ignore[no-untyped-call]
    writer = connection._writer
    assert writer is not None
    state = Piped(pipe=None, connection=connection, name=name)  # type: ignore[arg-type]
    state.pipe = Pipe(connection, state.release)
    write = writer.write

    def recorded(data: bytes) -> None:
        state.writes.append(data)
        write(data)

    writer.write = recorded  # type: ignore[method-assign,assignment]
    try:
        yield state
    finally:
        state.pipe.close()
        await connection.disconnect()


def echo(*words: str) -> bytes:
    return packed([("ECHO", word) for word in words])


async def test_the_first_command_leaves_at_once_the_rest_of_its_tick_in_one_write_each_call_its_own_replies(
    piped: Piped,
) -> None:
    calls = [piped.pipe.exchange(echo(f"a{i}", f"b{i}"), 2) for i in range(50)]

    replies = await asyncio.gather(*calls)

    assert replies == [[f"a{i}".encode(), f"b{i}".encode()] for i in range(50)]
    assert piped.writes == [echo("a0", "b0"), b"".join(echo(f"a{i}", f"b{i}") for i in range(1, 50))]


async def test_a_command_sent_once_the_first_waited_flush_after_leaves_at_once_with_those_before_it(
    piped: Piped,
) -> None:
    """A long tick (many decisions made in it) does not hold the first decision back past
    FLUSH_AFTER_S: the send that finds it that old writes everything waiting, and what comes after
    leaves at the tick's end."""

    def hold_the_loop() -> None:
        time.sleep(FLUSH_AFTER_S * 1.5)

    words = ["alone", "first", "second", "third"]
    loop = asyncio.get_running_loop()
    alone = asyncio.ensure_future(piped.pipe.exchange(echo("alone"), 1))
    first = asyncio.ensure_future(piped.pipe.exchange(echo("first"), 1))
    loop.call_soon(hold_the_loop)
    second = asyncio.ensure_future(piped.pipe.exchange(echo("second"), 1))
    third = asyncio.ensure_future(piped.pipe.exchange(echo("third"), 1))

    assert list(await asyncio.gather(alone, first, second, third)) == [[w.encode()] for w in words]
    assert piped.writes == [echo("alone"), echo("first") + echo("second"), echo("third")]


async def test_an_error_reply_is_its_calls_alone_and_the_pipe_goes_on(piped: Piped) -> None:
    key = f"{unique_prefix()}:list"
    ok, failed, after = await asyncio.gather(
        piped.pipe.exchange(packed([("RPUSH", key, "x")]), 1),
        piped.pipe.exchange(packed([("INCR", key)]), 1),
        piped.pipe.exchange(packed([("DEL", key)]), 1),
    )

    assert ok == [1]
    assert isinstance(failed[0], redis_errors.ResponseError), "WRONGTYPE: a reply, not a failure"
    assert after == [1]
    assert piped.pipe.usable()


async def test_a_connection_lost_under_waiting_calls_fails_each_as_what_it_may_have_done(
    piped: Piped,
) -> None:
    """The first call waiting (blocked in Redis) fails with the connection's error; the calls
    behind it, written but unanswered, fail as lost: outcome unknown for a write. The connection
    is released once, and the pipe is not used again."""
    blocked = asyncio.ensure_future(piped.pipe.exchange(packed([("BLPOP", f"{unique_prefix()}:none", 5)]), 1))
    behind = [asyncio.ensure_future(piped.pipe.exchange(echo(f"w{i}"), 1)) for i in range(3)]
    client = Redis.from_url(REDIS_SERVER)
    try:
        assert await client.client_kill_filter(_id=str(await blocked_in_blpop(client, piped.name))) == 1
    finally:
        await client.aclose()

    outcomes = await asyncio.gather(blocked, *behind, return_exceptions=True)

    assert all(isinstance(outcome, redis_errors.ConnectionError) for outcome in outcomes), outcomes
    assert {failure(outcome, sent=True) for outcome in outcomes if isinstance(outcome, Exception)} == {
        WriteOutcomeUnknown
    }
    assert piped.released == 1
    assert not piped.pipe.usable()
    with pytest.raises(StoreUnavailable):
        await piped.pipe.exchange(echo("late"), 1)


async def test_a_pipe_whose_connection_closed_while_idle_is_not_used_again(piped: Piped) -> None:
    """A cluster client disconnects its nodes' connections when it reads the topology again, the
    pipe's among them: found before anything is sent, it is released and opened anew, so the next
    write is not of unknown outcome."""
    assert await piped.pipe.exchange(echo("before"), 1) == [b"before"]

    await piped.connection.disconnect()

    assert not piped.pipe.usable()
    assert piped.released == 1


async def test_calls_whose_commands_were_never_written_fail_as_unavailable(piped: Piped) -> None:
    """Closed before the tick's write: what never left applied nothing (StoreUnavailable), never
    a write of unknown outcome; the first call, written at once, may have run."""
    calls = [asyncio.ensure_future(piped.pipe.exchange(echo(f"u{i}"), 1)) for i in range(3)]
    asyncio.get_running_loop().call_soon(piped.pipe.close)

    written, *unsent = await asyncio.gather(*calls, return_exceptions=True)

    assert all(isinstance(outcome, StoreUnavailable) for outcome in unsent), unsent
    assert isinstance(written, Exception)
    assert failure(written, sent=True) is WriteOutcomeUnknown
    assert piped.writes == [echo("u0")]
    assert piped.released == 1


async def blocked_in_blpop(client: Redis, name: str) -> int:
    """The id of the client named `name` once Redis has it blocked in BLPOP."""
    for _ in range(200):
        for listed in await client.client_list(_type="normal"):
            if listed["name"] == name and listed["cmd"] == "blpop":
                return int(listed["id"])
        await asyncio.sleep(0.01)
    raise AssertionError(f"{name} never blocked in BLPOP")


@pytest.fixture
async def pipes() -> AsyncIterator[tuple[Pipes, ConnectionLender]]:
    client = connect(REDIS_SERVER, REDIS_TIMEOUT_S)
    assert not isinstance(client, RedisCluster)
    lender = ConnectionLender(client.connection_pool, 4, REDIS_TIMEOUT_S)
    try:
        yield Pipes(client, lender), lender
    finally:
        await lender.close()
        await close_client(client)


async def test_callers_that_find_no_pipe_open_one_between_them(pipes: tuple[Pipes, ConnectionLender]) -> None:
    """Many calls at once on a store that has no pipe yet: one is opened, on one connection."""
    opened, lender = pipes

    found = await asyncio.gather(*(opened.to(f"key-{i}") for i in range(20)))

    assert len({id(pipe) for pipe in found}) == 1
    assert len(lender._made) == 1
    await opened.close()


async def test_a_pipe_that_connects_while_the_store_closes_is_closed_too(
    pipes: tuple[Pipes, ConnectionLender],
) -> None:
    """Closed while connecting: the caller is told the store is unavailable, and the connection
    goes back to the lender instead of outliving the store."""
    opened, lender = pipes
    opening = asyncio.ensure_future(opened.to("key"))
    await asyncio.sleep(0)  # it has asked for its connection

    await opened.close()

    with pytest.raises(StoreUnavailable):
        await opening
    await opened.close()
    assert len(lender._made) == 1
    assert lender._idle == lender._made, "given back"
