"""The console's tests: a `turngate serve --http-listen` process (its own, so a test can restart
it), tokens for a runner, a gateway and a watcher, and Debian's chromium."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from selenium import webdriver
from selenium.common.exceptions import WebDriverException

from tests.console.browser import Page, start_chromium
from tests.support.backoff import FAST
from tests.support.principals import Named, write_tokens
from tests.support.processes import Spawned, free_port, spawn_server
from turngate.client import Client

PROJECT = "p-console"
RUNNER = Named("console-runner", ("runner",), (PROJECT,))
GATEWAY = Named("console-gateway", ("gateway",), (PROJECT,))
WATCHER = Named("console-watcher", ("watcher",), (PROJECT,))
TRACE_URL = "http://jaeger.example.com:16686/trace/{trace_id}"


@dataclass(frozen=True)
class ConsoleServer:
    """Where a console server listens and keeps its files, so that it can be started again;
    without `tokens`, it asks for no token (authentication off, on loopback)."""

    root: Path
    grpc_port: int
    http_port: int
    tokens: Path | None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self) -> AbstractAsyncContextManager[Spawned]:
        authentication = () if self.tokens is None else ("--auth-file", str(self.tokens))
        return spawn_server(
            self.root,
            "--http-listen",
            f"127.0.0.1:{self.http_port}",
            *authentication,
            port=self.grpc_port,
            env={"TURNGATE_CONSOLE_TRACE_URL": TRACE_URL},
        )

    def gateway_client(self) -> Client:
        return Client(f"127.0.0.1:{self.grpc_port}", PROJECT, token=GATEWAY.token, backoff=FAST)

    def runner_client(self) -> Client:
        """The SDK as the runner, tracing its calls so that its turns carry a trace id."""
        return Client(
            f"127.0.0.1:{self.grpc_port}",
            PROJECT,
            token=None if self.tokens is None else RUNNER.token,
            backoff=FAST,
            tracer_provider=TracerProvider(),
        )


@pytest.fixture(scope="session")
def chromium() -> Iterator[webdriver.Chrome]:
    try:
        driver = start_chromium()
    except (WebDriverException, OSError) as error:
        pytest.skip(f"the browser cannot start: {str(error).splitlines()[0]}")
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def console_server(tmp_path: Path) -> ConsoleServer:
    """A server's addresses and files; `async with console_server.start():` runs it."""
    tokens = write_tokens(tmp_path / "tokens.toml", (RUNNER, GATEWAY, WATCHER))
    return ConsoleServer(tmp_path, free_port(), free_port(), tokens)


@pytest.fixture
async def served(console_server: ConsoleServer) -> AsyncIterator[ConsoleServer]:
    async with console_server.start():
        yield console_server


@pytest.fixture
def page(chromium: webdriver.Chrome, console_server: ConsoleServer, tmp_path: Path) -> Iterator[Page]:
    """The console of `console_server` (started by `served`, or by the test)."""
    shots = tmp_path / "screenshots"
    shots.mkdir()
    console = Page(chromium, console_server.base, shots)
    yield console
    for line in console.console_log():
        print("browser:", line)


@pytest.fixture
def session_id() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"
