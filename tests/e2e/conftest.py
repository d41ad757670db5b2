"""A real turngate server on a real port (SQLite in a temp dir), shared per test session.

Tests keep apart by using their own session ids; a test that needs other settings starts its own.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest

from tests.e2e.servers import Client, OwnServer, running, settings_for
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb


@pytest.fixture(scope="session")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[TurngateServer, Client]]:
    """Default timings (lease 20 s, stop grace 30 s)."""
    async for pair in running(settings_for(str(tmp_path_factory.mktemp("e2e")))):
        yield pair


@pytest.fixture(scope="session")
async def fast_served(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[TurngateServer, Client]]:
    """Second-scale timings for expiry tests (lease 1 s, stop grace 1 s)."""
    settings = settings_for(str(tmp_path_factory.mktemp("e2e-fast")), lease_ttl=1.0, stop_grace=1.0)
    async for pair in running(settings):
        yield pair


@pytest.fixture
def server(served: tuple[TurngateServer, Client]) -> TurngateServer:
    return served[0]


@pytest.fixture
def client(served: tuple[TurngateServer, Client]) -> Client:
    return served[1]


@pytest.fixture
def fast_server(fast_served: tuple[TurngateServer, Client]) -> TurngateServer:
    return fast_served[0]


@pytest.fixture
def fast_client(fast_served: tuple[TurngateServer, Client]) -> Client:
    return fast_served[1]


@pytest.fixture
def session() -> pb.SessionRef:
    """A session no other test touches."""
    return pb.SessionRef(project_id="p-e2e", session_id=f"s-{uuid.uuid4().hex[:16]}")


@pytest.fixture
def own_server(tmp_path_factory: pytest.TempPathFactory) -> OwnServer:
    """Starts a server of the test's own, on a fresh database, with `settings_for` overrides:
    `async with own_server(watch_buffer=16) as (server, client): ...`."""

    def start(**overrides: object) -> AbstractAsyncContextManager[tuple[TurngateServer, Client]]:
        settings = settings_for(str(tmp_path_factory.mktemp("own")), **overrides)
        return asynccontextmanager(running)(settings)

    return start
