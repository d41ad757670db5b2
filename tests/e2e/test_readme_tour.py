"""The README's five-minute tour, run as a reader runs it: its commands (parsed out of README.md,
so they cannot drift) in the README's order, each in its own process against a `turngate serve`
of the test's own, their output compared with the README's blocks once the times, generations and
durations are normalised (`tests/e2e/readme.py`). The README's outputs are this test's outputs.

Where the README shows a command acting at a given point (the Stop during call-4, `status` while
call-2 runs), the test waits for that point as a reader would see it (the runner's line), then
types the command: every tool call lasts 5 s, ample for a command to start.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.e2e.readme import ELIDED, Command, Tour, matches, normalised, tour
from tests.support.processes import TURNGATE, cli_env, free_port, spawn_server

ROOT = Path(__file__).resolve().parents[2]
# How long a line or an exit may take: reached only when the test fails.
LINE_TIMEOUT_S = 30.0
# The tool call the README's Stop interrupts names it: `…: call-4 cancelled, winding down`.
INTERRUPTED_CALL = re.compile(r"call=(call-\d+) name=\S+ status=INTERRUPTED")


class Terminal:
    """A command of the tour running in its own process: what it printed (stdout and stderr, as a
    terminal shows them), line by line as it prints them."""

    def __init__(self, command: Command, process: asyncio.subprocess.Process) -> None:
        self.command = command
        self.process = process
        self.lines: list[str] = []
        self.shown = 0  # the lines compared with the README so far
        self._printed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            async with self._printed:
                self.lines.append(raw.decode().rstrip("\n"))
                self._printed.notify_all()

    async def printed(self, count: int) -> list[str]:
        """Waits for `count` lines after those compared so far, and takes them as compared."""
        async with asyncio.timeout(LINE_TIMEOUT_S), self._printed:
            await self._printed.wait_for(lambda: len(self.lines) >= self.shown + count)
        taken, self.shown = self.lines[self.shown : self.shown + count], self.shown + count
        return taken

    async def until(self, start: str) -> None:
        """Waits until it prints a line that starts so (normalised), after those compared so far."""
        async with asyncio.timeout(LINE_TIMEOUT_S), self._printed:
            await self._printed.wait_for(
                lambda: any(
                    normalised(line).startswith(normalised(start)) for line in self.lines[self.shown :]
                )
            )

    async def ended(self) -> list[str]:
        """Waits for it to exit with the README's exit code; the lines not compared yet."""
        async with asyncio.timeout(LINE_TIMEOUT_S):
            code = await self.process.wait()
            await self._reader
        assert code == self.command.exit_code, f"`{self.command.line}` exited {code}:\n" + "\n".join(
            self.lines
        )
        rest, self.shown = self.lines[self.shown :], len(self.lines)
        return rest

    async def interrupt(self) -> list[str]:
        """Ctrl-C."""
        self.process.send_signal(signal.SIGINT)
        return await self.ended()


