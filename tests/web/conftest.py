"""A server with its HTTP listener on (one allowed CORS origin, a trace URL template), shared by
the tests of this directory."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.e2e.conftest import own_server, session  # noqa: F401  (fixtures)
from tests.e2e.servers import Client, running, settings_for
from turngate.service.server import TurngateServer

ALLOWED_ORIGIN = "https://app.example.com"
TRACE_URL = "http://jaeger.example.com:16686/trace/{trace_id}"


@pytest.fixture(scope="session")
async def http_served(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[TurngateServer, Client]]:
    settings = settings_for(
        str(tmp_path_factory.mktemp("http")),
        http_listen="127.0.0.1:0",
        http_cors_origins=ALLOWED_ORIGIN,
        console_trace_url=TRACE_URL,
    )
    async for served in running(settings):
        yield served


@pytest.fixture
def server(http_served: tuple[TurngateServer, Client]) -> TurngateServer:
    return http_served[0]


@pytest.fixture
def client(http_served: tuple[TurngateServer, Client]) -> Client:
    return http_served[1]
