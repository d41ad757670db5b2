"""How the console looks and reads, in a real browser against a real server: phases and outcomes
in tones of their own with readable text, in light and dark schemes; times in UTC with their date
beside how far they are from now, kept current by one timer; each turn's tool calls as a
waterfall with their durations; keyboard focus that reaches every action and shows; empty views
that say what to do; and a phone's width that nothing widens."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import cast

from selenium import webdriver
from selenium.webdriver.common.keys import Keys

from tests.console.browser import Page
from tests.console.conftest import GATEWAY, PROJECT, ConsoleServer
from tests.console.scenario import busy_session

PHONE = 390
SESSION = "chat-7"
# What each value of each enum the console shows looks like (status.js), and a value it does
# not know.
TONES = {
    "SESSION_PHASE_": {"IDLE": "phase-idle", "RUNNING": "phase-running", "STOPPING": "phase-stopping"},
    "TURN_PHASE_": {
        "RUNNING": "phase-running",
        "STOPPING": "phase-stopping",
        "QUEUED": "phase-waiting",
        "SETTLED": "phase-idle",
    },
    "TURN_OUTCOME_": {
        "COMPLETED": "outcome-succeeded",
        "FAILED": "outcome-failed",
        "CANCELLED": "outcome-interrupted",
        "LOST": "outcome-lost",
        "EXPIRED": "outcome-skipped",
    },
    "TOOL_CALL_STATUS_": {
        "OPEN": "phase-running",
        "SUCCEEDED": "outcome-succeeded",
        "FAILED": "outcome-failed",
        "INTERRUPTED": "outcome-interrupted",
    },
    "INTERACTION_STATUS_": {
        "PENDING": "phase-waiting",
        "RESOLVED": "outcome-succeeded",
        "CANCELLED": "outcome-interrupted",
    },
    "STEER_STATUS_": {
        "PENDING": "phase-waiting",
        "CONSUMED": "outcome-succeeded",
        "DECLINED": "outcome-skipped",
        "UNCONSUMED": "outcome-skipped",
        "EXPIRED": "outcome-skipped",
    },
}
ALL_TONES = sorted({tone for tones in TONES.values() for tone in tones.values()} | {"phase-paused"})
# A control as a test names it: its tag, id, link and words.
NAMED = """const named = (node) =>
  [node.tagName, node.id, node.getAttribute("href") || "", node.textContent].join("|");"""
# How long a call took, as a waterfall says it (time.js's duration, under a minute).
TOOK = r"(\d+ ms|\d\.\d s|\d+ s)"
# WCAG 2.1 AA for normal text.
AA = 4.5
# Each badge's text colour, background and line, as the browser computes them.
BADGE_COLOURS = """(module) => {
  const tones = TONES;
  const main = document.getElementById("view");
  return tones.map((tone) => {
    const badge = main.appendChild(module.toned(tone.toUpperCase(), tone));
    const style = getComputedStyle(badge);
    const colours = [tone, badge.textContent, style.color, style.backgroundColor, style.borderTopColor];
    badge.remove();
    return colours;
  });
}"""


def rgb(css: str) -> tuple[int, int, int]:
    found = re.fullmatch(r"rgba?\((\d+), (\d+), (\d+)(?:, 1)?\)", css)
    assert found, f"not an opaque colour: {css}"
    return int(found[1]), int(found[2]), int(found[3])


def contrast(first: str, second: str) -> float:
    """WCAG 2.1's contrast ratio of two sRGB colours."""

    def luminance(colour: str) -> float:
        linear = [c / 255 / 12.92 if c <= 10 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb(colour)]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(first), luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


async def test_every_phase_and_outcome_has_its_tone_and_interrupted_is_not_succeeded(
    page: Page, served: ConsoleServer
) -> None:
    await page.open()
    each = """(status) => Object.entries(TONES).flatMap(([prefix, names]) => Object.keys(names)
      .map((name) => {
        const badge = status.badge(prefix + name, prefix);
        return [prefix, name, badge.className, badge.textContent];
      }).concat([[prefix, "", status.badge("", prefix), ""]]))"""
    shown = await page.with_module("/console/status.js", each.replace("TONES", json.dumps(TONES)))
    assert isinstance(shown, list)
    for prefix, name, badge, text in shown:
        if not name:
            assert badge == "", f"an absent {prefix} value has no badge"
            continue
        assert badge == f"badge {TONES[prefix][name]}", (prefix, name)
        assert text == name, "the word is always there: colour is never the only sign"


