"""A real turngate server on a real port, shared per test session and store: the embedded default
(SQLite in a temp dir), and production mode's Redis on one server, as a Cluster and behind
Sentinel (each with the in-process projector writing a SQLite ledger).

Tests keep apart by using their own session ids; a test that needs other settings starts its own
(on SQLite).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from pathlib import Path

import pytest

from tests.support.servers import Client, OwnServer, running, settings_for
from tests.support.shared_redis import REDIS_SERVER, prefix_on_shared_redis, unique_prefix
from tests.support.shared_topologies import TOPOLOGIES, shared_topology_url
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

STORES = ["sqlite", *(pytest.param(store, marks=pytest.mark.redis) for store in ("redis", *TOPOLOGIES))]


@pytest.fixture(scope="session", params=STORES)
def store_url(request: pytest.FixtureRequest) -> str | None:
    """Where the shared servers keep sessions: None for the embedded default (SQLite), else the
    Redis URL (the shared Redis server, or this run's Cluster or Sentinel setup)."""
    if request.param == "sqlite":
        return None
    return shared_topology_url(request, request.param) if request.param in TOPOLOGIES else REDIS_SERVER


async def serving_on(
    store_url: str | None, root: Path, **timings: float
) -> AsyncIterator[tuple[TurngateServer, Client]]:
    """A server with `timings` on `store_url` (see `store_url`), its files in `root`; on the shared
    Redis server, its keys (under a prefix of its own) are deleted afterwards."""
    if store_url is None:
        async for pair in running(settings_for(str(root), **timings)):
            yield pair
        return
    ledger = f"sqlite+aiosqlite:///{root / 'ledger.db'}"
    # The topologies are this run's own: their keys need no deleting.
    prefixed = prefix_on_shared_redis() if store_url == REDIS_SERVER else nullcontext(unique_prefix())
    async with prefixed as prefix:
        settings = settings_for(str(root), store=store_url, redis_prefix=prefix, ledger=ledger, **timings)
        async for pair in running(settings):
            yield pair


@pytest.fixture(scope="session")
async def served(
    store_url: str | None, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[TurngateServer, Client]]:
    """Default timings (lease 20 s, stop grace 30 s)."""
    async for pair in serving_on(store_url, tmp_path_factory.mktemp("e2e")):
        yield pair


@pytest.fixture(scope="session")
async def fast_served(
    store_url: str | None, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[TurngateServer, Client]]:
    """Second-scale timings for expiry tests (lease 1 s, stop grace 1 s)."""
    root = tmp_path_factory.mktemp("e2e-fast")
    async for pair in serving_on(store_url, root, lease_ttl=1.0, stop_grace=1.0):
        yield pair


@pytest.fixture(scope="session")
async def embedded_served(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[TurngateServer, Client]]:
    """Default timings on SQLite alone, for the tests that move the store's clock (the host's
    clock, there; a Redis store's clock is Redis TIME, which no test can move)."""
    async for pair in serving_on(None, tmp_path_factory.mktemp("e2e-embedded")):
        yield pair


@pytest.fixture
def server(served: tuple[TurngateServer, Client]) -> TurngateServer:
    return served[0]


@pytest.fixture
def client(served: tuple[TurngateServer, Client]) -> Client:
    return served[1]


@pytest.fixture
def embedded_server(embedded_served: tuple[TurngateServer, Client]) -> TurngateServer:
    return embedded_served[0]


@pytest.fixture
def embedded_client(embedded_served: tuple[TurngateServer, Client]) -> Client:
    return embedded_served[1]


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
