"""examples/web in a real browser (Debian's chromium, headless): built with esbuild, served from
its own origin, holding a session token its gateway minted (watch and Stop of one session), it
watches the session over the HTTP listener (CORS, bearer token), shows the turn a runner started,
sends a guarded Stop and shows its outcome, then the settlement."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.principals import Named, bearer, client_as, write_tokens
from tests.support.processes import free_port, run_cli, spawn_server
from tests.support.waiting import eventually
from tests.typescript.npm import INSTALL_TIMEOUT_S, ROOT, accepts_connections, needs_npm, npm
from turngate.v1 import turngate_pb2 as pb

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

EXAMPLE = ROOT / "examples" / "web"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PROJECT = "p-web"
RUNNER = Named("example-runner", ("runner",), (PROJECT,))
# Mints the page's session token: the page never holds the gateway's own.
GATEWAY = Named("example-gateway", ("gateway",), (PROJECT,))
# How long the page may take to show what the test waits for: reached only when the test fails.
SHOW_TIMEOUT_S = 15.0
BUILD_TIMEOUT_S = 120.0

pytestmark = needs_npm


@contextmanager
def static_files(directory: Path) -> Iterator[str]:
    """`directory` over HTTP on a free port of its own (another origin than the listener's)."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def chromium() -> Iterator[Any]:
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        pytest.skip(f"the browser cannot start: {CHROMIUM} or {CHROMEDRIVER} is not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,900"):
        options.add_argument(argument)
    try:
        driver = webdriver.Chrome(service=webdriver.ChromeService(str(CHROMEDRIVER)), options=options)
    except WebDriverException as error:
        pytest.skip(f"the browser cannot start: {error.msg}")
    try:
        yield driver
    finally:
        driver.quit()


async def shown(driver: Any, element_id: str, expected: str) -> None:
    """Waits (in a thread: Selenium blocks) until the element's text contains `expected`."""

    def contains(d: Any) -> bool:
        return expected in d.find_element(By.ID, element_id).text

    wait: Callable[[], object] = lambda: WebDriverWait(driver, SHOW_TIMEOUT_S).until(contains)  # noqa: E731
    try:
        await asyncio.to_thread(wait)
    except Exception as error:
        text = driver.find_element(By.ID, element_id).text
        raise AssertionError(f"#{element_id} shows {text!r}, not {expected!r}") from error


@pytest.mark.timeout(INSTALL_TIMEOUT_S + BUILD_TIMEOUT_S + 120)
async def test_the_example_page_watches_a_turn_stops_it_and_shows_it_settle(tmp_path: Path) -> None:
    await npm("run", "build:example", timeout_s=BUILD_TIMEOUT_S)
    grpc_port, http_port = free_port(), free_port()
    tokens = write_tokens(tmp_path / "tokens.toml", (RUNNER, GATEWAY))
    keys = tmp_path / "session-keys.toml"
    keys.write_text(run_cli(tmp_path, "token", "key").stdout)
    session = pb.SessionRef(project_id=PROJECT, session_id="s-web")
    with static_files(EXAMPLE) as page_origin, chromium() as driver:
        cors = {"TURNGATE_HTTP_CORS_ORIGINS": page_origin}
        args = ("--http-listen", f"127.0.0.1:{http_port}", "--auth-file", str(tokens))
        async with (
            spawn_server(tmp_path, *args, "--session-token-keys", str(keys), port=grpc_port, env=cors),
            client_as(grpc_port, bearer(RUNNER)) as runner,
            client_as(grpc_port, bearer(GATEWAY)) as gateway,
        ):
            minted = await gateway.control.MintSessionToken(
                pb.MintSessionTokenRequest(session=session, allow_stop=True)
            )
            admitted = await runner.admission.AdmitTurn(
                pb.AdmitTurnRequest(session=session, turn_id="t1", runner_id="r1")
            )
            await eventually(lambda: accepts_connections(http_port))
            await asyncio.to_thread(driver.get, f"{page_origin}/index.html")
            for field, value in (
                ("server", f"http://127.0.0.1:{http_port}"),
                ("token", minted.token),
                ("project", PROJECT),
                ("session", session.session_id),
            ):
                driver.find_element(By.ID, field).send_keys(value)
            driver.find_element(By.ID, "watch").click()
            await shown(driver, "active", "t1 (RUNNING")
            await shown(driver, "phase", "RUNNING")
            driver.save_screenshot(str(tmp_path / "running.png"))

            driver.find_element(By.ID, "stop").click()
            await shown(driver, "outcome", "Stopping t1")
            await shown(driver, "phase", "STOPPING")
            await shown(driver, "events", "stop requested for t1: Stop from the example page")

            await runner.admission.CompleteTurn(
                pb.CompleteTurnRequest(lease=admitted.lease, outcome=pb.TURN_OUTCOME_CANCELLED)
            )
            await shown(driver, "last-settled", "t1 (SETTLED CANCELLED")
            await shown(driver, "phase", "IDLE")
            await shown(driver, "outcome", "t1 has ended CANCELLED.")  # no longer "Stopping t1"
            driver.save_screenshot(str(tmp_path / "settled.png"))
            assert driver.find_element(By.ID, "stop").get_attribute("disabled") is not None