async def test_each_tone_reads_at_wcag_aa_and_looks_unlike_the_others_in_light_and_dark(
    page: Page, served: ConsoleServer
) -> None:
    await page.open()
    colours = BADGE_COLOURS.replace("TONES", json.dumps(ALL_TONES))
    schemes = {"light": await page.with_module("/console/status.js", colours)}
    async with page.dark():
        schemes["dark"] = await page.with_module("/console/status.js", colours)
    for scheme, badges in schemes.items():
        assert isinstance(badges, list)
        assert [tone for tone, *_ in badges] == ALL_TONES
        looks = {}
        for tone, text, colour, background, line in badges:
            assert text == tone.upper()
            ratio = contrast(colour, background)
            assert ratio >= AA, f"{tone} in {scheme}: {colour} on {background} is {ratio:.2f}:1"
            looks[tone] = (colour, background, line)
        assert len(set(looks.values())) == len(looks), f"two tones look alike in {scheme}: {looks}"
        outcomes = {tone: look for tone, look in looks.items() if tone.startswith("outcome-")}
        assert len({background for _, background, _ in outcomes.values()}) == len(outcomes), scheme
        phases = {tone: look for tone, look in looks.items() if tone.startswith("phase-")}
        assert len({line for _, _, line in phases.values()}) == len(phases), scheme
    assert schemes["light"] != schemes["dark"]


async def test_times_read_in_utc_with_their_date_beside_how_far_they_are_from_now(
    page: Page, served: ConsoleServer
) -> None:
    await page.open()
    words = await page.with_module(
        "/console/time.js",
        """(time) => {
          const now = Date.parse("2026-12-05T14:03:07.123Z");
          const second = 1000, minute = 60 * second, hour = 60 * minute, day = 24 * hour;
          const moment = time.moment("2020-02-29T23:59:58.5Z");
          const clock = time.clock("2026-12-05T14:03:07.123456Z");
          return {
            utc: [time.utc(new Date(now)), time.utc(new Date(now), { ms: true })],
            relative: [19.9 * second, -3 * minute - 59 * second, 400, -400, -2 * hour, 47 * hour,
              3 * day + hour, -59 * second].map((gap) => time.relative(now + gap, now)),
            duration: [0, 850.4, 999.6, 4200, 9960, 19 * second, 3 * minute, 3 * minute + 5 * second,
              2 * hour + 3 * minute, 3 * day + 4 * hour, -5].map(time.duration),
            moment: [moment.textContent, moment.querySelector("time").getAttribute("datetime"),
              moment.querySelector("time").title,
              moment.querySelector(".relative").getAttribute("aria-hidden")],
            clock: [clock.textContent, clock.title, clock.querySelector(".date").textContent],
            day: [time.day("2026-12-05T23:59:59.999Z"), time.day("")],
            bad: [time.moment(""), time.moment("soon").textContent],
          };
        }""",
    )
    assert isinstance(words, dict)
    text, datetime, title, hidden = words.pop("moment")
    assert re.fullmatch(r"2020-02-29 23:59:58 UTC \(\d+ d ago\)", text), text
    assert (datetime, title, hidden) == ("2020-02-29T23:59:58.5Z", "2020-02-29 23:59:58.500 UTC", "true")
    assert words == {
        "utc": ["2026-12-05 14:03:07 UTC", "2026-12-05 14:03:07.123 UTC"],
        "relative": ["in 19 s", "3 min ago", "now", "now", "2 h ago", "in 47 h", "in 3 d", "59 s ago"],
        "duration": [
            "0 ms",
            "850 ms",
            "1.0 s",
            "4.2 s",
            "10 s",
            "19 s",
            "3 min",
            "3 min 5 s",
            "2 h 3 min",
            "3 d 4 h",
            "0 ms",
        ],
        "clock": ["2026-12-05 14:03:07.123", "2026-12-05 14:03:07.123 UTC", "2026-12-05 "],
        "day": ["2026-12-05", ""],
        "bad": ["", "soon"],
    }


