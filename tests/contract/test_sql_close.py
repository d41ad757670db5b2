"""A SQL database's connections are closed to the end when whoever closes them is cancelled
meanwhile, as a stopping server cancels its loops (and again while any is left): no ERROR logged,
no connection left open. Each test holds aiosqlite's close until the canceller has struck."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiosqlite
import pytest

from tests.support.waiting import eventually
from turngate.service.config import Settings
from turngate.service.server import TurngateServer
from turngate.service.sql.migrate import is_migrated, migrate
from turngate.service.store.sql import open_store


class HeldCloses:
    """aiosqlite connections whose close, once `holding`, waits for `release` (`closing` says one
    is waiting); `all_closed` once every connection that began to close has closed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.holding = True
        self.closing = asyncio.Event()
        self.release = asyncio.Event()
        self.connections: list[aiosqlite.Connection] = []
        close = aiosqlite.Connection.close

        async def held(connection: aiosqlite.Connection) -> None:
            if self.holding:
                self.connections.append(connection)
                self.closing.set()
                await self.release.wait()
            await close(connection)

        monkeypatch.setattr(aiosqlite.Connection, "close", held)

    @property
    def all_closed(self) -> bool:
        return all(connection._connection is None for connection in self.connections)


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]


async def check_schema(url: str) -> None:
    await is_migrated(url)


async def close_store(url: str) -> None:
    store = open_store(url)
    await store.now()  # a connection in the pool, for the close to close
    await store.close()


CLOSERS: dict[str, Callable[[str], Awaitable[None]]] = {
    "migrate": migrate,
    "is_migrated": check_schema,
    "store.close": close_store,
}


@pytest.mark.parametrize("closer", CLOSERS)
async def test_closing_connections_cancelled_twice_partway_runs_to_the_end_and_logs_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, closer: str
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/turngate.db"
    if closer != "migrate":
        await migrate(url)
    held = HeldCloses(monkeypatch)
    task = asyncio.ensure_future(CLOSERS[closer](url))
    await held.closing.wait()
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()
    held.release.set()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert held.all_closed
    assert errors(caplog) == []


async def test_stopping_the_server_while_a_loop_closes_its_connection_logs_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The race a CI run once met: the schema loop (here waiting for another process to migrate,
    so it looks at the database every second) is cancelled, twice, while it closes a connection."""
    held = HeldCloses(monkeypatch)
    held.holding = False
    server = TurngateServer(
        Settings(listen="127.0.0.1:0", store=f"sqlite+aiosqlite:///{tmp_path}/turngate.db", migrate=False)
    )
    others = asyncio.all_tasks()  # other servers of the test session run loops of the same names
    await server.start()
    held.holding = True
    await held.closing.wait()
    schema = next(task for task in asyncio.all_tasks() - others if task.get_name() == "schema")

    stopping = asyncio.ensure_future(server.stop())
    await eventually(lambda: schema.done() or schema.cancelling() >= 2)
    held.release.set()
    await stopping

    assert schema.done()
    assert held.all_closed
    assert errors(caplog) == []
