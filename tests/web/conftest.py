"""The shared server of `server` and `client` (tests/support/served.py) with its HTTP listener on
(one allowed CORS origin, a trace URL template), shared by the tests of this directory. The
server that requires bearer tokens (`guarded`) is tests/support/guarded.py's."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.servers import Client, running, settings_for
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