class Reader:
    """Types the tour's commands, as the README shows them, in the README's directory and
    environment (TURNGATE_TARGET is the test's server, where the README's is the default)."""

    def __init__(self, readme: Tour, target: str) -> None:
        self.readme = readme
        self.env = cli_env(TURNGATE_TARGET=target, PYTHONUNBUFFERED="1", **readme.environment)
        self.started: list[Terminal] = []

    async def start(self, starts: str) -> Terminal:
        command = self.readme.command(starts)
        program, *args = command.argv
        executable = {"turngate": TURNGATE, "python": sys.executable}[program]
        process = await asyncio.create_subprocess_exec(
            executable,
            *args,
            cwd=ROOT,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        terminal = Terminal(command, process)
        self.started.append(terminal)
        return terminal

    async def run(self, starts: str) -> None:
        """A `$` command: it prints what the README shows after it (all of it, or in the
        background its first lines), and ends with the README's exit code."""
        terminal = await self.start(starts)
        shown = terminal.command.output
        assert shown is not None, f"`{terminal.command.line}` is shown without its output"
        if terminal.command.background:
            same(shown, await terminal.printed(len(shown)), terminal.command.line)
        else:
            same(shown, await terminal.ended(), terminal.command.line)

    async def shows(self, terminal: Terminal) -> None:
        """The README's next output block is what `terminal` printed next."""
        shown = self.readme.output()
        wanted = len(shown) if ELIDED not in shown else None
        printed = await terminal.printed(wanted) if wanted is not None else await terminal.ended()
        same(shown, printed, terminal.command.line)

    async def kill_leftovers(self) -> None:
        for terminal in self.started:
            if terminal.process.returncode is None:
                terminal.process.kill()
                await terminal.process.wait()


def same(shown: list[str], printed: list[str], command: str) -> None:
    assert matches(shown, printed), (
        f"`{command}`: the README shows\n" + "\n".join(shown) + "\n\nwhere it printed\n" + "\n".join(printed)
    )


@asynccontextmanager
async def reading(readme: Tour, target: str) -> AsyncIterator[Reader]:
    reader = Reader(readme, target)
    try:
        yield reader
    finally:
        await reader.kill_leftovers()


def interrupted_call(shown: list[str], turn: str) -> str:
    """The tool call the README shows a Stop interrupting in `turn` (in the watch's lines)."""
    [call] = [
        found[1] for line in shown if f"turn={turn} " in line if (found := INTERRUPTED_CALL.search(line))
    ]
    return call


@pytest.mark.timeout(300)
async def test_the_readme_tour_prints_what_the_readme_shows(tmp_path: Path) -> None:
    readme = tour()
    assert readme.environment == {"TURNGATE_PROJECT": "demo"}
    port = free_port()
    async with spawn_server(tmp_path, port=port), reading(readme, f"127.0.0.1:{port}") as reader:
        watched = readme.output_after("turngate turn show")
        # Terminal 1 watches chat-1; terminal 2 runs turn-1 and prints its first calls.
        watch = await reader.start("turngate watch chat-1")
        await watch.until(watched[0])
        runner = await reader.start("python examples/demo_runner.py chat-1 turn-1")
        await reader.shows(runner)
        # Terminal 3, while call-2 runs.
        await reader.run("turngate status chat-1")
        await reader.run("turngate sessions busy")
        await reader.run("python examples/demo_runner.py chat-1 turn-2")
        # The Stop, during the call the README shows it interrupting.
        stopped = readme.output_after("python examples/demo_stop.py chat-1 turn-1")
        await runner.until(next(line for line in stopped if line != ELIDED))
        await reader.run("python examples/demo_stop.py chat-1 turn-1")
        await reader.shows(runner)
        await reader.run("python examples/demo_runner.py chat-1 turn-1")
        # turn-2, stopped (and waited for) during the call the watch's lines show interrupted.
        second = await reader.start("python examples/demo_runner.py chat-1 turn-2")
        await second.until("admitted turn-2 in chat-1")
        await reader.run("turngate stop chat-1 --expect turn-1")
        await second.until(f"   {interrupted_call(watched, 'turn-2')}: searching")
        await reader.run("turngate stop chat-1 --expect turn-2 --reason user --wait 5")
        assert (await second.ended())[-1] == "turn-2 settled TURN_OUTCOME_CANCELLED"
        await reader.run("turngate stop chat-1")
        await reader.run("turngate turn show turn-1 --session chat-1")
        # Terminal 1's lines, then Ctrl-C.
        await watch.until(watched[-1])
        same(readme.output(), await watch.interrupt(), watch.command.line)

        # The queue: a long turn in terminal 2, two messages queued behind it in terminal 3.
        long = await reader.start("python examples/demo_runner.py chat-2 turn-1")
        await long.until("admitted turn-1 in chat-2")
        await reader.run("python examples/demo_runner.py chat-2 turn-2 --queue")
        queued_second = reader.started[-1]
        await reader.run("python examples/demo_runner.py chat-2 turn-3 --queue")
        queued_third = reader.started[-1]
        await reader.run("turngate queue show chat-2")
        await reader.run("turngate stop chat-2 --expect turn-1")
        assert (await long.ended())[-1] == "turn-1 settled TURN_OUTCOME_CANCELLED"
        await reader.run("turngate queue show chat-2")
        await reader.run("turngate queue resume chat-2")
        # The steer, while turn-2's first call runs: folded into its second.
        await queued_second.until("   call-1: searching")
        await reader.run("turngate steer chat-2 --expect turn-2")
        await reader.shows(queued_second)
        await reader.shows(queued_third)
        assert await queued_second.ended() == []
        assert await queued_third.ended() == []

        # The same story in one script.
        script = await reader.start("python examples/tour.py")
        played = "\n".join(await script.ended())
        readme.finished()

    for line in (
        "the tour's session: chat-",
        "heartbeat every 6.7s",
        "ABORTED SESSION_TURN_IN_USE active=turn-1",
        "cancelled: stopping=turn-1",
        "stop_requested reason='user'",
        "outcome=TURN_OUTCOME_CANCELLED by=SETTLED_BY_RUNNER",
        "mismatch: current=turn-2",
        "call-1 TOOL_CALL_STATUS_INTERRUPTED",
        "[watch] seq=5 turn_settled",
        "turn-4 waits at position 1",
        "turn-5 waits at position 2",
        "queue_paused_by=turn-3 queue=['turn-4', 'turn-5']",
        "resumed: admitted=turn-4",
        "turn-4 runs, admitted from the queue",
        "turn-5 runs, admitted from the queue",
    ):
        assert line in played