async def test_the_waterfall_places_each_call_on_the_turns_axis_and_a_running_call_runs_to_now(
    page: Page, served: ConsoleServer
) -> None:
    await page.open()
    drawn = await page.with_module(
        "/console/waterfall.js",
        """(module) => {
          const at = (s) => new Date(Date.parse("2026-12-05T14:00:00Z") + s * 1000).toISOString();
          const turn = {
            turnId: "t1",
            admittedAt: at(0),
            toolCalls: [
              { callId: "c2", name: "run_tests", status: "TOOL_CALL_STATUS_OPEN", openedAt: at(5) },
              { callId: "c1", name: "read_file", status: "TOOL_CALL_STATUS_SUCCEEDED", openedAt: at(0.5),
                closedAt: at(2.5) },
            ],
            interactions: [
              { interactionId: "ask-1", kind: "approval", status: "INTERACTION_STATUS_PENDING",
                openedAt: at(8) },
            ],
          };
          const rows = (figure) => [figure.querySelector("figcaption").textContent,
            ...[...figure.querySelectorAll("li")].map((li) => {
              const bar = li.querySelector(".bar");
              return [li.querySelector(".what").textContent, bar.className,
                bar.style.getPropertyValue("--from"), bar.style.getPropertyValue("--width"),
                li.querySelector(".took").textContent];
            })];
          const settled = { ...turn, toolCalls: [turn.toolCalls[1]], interactions: [], settledAt: at(4) };
          return {
            running: rows(module.waterfall(turn, Date.parse(at(10)))),
            settled: rows(module.waterfall(settled, Date.parse(at(99)))),
            neverRan: module.waterfall({ ...turn, admittedAt: undefined }, 0),
            nothingRecorded: module.waterfall({ ...turn, toolCalls: [], interactions: [] }, 0),
          };
        }""",
    )
    assert drawn == {
        "running": [
            "Tool calls and interactions over the turn's 10 s so far",
            ["read_file (c1) SUCCEEDED", "bar outcome-succeeded", "5.000%", "20.000%", "2.0 s"],
            ["run_tests (c2) OPEN", "bar phase-running", "50.000%", "50.000%", "5.0 s so far"],
            ["approval (ask-1) PENDING", "bar phase-waiting", "80.000%", "20.000%", "2.0 s so far"],
        ],
        "settled": [
            "Tool calls and interactions over the turn's 4.0 s",
            ["read_file (c1) SUCCEEDED", "bar outcome-succeeded", "12.500%", "50.000%", "2.0 s"],
        ],
        "neverRan": "",
        "nothingRecorded": "",
    }


def width(css: str) -> Callable[[webdriver.Chrome], float | None]:
    """The width of the bar at `css`, in percent of its track (None while there is none)."""
    script = f"const bar = document.querySelector({css!r});"
    script += "return bar && bar.style.getPropertyValue('--width')"
    return lambda d: float(shown.rstrip("%")) if (shown := d.execute_script(script)) else None


async def test_a_session_shows_its_turns_outcomes_in_their_tones_and_each_turn_as_a_waterfall_growing_live(
    page: Page, served: ConsoleServer
) -> None:
    async with busy_session(served, SESSION):
        await page.sign_in(GATEWAY.token, f"project={PROJECT}&session={SESSION}")
        for turn_id, tone, outcome in (
            ("turn-1", "outcome-succeeded", "COMPLETED"),
            ("turn-2", "outcome-interrupted", "CANCELLED"),
            ("turn-3", "outcome-failed", "FAILED"),
        ):
            badge = await page.shown(f'#earlier > li[data-turn="{turn_id}"] > .badge')
            assert (badge.get_attribute("class"), badge.text) == (f"badge {tone}", outcome)
        interrupted = await page.shown('#earlier li[data-turn="turn-2"] li[data-span="c2"]')
        badge = await page.shown('#earlier li[data-turn="turn-2"] li[data-span="c2"] .badge')
        assert badge.get_attribute("class") == "badge outcome-interrupted"
        assert re.fullmatch(rf"run_tests \(c2\) INTERRUPTED\s+{TOOK}", interrupted.text), interrupted.text
        took = await page.texts('#earlier li[data-turn="turn-1"] .waterfall .took')
        assert len(took) == 3
        assert all(re.fullmatch(TOOK, text) for text in took), took

        state = await page.shown("#turn-state .badge")
        assert (state.get_attribute("class"), state.text) == ("badge phase-running", "RUNNING")
        running = await page.shown('#running-waterfall li[data-span="c3"]', "run_tests (c3) OPEN")
        assert re.search(rf"{TOOK} so far$", running.text), running.text
        done = await page.shown('#running-waterfall li[data-span="c1"]', "read_file (c1) SUCCEEDED")
        assert re.search(rf"{TOOK}$", done.text), done.text
        # An open call's bar grows with the turn while a closed one shrinks on its longer axis.
        open_bar = '#running-waterfall li[data-span="c3"] .bar'
        first = await page.until(width(open_bar))
        await page.until(lambda d: (width(open_bar)(d) or 0) > first)
    assert page.script_errors() == []


