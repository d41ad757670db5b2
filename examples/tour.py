"""A five-minute tour of turngate: admission, a busy refusal, a guarded Stop, a live watch, and
two messages waiting in the session's queue while a Stop pauses it.

Run `turngate serve` in one terminal, then `python examples/tour.py` in another
(`--target HOST:PORT`, `--project ID`: the `turngate` command's defaults and variables,
TURNGATE_TARGET and TURNGATE_PROJECT; a positional HOST:PORT still works). It plays a runner, a
gateway and a watcher, with the SDK (`turngate.client`). Exit codes: exits.py (0: the whole tour
played; 1 with one line when the service fails or answers otherwise than the tour expects).
"""

from __future__ import annotations

import argparse
import asyncio
import uuid

from turngate.client import (
    AdmissionMode,
    Cancelled,
    Client,
    Mismatch,
    QueuedTurn,
    SessionBusy,
    Turn,
    TurnRecord,
)
from turngate.client.defaults import DEFAULT_PROJECT, default_project, default_target

from exits import Exit, Unexpected, expect, run


def say(step: str) -> None:
    print(f"\n== {step}")


async def watch(client: Client, session_id: str) -> None:
    """Prints every event of the session, starting from a snapshot."""
    async for event in client.watch(session_id):
        print(f"   [watch] seq={event.seq} {event.kind}")


async def search(turn: Turn, opened: asyncio.Event) -> None:
    """A tool call that runs until it is cancelled."""
    async with turn.tool_call("call-1", "search"):
        opened.set()
        await asyncio.sleep(3600)


async def queued_message(client: Client, session_id: str, turn_id: str, queued: asyncio.Event) -> None:
    """A runner whose turn waits in the session's queue, then runs (and completes) once admitted."""

    def place(waiting: QueuedTurn) -> None:
        print(f"   {turn_id} waits at position {waiting.position}")
        queued.set()

    runner = client.runner(f"runner-{turn_id}")
    async with runner.turn(session_id, turn_id, mode=AdmissionMode.ENQUEUE, on_queued=place) as turn:
        print(f"   {turn_id} runs, admitted from the queue (generation {turn.generation})")


async def tour(target: str, project: str = DEFAULT_PROJECT) -> Exit:
    async with Client(target, project) as client:
        session_id = f"chat-{uuid.uuid4().hex[:8]}"
        print(
            f"the tour's session: {session_id} in project {project} (watch it: turngate watch {session_id})"
        )
        gateway = client.gateway()
        watcher = asyncio.create_task(watch(client, session_id))
        await asyncio.sleep(0.2)

        say("a runner asks to run turn-1: admitted, with a fencing generation")
        async with client.runner("runner-a").turn(session_id, "turn-1") as turn:
            print(f"   generation={turn.generation} heartbeat every {turn.heartbeat_interval:.1f}s")

            say("a second message arrives while turn-1 runs: refused, turn-1 is untouched")
            try:
                async with client.runner("runner-b").turn(session_id, "turn-2"):
                    raise Unexpected("turn-2 was admitted while turn-1 runs")
            except SessionBusy as busy:
                print(f"   {busy.code.name} {busy.reason.name} active={busy.active_turn_id}")

            say("the runner opens a tool call, then the user presses Stop on turn-1")
            opened = asyncio.Event()
            tool = asyncio.create_task(search(turn, opened))
            await opened.wait()
            stop = expect(await gateway.stop(session_id, expected_turn_id="turn-1", reason="user"), Cancelled)
            print(f"   cancelled: stopping={stop.stopping_turn_id}")

            say("the Stop is pushed to the runner at once; it cancels its tool call and reports CANCELLED")
            await turn.stop_requested.wait()
            print(f"   stop_requested reason={turn.stop_reason!r}")
            tool.cancel()
            await asyncio.wait({tool})
        settled = expect(turn.settled, TurnRecord)
        outcome, by = settled.outcome.proto_name, settled.settled_by.proto_name
        print(f"   outcome={outcome} by={by}")

        say("turn-2 is admitted; a late Stop meant for turn-1 does not touch it")
        async with client.runner("runner-b").turn(session_id, "turn-2"):
            late = expect(await gateway.stop(session_id, expected_turn_id="turn-1"), Mismatch)
            print(f"   mismatch: current={late.current_turn_id}")

        say("turn-1's history: the tool call left open by the Stop was closed INTERRUPTED")
        for tool_call in (await client.get_turn(session_id, "turn-1")).tool_calls:
            print(f"   {tool_call.call_id} {tool_call.status.proto_name}")

        say("two messages arrive while turn-3 runs: with ENQUEUE they wait, first in first out")
        async with client.runner("runner-a").turn(session_id, "turn-3") as turn:
            waiting = []
            for turn_id in ("turn-4", "turn-5"):
                queued = asyncio.Event()
                waiting.append(asyncio.create_task(queued_message(client, session_id, turn_id, queued)))
                await queued.wait()

            say("the user presses Stop on turn-3: its end pauses the queue, so nothing starts unasked")
            await gateway.stop(session_id, expected_turn_id="turn-3", reason="user")
            await turn.stop_requested.wait()
        paused = await client.get_session(session_id)
        print(f"   queue_paused_by={paused.queue_paused_by} queue={[q.turn_id for q in paused.queue]}")

        say("the user resumes the queue: turn-4 runs, and when it completes turn-5 follows")
        resumed = await gateway.resume_queue(session_id)
        print(f"   resumed: admitted={resumed.admitted_turn_id}")
        await asyncio.gather(*waiting)

        await asyncio.sleep(0.2)
        watcher.cancel()
    return Exit.OK


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    # The positional address is the tour's first interface, kept for those who learnt it.
    parser.add_argument("address", nargs="?", metavar="HOST:PORT", help="the same as --target")
    parser.add_argument("--target", help="[TURNGATE_TARGET, 127.0.0.1:50051]")
    parser.add_argument("--project", default=default_project(), help="[TURNGATE_PROJECT, default]")
    args = parser.parse_args()
    if args.address and args.target:
        parser.error("give HOST:PORT or --target, not both")
    target = args.target or args.address or default_target()
    run(tour(target, args.project), target)


if __name__ == "__main__":
    main()
