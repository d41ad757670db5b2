"""A server that requires bearer tokens (the principals in tests/support/principals.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.principals import write_tokens
from tests.support.servers import Client, running, settings_for
from turngate.service.server import TurngateServer


@pytest.fixture(scope="session")
def tokens_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tokens(tmp_path_factory.mktemp("tokens") / "tokens.toml")


@pytest.fixture(scope="session")
async def guarded(
    tmp_path_factory: pytest.TempPathFactory, tokens_file: Path
) -> AsyncIterator[TurngateServer]:
    """A server with authentication on, shared by the tests of this directory; its HTTP listener
    is on too, for the same checks over Connect and gRPC-Web."""
    settings = settings_for(
        str(tmp_path_factory.mktemp("guarded")), auth_file=tokens_file, http_listen="127.0.0.1:0"
    )
    server: TurngateServer
    client: Client
    async for server, client in running(settings):
        del client  # tests connect as a principal (principals.client_as)
        yield server
