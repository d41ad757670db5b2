"""Each view of the console at a desktop's width (1400 px) and a phone's (390 px), on a session with
some history (turns completed, interrupted by a Stop and failed), a running turn with a call
still open and a question pending, and a queue: each loads with no error in the browser's log
(failed loads included: the favicon is there) and nothing scrolls sideways, and is pictured.

With TURNGATE_WRITE_SCREENSHOTS=1 the pictures replace docs/console/*.png, which docs/browsers.md
shows (docs/developing.md says when); otherwise they go to the test's temporary directory."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from selenium import webdriver

from tests.console.browser import Page
from tests.console.conftest import PROJECT, WATCHER, ConsoleServer
from tests.console.scenario import busy_session, call, watched_events

DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"
WIDTHS = (1400, 390)
SESSION = "chat-42"


def count(css: str, at_least: int) -> Callable[[webdriver.Chrome], bool]:
    return lambda d: len(d.find_elements("css selector", css)) >= at_least


# Each view: its fragment, and what it shows once it has read everything it reads.
VIEWS: dict[str, tuple[str, Callable[[webdriver.Chrome], bool]]] = {
    "start": ("", count("#start", 1)),
    "busy": (f"project={PROJECT}", count("#busy tbody tr .moment", 1)),
    "session": (
        f"project={PROJECT}&session={SESSION}",
        lambda d: all(
            count(css, n)(d)
            for css, n in (
                ('#running-waterfall li[data-span="c3"]', 1),
                ('#queue li[data-turn="turn-6"]', 1),
                ("#earlier .waterfall", 3),
                ('#timeline li[data-kind="snapshot"]', 1),
            )
        ),
    ),
    "turn": (f"project={PROJECT}&session={SESSION}&turn=turn-2", count("#turn-detail .waterfall li", 2)),
}


def pictures(tmp_path: Path) -> Path:
    if os.environ.get("TURNGATE_WRITE_SCREENSHOTS") == "1":
        DOCS.mkdir(exist_ok=True)
        return DOCS
    return tmp_path


async def test_each_view_at_1400_and_390_px_loads_without_errors_fits_its_width_and_is_pictured(
    page: Page, served: ConsoleServer, tmp_path: Path
) -> None:
    into = pictures(tmp_path)
    async with busy_session(served, SESSION) as busy:
        await page.sign_in(WATCHER.token, "")
        # Before the token was typed, the landing page's ListProjects was refused (401), as it
        # should be: the views are pictured with the token, from here on.
        assert all("ListProjects" in entry and " 401 " in entry for entry in page.severe_log())
        await page.open(VIEWS["session"][0])
        await page.shown('#timeline li[data-kind="snapshot"]')
        await watched_events(served, busy)  # kept by the tab: each later visit shows them again
        await page.shown('#timeline li[data-kind="toolCall"]', "edit_file (c4) SUCCEEDED")
        for width in WIDTHS:
            async with page.width(width):
                for name, (fragment, ready) in VIEWS.items():
                    await page.open(fragment)
                    await page.until(ready)
                    if name == "session":  # a resumed watch says "waiting" until an event comes
                        await call(busy.running, f"c-{width}", "grep")
                        await page.shown('#watch-status[data-live="yes"]')
                    assert page.severe_log() == [], (name, width)
                    assert await page.overflow_x() == 0, f"{name} at {width} px scrolls sideways"
                    await page.full_screenshot(into / f"{name}-{width}.png")
        assert sorted(path.name for path in into.glob("*.png")) == sorted(
            f"{name}-{width}.png" for name in VIEWS for width in WIDTHS
        )
