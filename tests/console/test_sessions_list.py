"""Finding sessions in the console, in a real browser against a real server: the landing page lists
the projects the tab's token may see (ListProjects), a project's page its sessions, busy or idle,
the most recently active first, a page at a time (ListSessions, "Load more"), and a listed session
opens as the busy list's do."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from selenium import webdriver

from tests.console.browser import Page
from tests.console.conftest import GATEWAY, PROJECT, ConsoleServer
from tests.support.backoff import FAST
from tests.support.principals import Named, write_tokens
from tests.support.processes import free_port
from turngate.client import Client

OTHER = "p-console-other"
# Runs turns in both projects; the console's GATEWAY sees only PROJECT, an operator every project.
RUNNER_OF_BOTH = Named("console-runner-both", ("runner",), (PROJECT, OTHER))
OPERATOR = Named("console-operator", ("admin",), "*")
# More sessions than the console's page (20), so that one "Load more" reads the rest.
IDLE_SESSIONS = 23
PROJECT_ROWS = "#projects tbody tr"
SESSION_ROWS = "#sessions tbody tr"


@pytest.fixture
def two_projects(tmp_path: Path) -> ConsoleServer:
    tokens = write_tokens(tmp_path / "tokens.toml", (RUNNER_OF_BOTH, GATEWAY, OPERATOR))
    return ConsoleServer(tmp_path, free_port(), free_port(), tokens)


@pytest.fixture
def console(chromium: webdriver.Chrome, two_projects: ConsoleServer, tmp_path: Path) -> Page:
    shots = tmp_path / "shots"
    shots.mkdir()
    return Page(chromium, two_projects.base, shots)


@asynccontextmanager
async def runner_in(server: ConsoleServer, project: str) -> AsyncIterator[Client]:
    async with Client(
        f"127.0.0.1:{server.grpc_port}", project, token=RUNNER_OF_BOTH.token, backoff=FAST
    ) as client:
        yield client


async def use_token(page: Page, token: str) -> None:
    await page.type_into("#token", token)
    await page.click("#token-form button[type=submit]")


async def first_cells(page: Page, rows: str) -> list[str]:
    return [text.split()[0] for text in await page.texts(rows)]


async def test_the_landing_page_lists_the_projects_the_token_may_see_and_a_project_its_sessions_newest_first(
    console: Page, two_projects: ConsoleServer
) -> None:
    async with (
        two_projects.start(),
        runner_in(two_projects, PROJECT) as ours,
        runner_in(two_projects, OTHER) as theirs,
    ):
        await console.open()
        await console.shown("#projects-status", "Could not list projects: unauthenticated")
        await use_token(console, GATEWAY.token)
        await console.shown("#projects-status", "No project this token may see has sessions yet")

        async with theirs.runner("r1").turn("elsewhere", "t1"):
            pass
        names = [f"s{index:02}" for index in range(IDLE_SESSIONS)]
        for name in names:
            async with ours.runner("r1").turn(name, "t1"):
                pass
        async with ours.runner("r1").turn("busy", "t1"):
            await console.reload()
            await console.shown(PROJECT_ROWS, PROJECT)
            assert await first_cells(console, PROJECT_ROWS) == [PROJECT], "the gateway sees its project only"
            await use_token(console, OPERATOR.token)
            await console.shown(PROJECT_ROWS, OTHER)
            assert await first_cells(console, PROJECT_ROWS) == [PROJECT, OTHER]
            await console.screenshot("projects")

            await console.click("#projects a", PROJECT)
            await console.shown("#busy tbody tr", "busy")
            first = await console.shown(SESSION_ROWS, "busy")
            assert "RUNNING" in first.text
            newest_first = ["busy", *names[::-1]]
            assert await first_cells(console, SESSION_ROWS) == newest_first[:20]
            assert "COMPLETED" in (await console.texts(SESSION_ROWS))[1]
            await console.click("#sessions-more", "Load more")
            await console.shown(SESSION_ROWS, "s00")
            assert await first_cells(console, SESSION_ROWS) == newest_first
            assert await console.script("return document.getElementById('sessions-more').hidden") is True
            await console.screenshot("sessions")

            await console.click("#sessions a", "busy")
            await console.attribute("#turn-state", "data-phase", "RUNNING")
    assert console.script_errors() == []
