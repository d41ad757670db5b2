"""The compare-and-set's connection lender (store/redis/held.py): callers beyond its size queue,
in order, for as long as its timeout; a connection handed to a caller that gave up is lent again,
never lost. Interleavings are forced on one event loop; Redis itself is in the contract tests."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
from redis import exceptions as redis_errors
from redis.asyncio.connection import Connection, ConnectionPool

from turngate.service.ports.store import StoreUnavailable
from turngate.service.store.redis.connection import failure
from turngate.service.store.redis.held import ConnectionLender


class _Connection:
    """What the lender looks at of a connection: whether it is connected, and Redis closed it."""

    _reader = None
    _writer = None
    is_connected = False
    refusals = 0  # connections it refuses before it accepts one
    disconnects = 0

    async def connect(self) -> None:
        if self.refusals:
            self.refusals -= 1
            raise redis_errors.ConnectionError("connection refused")
        self.is_connected = True

    async def disconnect(self, nowait: bool = False) -> None:
        self.is_connected = False
        self.disconnects += 1


class _Pool:
    def make_connection(self) -> _Connection:
        return _Connection()


def lender(size: int, timeout: float = 5.0) -> ConnectionLender:
    return ConnectionLender(cast(ConnectionPool, _Pool()), size, timeout)


async def waiting(task: asyncio.Task[Connection]) -> None:
    """Until `task` waits for a connection."""
    for _ in range(10):
        await asyncio.sleep(0)
    assert not task.done()


async def test_a_caller_past_the_size_waits_and_fails_unavailable_once_the_timeout_passes() -> None:
    connections = lender(1, timeout=0.05)
    await connections.lend()

    unavailable = r"no connection available within 0\.05s"
    with pytest.raises(redis_errors.ConnectionError, match=unavailable) as caught:
        await connections.lend()

    assert failure(caught.value, sent=False) is StoreUnavailable


async def test_connections_given_back_go_to_the_waiting_callers_in_the_order_they_came() -> None:
    connections = lender(2)
    first, second = await connections.lend(), await connections.lend()
    early = asyncio.create_task(connections.lend())
    await waiting(early)
    late = asyncio.create_task(connections.lend())
    await waiting(late)

    connections.give_back(second)
    connections.give_back(first)

    assert (await early, await late) == (second, first)


async def test_a_connection_handed_to_a_caller_cancelled_before_it_ran_is_lent_again() -> None:
    connections = lender(1)
    only = await connections.lend()
    gives_up = asyncio.create_task(connections.lend())
    await waiting(gives_up)

    connections.give_back(only)  # handed over: the caller has not run since
    gives_up.cancel()

    with pytest.raises(asyncio.CancelledError):
        await gives_up
    assert await asyncio.wait_for(connections.lend(), 1) is only


async def test_a_caller_that_timed_out_leaves_the_queue_and_the_next_gets_the_connection() -> None:
    connections = lender(1, timeout=0.05)
    only = await connections.lend()
    with pytest.raises(redis_errors.ConnectionError):
        await connections.lend()
    next_one = asyncio.create_task(connections.lend())
    await waiting(next_one)

    connections.give_back(only)

    assert await next_one is only


async def test_a_connection_that_fails_to_connect_is_lent_again_disconnected_and_connects_then() -> None:
    """A failed connect may leave it half set up: it is disconnected and goes back, so the slot is
    not lost and the next caller connects it anew."""
    connections = lender(1)
    failing = cast(_Connection, await connections.lend())
    connections.give_back(cast(Connection, failing))
    failing.is_connected, failing.refusals = False, 1

    with pytest.raises(redis_errors.ConnectionError, match="refused"):
        await connections.lend()

    assert failing.disconnects == 1
    again = await asyncio.wait_for(connections.lend(), 1)
    assert again is cast(Connection, failing)
    assert failing.is_connected
