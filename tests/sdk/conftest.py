"""SDK tests: a real turngate on a real port (SQLite in a temp dir), shared per test session,
and an SDK client per test whose calls a `Wire` counts. (`own_server` is tests/support/served.py's.)"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from tests.sdk.wire import Wire
from tests.support.backoff import FAST
from tests.support.servers import Client as Raw
from tests.support.servers import running, settings_for
from turngate.client import Client
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb

PROJECT = "p-sdk"


@pytest.fixture(scope="session")
async def sdk_served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[TurngateServer, Raw]]:
    """Default timings (lease 20 s unless a turn asks for its own, stop grace 30 s)."""
    async for pair in running(settings_for(str(tmp_path_factory.mktemp("sdk")))):
        yield pair


@pytest.fixture
def target(sdk_served: tuple[TurngateServer, Raw]) -> str:
    return f"127.0.0.1:{sdk_served[0].port}"


@pytest.fixture
def raw(sdk_served: tuple[TurngateServer, Raw]) -> Raw:
    """Plain stubs on their own channel, to check what the service recorded."""
    return sdk_served[1]


@pytest.fixture
def session_id() -> str:
    """A session no other test touches."""
    return f"s-{uuid.uuid4().hex[:16]}"


@pytest.fixture
def ref(session_id: str) -> pb.SessionRef:
    return pb.SessionRef(project_id=PROJECT, session_id=session_id)


@pytest.fixture
def wire() -> Wire:
    return Wire()


@pytest.fixture
async def client(target: str, wire: Wire) -> AsyncIterator[Client]:
    async with Client(target, PROJECT, interceptors=wire.interceptors, backoff=FAST, call_timeout=2.0) as sdk:
        yield sdk
