"""A fake agent that runs one turn: a few tool calls with sleeps, honouring Stop.

    python examples/demo_runner.py SESSION [TURN] [--queue] [--steps N] [--step-seconds S]
                                   [--target HOST:PORT] [--project ID]

Stop it from another terminal with `python examples/demo_stop.py SESSION`: the Stop reaches the
runner at once (pushed, not polled); the tool call in progress is cancelled, so the service closes
it INTERRUPTED, and the turn reports CANCELLED. With `--queue`, a turn that finds the session busy
waits in its queue (printing its place as it changes) and runs once the turns ahead have ended.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid

from turngate.client import AdmissionMode, Client, LeftQueue, QueuedTurn, SessionBusy, Turn, TurnOutcome
from turngate.client.defaults import default_project, default_target


async def tool(turn: Turn, call_id: str, seconds: float) -> None:
    """One tool call: recorded OPEN, then SUCCEEDED (or left open if cancelled)."""
    async with turn.tool_call(call_id, "search"):
        print(f"   {call_id}: searching for {seconds:.1f}s")
        await asyncio.sleep(seconds)


async def unless_stopped(turn: Turn, work: asyncio.Task[None]) -> bool:
    """Waits for `work`, cancelling it if the turn is asked to stop first; True if it finished."""
    stop = asyncio.create_task(turn.stop_requested.wait())
    await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
    for task in (work, stop):
        task.cancel()
    await asyncio.wait({work, stop})
    return not work.cancelled()


def print_place(queued: QueuedTurn) -> None:
    print(f"queued {queued.turn_id}: position {queued.position}")


async def run_agent(
    target: str,
    project: str,
    session_id: str,
    turn_id: str,
    *,
    steps: int = 5,
    step_seconds: float = 1.0,
    queue: bool = False,
) -> TurnOutcome | None:
    mode = AdmissionMode.ENQUEUE if queue else AdmissionMode.REJECT
    async with Client(target, project) as client:
        runner = client.runner("demo-runner")
        try:
            async with runner.turn(session_id, turn_id, mode=mode, on_queued=print_place) as turn:
                waited = f", after waiting {turn.waited:.1f}s in the queue" if turn.waited else ""
                print(f"admitted {turn_id} in {session_id} (generation {turn.generation}{waited})")
                for step in range(1, steps + 1):
                    done = await unless_stopped(
                        turn, asyncio.create_task(tool(turn, f"call-{step}", step_seconds))
                    )
                    if not done:
                        print(
                            f"   stop requested ({turn.stop_reason!r}): call-{step} cancelled, winding down"
                        )
                        break
        except SessionBusy as busy:
            print(f"busy: {busy.active_turn_id} holds {session_id}; retry in {busy.retry_after:.1f}s")
            return None
        except LeftQueue as left:
            print(f"{turn_id} left the queue without running: {left.outcome.proto_name}")
            return left.outcome
    print(f"{turn_id} settled {turn.outcome.proto_name if turn.outcome else 'unknown'}")
    return turn.outcome


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("session")
    parser.add_argument("turn", nargs="?", default=f"turn-{uuid.uuid4().hex[:8]}")
    parser.add_argument("--queue", action="store_true", help="wait in the session's queue if it is busy")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--step-seconds", type=float, default=2.0)
    parser.add_argument("--target", default=default_target(), help="[TURNGATE_TARGET, 127.0.0.1:50051]")
    parser.add_argument("--project", default=default_project(), help="[TURNGATE_PROJECT, default]")
    args = parser.parse_args()
    asyncio.run(
        run_agent(
            args.target,
            args.project,
            args.session,
            args.turn,
            steps=args.steps,
            step_seconds=args.step_seconds,
            queue=args.queue,
        )
    )


if __name__ == "__main__":
    main()
