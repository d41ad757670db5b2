"""The e2e fixtures (`server`, `client`) on a server with its HTTP listener on (one allowed CORS
origin, a trace URL template), shared by the tests of this directory; and the security tests'
server that requires bearer tokens (`guarded`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.e2e.conftest import client, own_server, server, session  # noqa: F401  (fixtures)
from tests.e2e.servers import Client, running, settings_for
from tests.security.conftest import guarded, tokens_file  # noqa: F401  (fixtures)
from turngate.service.server import TurngateServer

ALLOWED_ORIGIN = "https://app.example.com"
TRACE_URL = "http://jaeger.example.com:16686/trace/{trace_id}"


@pytest.fixture(scope="session")
async def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[TurngateServer, Client]]:
    settings = settings_for(
        str(tmp_path_factory.mktemp("http")),
        http_listen="127.0.0.1:0",
        http_cors_origins=ALLOWED_ORIGIN,
        console_trace_url=TRACE_URL,
    )
    async for pair in running(settings):
        yield pair
