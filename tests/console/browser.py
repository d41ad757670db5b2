"""Debian's chromium, headless, driven through its own chromedriver (explicit paths: Selenium
Manager, which would download a browser, never runs), and the console's page as the tests see it.

Selenium blocks; the runner and the server's clients live on the test's event loop, so every
browser call goes through a thread (`Page`'s async methods) and the loop keeps running meanwhile.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# How long the page may take to show what a test waits for: reached only when a test fails.
SHOW_TIMEOUT_S = 15.0
# Narrower than this, a width is emulated as a phone's.
PHONE_WIDTH = 600

T = TypeVar("T")


def start_chromium() -> webdriver.Chrome:
    """Raises WebDriverException (or OSError) when the browser cannot start."""
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        raise WebDriverException(f"{CHROMIUM} or {CHROMEDRIVER} is not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)


# An element's attributes, by name, read in the page.
_ATTRIBUTES = "return Object.fromEntries([...arguments[0].attributes].map((a) => [a.name, a.value]));"


@dataclass(frozen=True)
class Shown:
    """An element as the page showed it when it was found: its text and attributes read together,
    so that the page drawing it again later (the live times each second, the busy list at each
    poll) leaves nothing stale to read."""

    text: str
    attributes: dict[str, str]

    def get_attribute(self, name: str) -> str | None:
        return self.attributes.get(name)


class Page:
    """The console in the browser, at `base` (the HTTP listener's address)."""

    def __init__(self, driver: webdriver.Chrome, base: str, shots: Path) -> None:
        self.driver = driver
        self.base = base
        self.shots = shots

    async def _run(self, action: Callable[[], T]) -> T:
        return await asyncio.to_thread(action)

    async def _cdp(self, command: str, parameters: Mapping[str, object]) -> dict[str, object]:
        """A Chrome DevTools Protocol command's answer."""
        answer: dict[str, object] = await self._run(
            lambda: self.driver.execute_cdp_cmd(command, dict(parameters))
        )
        return answer

    async def open(self, fragment: str = "") -> None:
        await self._run(lambda: self.driver.get(f"{self.base}/#{fragment}"))
        await self.until(lambda d: d.execute_script("return document.readyState") == "complete")

    async def sign_in(self, token: str, fragment: str) -> None:
        """Opens the view at `fragment` and uses `token` in this tab."""
        await self.open(fragment)
        await self.type_into("#token", token)
        await self.click("#token-form button[type=submit]")

    async def watching(self) -> None:
        """Waits until the session view's watch is live (its snapshot arrived): an event from now
        on reaches the timeline as a row of its own; one from before is only in the snapshot."""
        await self.attribute("#watch-status", "data-live", "yes")

    async def leave(self) -> None:
        await self._run(lambda: self.driver.get("about:blank"))

    async def reload(self) -> None:
        await self._run(self.driver.refresh)

    async def until(self, condition: Callable[[webdriver.Chrome], T | None]) -> T:
        """What `condition` returns once it is truthy (a stale element counts as not yet)."""
        stale = (StaleElementReferenceException,)
        wait = WebDriverWait(self.driver, SHOW_TIMEOUT_S, ignored_exceptions=stale)
        return await self._run(lambda: wait.until(lambda driver: condition(driver) or False))

    async def shown(self, css: str, text: str = "") -> Shown:
        """The first element matching `css` whose text contains `text`, once there is one, as it
        was then."""

        def find(driver: webdriver.Chrome) -> Shown | None:
            for element in driver.find_elements(By.CSS_SELECTOR, css):
                if text in (seen := element.text):
                    return Shown(seen, driver.execute_script(_ATTRIBUTES, element))
            return None

        return await self.until(find)

    async def attribute(self, css: str, name: str, value: str) -> None:
        await self.until(lambda d: d.find_element(By.CSS_SELECTOR, css).get_attribute(name) == value)

    async def type_into(self, css: str, text: str) -> None:
        def typing() -> None:
            field = self.driver.find_element(By.CSS_SELECTOR, css)
            field.clear()
            field.send_keys(text)

        await self._run(typing)

    async def click(self, css: str, text: str = "") -> None:
        """Clicks the first element matching `css` whose text contains `text`, once there is one
        (found again if the page draws it again before the click)."""

        def clicked(driver: webdriver.Chrome) -> bool:
            for element in driver.find_elements(By.CSS_SELECTOR, css):
                if text in element.text:
                    element.click()
                    return True
            return False

        await self.until(clicked)

    async def texts(self, css: str) -> list[str]:
        return await self._run(lambda: [e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css)])

    async def attributes(self, css: str, name: str) -> list[str]:
        def values() -> list[str]:
            return [e.get_attribute(name) or "" for e in self.driver.find_elements(By.CSS_SELECTOR, css)]

        return await self._run(values)

    async def script(self, source: str) -> object:
        return await self._run(lambda: self.driver.execute_script(source))

    async def press(self, key: str) -> None:
        """A key pressed where the focus is, as a person would (so :focus-visible applies)."""
        await self._run(lambda: ActionChains(self.driver).send_keys(key).perform())

    async def script_on_every_page(self, source: str) -> str:
        """Runs `source` in every page this browser opens from now on, before the page's own
        scripts; the id to forget it with."""
        added = await self._cdp("Page.addScriptToEvaluateOnNewDocument", {"source": source})
        return str(added["identifier"])

    async def forget_script(self, identifier: str) -> None:
        await self._cdp("Page.removeScriptToEvaluateOnNewDocument", {"identifier": identifier})

    async def with_module(self, path: str, function: str) -> object:
        """What `function` (JavaScript, of the module's exports; it may return a promise) returns
        for the page's module at `path`: a module's own functions tested where they run."""
        source = (
            "const done = arguments[arguments.length - 1];"
            f"import({json.dumps(path)}).then({function}).then(done, (error) => done(`threw: ${{error}}`));"
        )
        return await self._run(lambda: self.driver.execute_async_script(source))

    @asynccontextmanager
    async def watch_blocked(self) -> AsyncIterator[None]:
        """WatchSession calls fail (as on a cut network) while other calls go through."""
        blocking = {"urls": ["*/turngate.v1.SessionService/WatchSession"]}
        await self._cdp("Network.enable", {})
        await self._cdp("Network.setBlockedURLs", blocking)
        try:
            yield
        finally:
            await self._cdp("Network.setBlockedURLs", {"urls": []})

    async def screenshot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        await self._run(lambda: self.driver.save_screenshot(str(path)))
        return path

    @asynccontextmanager
    async def width(self, pixels: int) -> AsyncIterator[None]:
        """The page laid out `pixels` wide without scroll bars (a phone's width as a phone's), as on
        a screen of that size; the browser's own size again after."""
        metrics = {"width": pixels, "height": 900, "deviceScaleFactor": 1, "mobile": pixels < PHONE_WIDTH}
        await self._cdp("Emulation.setDeviceMetricsOverride", metrics)
        await self._cdp("Emulation.setScrollbarsHidden", {"hidden": True})
        try:
            yield
        finally:
            await self._cdp("Emulation.setScrollbarsHidden", {"hidden": False})
            await self._cdp("Emulation.clearDeviceMetricsOverride", {})

    @asynccontextmanager
    async def dark(self) -> AsyncIterator[None]:
        """The page as in a browser set to a dark colour scheme."""
        media = {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
        await self._cdp("Emulation.setEmulatedMedia", media)
        try:
            yield
        finally:
            await self._cdp("Emulation.setEmulatedMedia", {"features": []})

    async def full_screenshot(self, path: Path) -> None:
        """The whole page, however long, as a PNG at `path`."""

        def capture() -> None:
            size = self.driver.execute_script(
                "return [document.documentElement.clientWidth, document.documentElement.scrollHeight]"
            )
            clip = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
            shot = self.driver.execute_cdp_cmd(
                "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
            )
            path.write_bytes(base64.b64decode(shot["data"]))

        await self._run(capture)

    async def overflow_x(self) -> int:
        """By how many pixels the page is wider than its window (0: nothing scrolls sideways)."""
        widths = await self.script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert isinstance(widths, list)
        return max(0, int(widths[0]) - int(widths[1]))

    def script_errors(self) -> list[str]:
        """The page's errors since its log was last read: what its scripts threw or logged as
        errors (a refused call's HTTP status, which the browser logs as a failed load, is not one)."""
        entries: list[dict[str, str]] = self.driver.get_log("browser")  # type: ignore[no-untyped-call]
        return [e["message"] for e in entries if e["level"] == "SEVERE" and e["source"] != "network"]

    def severe_log(self) -> list[str]:
        """Every error the page logged since its log was last read, failed loads included (a
        missing file, a refused style or script)."""
        entries: list[dict[str, str]] = self.driver.get_log("browser")  # type: ignore[no-untyped-call]
        return [e["message"] for e in entries if e["level"] == "SEVERE"]

    def console_log(self) -> list[str]:
        """The page's console messages so far (for a failing test's report)."""
        entries: list[dict[str, str]] = self.driver.get_log("browser")  # type: ignore[no-untyped-call]
        return [entry["message"] for entry in entries]