async def test_relative_times_count_on_live_from_one_timer_for_the_whole_page(
    page: Page, served: ConsoleServer
) -> None:
    counting = "window.__intervals = 0; const every = window.setInterval;" + (
        "window.setInterval = (...args) => { window.__intervals += 1; return every(...args); };"
    )
    added = await page.script_on_every_page(counting)
    try:
        async with busy_session(served, SESSION):
            await page.sign_in(GATEWAY.token, f"project={PROJECT}")
            deadline = await page.shown("#busy tbody td[data-label=Deadline] .moment")
            assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(in \d+ s\)", deadline.text)
            admitted = "#busy tbody td[data-label=Admitted] .relative"
            before = (await page.shown(admitted)).text
            await page.until(lambda d: d.find_element("css selector", admitted).text != before)
            assert re.fullmatch(r"\(\d+ s ago\)", (await page.shown(admitted)).text)
            await page.open(f"project={PROJECT}&session={SESSION}")
            await page.shown("#earlier .moment")
            live = await page.script("return document.querySelectorAll('[data-live]').length")
            assert isinstance(live, int)
            assert live > 5
            assert await page.script("return window.__intervals") == 1
    finally:
        await page.forget_script(added)


async def test_every_action_is_reached_with_the_tab_key_and_shows_a_focus_outline(
    page: Page, served: ConsoleServer
) -> None:
    # Each control the page can be used with, in the page's order (no tabindex reorders it).
    controls = f"""{NAMED}
      return [...document.querySelectorAll("a[href], button, input, textarea, select, summary")]
        .filter((node) => !node.disabled && node.getClientRects().length).map(named);"""
    focused = f"""{NAMED} const node = document.activeElement; const style = getComputedStyle(node);
      return [named(node), style.outlineStyle, style.outlineWidth];"""
    async with busy_session(served, SESSION):
        await page.sign_in(GATEWAY.token, "")
        for fragment, ready in (
            (f"project={PROJECT}", ("#busy tbody a",)),
            (f"project={PROJECT}&session={SESSION}", ("#earlier .waterfall", "#queue button")),
            (f"project={PROJECT}&session={SESSION}&turn=turn-2", ("#turn-detail a.trace",)),
        ):
            await page.open(fragment)
            for css in ready:
                await page.shown(css)
            expected = await page.script(controls)
            assert isinstance(expected, list)
            assert len(expected) > 5
            # From wherever the focus is (the browser's own controls count as one stop) to the
            # page's first control, then on through all of them.
            reached: list[str] = []
            for _ in range(2 * len(expected) + 2):
                await page.press(Keys.TAB)
                control, outline, width = cast(list[str], await page.script(focused))
                if reached or control == expected[0]:
                    assert (outline, width) == ("solid", "3px"), f"{control} shows no focus"
                    reached.append(control)
                if len(reached) == len(expected):
                    break
            assert reached == expected, fragment


async def test_each_empty_view_says_what_is_missing_and_what_to_do(page: Page, served: ConsoleServer) -> None:
    await page.sign_in(GATEWAY.token, "")
    start = await page.shown("#start")
    assert "Nothing is open yet. Type a project above" in start.text

    await page.open(f"project={PROJECT}")
    idle = await page.shown("#busy p.empty")
    assert f"No session of project {PROJECT} has an active turn or a waiting queue." in idle.text
    assert "type its name in Session above" in idle.text

    await page.open(f"project={PROJECT}&session={SESSION}")
    await page.shown("#turn-state", "Never seen")
    history = await page.shown("#earlier-status.empty", "No turn has run in this session yet.")
    assert "shows here when the session is opened again" in history.text
    queue = await page.shown("#queue li.empty", "No turn is waiting.")
    assert "ENQUEUE" in queue.text
    assert await page.texts("#running-waterfall li") == []

    async with served.runner_client() as sdk, sdk.runner("r1").turn(SESSION, "t1"):
        pass
    await page.open(f"project={PROJECT}&session={SESSION}&turn=t1")
    await page.shown("#turn-detail p.empty", "No tool calls: its runner recorded none.")
    await page.shown("#turn-detail p.empty", "No interactions: nothing in this turn waited for a person.")
    assert page.script_errors() == []


async def test_long_unbroken_words_of_runners_wrap_at_a_phones_width_instead_of_widening_the_page(
    page: Page, served: ConsoleServer
) -> None:
    name = "tool_" + "x" * 150
    error = "E" * 400
    async with served.runner_client() as sdk, sdk.runner("runner-" + "r" * 100).turn(SESSION, "t1") as turn:
        try:
            async with turn.tool_call("c1", name):
                raise RuntimeError(error)
        except RuntimeError:
            pass
        await page.sign_in(GATEWAY.token, "")
        async with page.width(PHONE):
            for fragment, ready in (
                (f"project={PROJECT}", "#busy tbody td"),
                (f"project={PROJECT}&session={SESSION}", '#running-waterfall li[data-span="c1"]'),
                (f"project={PROJECT}&session={SESSION}&turn=t1", "#turn-detail tbody td"),
            ):
                await page.open(fragment)
                await page.shown(ready)
                assert await page.overflow_x() == 0, fragment
