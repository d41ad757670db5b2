"""A fake agent that runs one turn: a few tool calls with sleeps, honouring Stop.

    python examples/demo_runner.py SESSION [TURN] [--steps N] [--step-seconds S]
                                   [--target HOST:PORT] [--project ID]

Stop it from another terminal with `python examples/demo_stop.py SESSION`: the Stop reaches the
runner at once (pushed, not polled); the tool call in progress is cancelled, so the service closes
it INTERRUPTED, and the turn reports CANCELLED.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid

from turngate.client import Client, SessionBusy, Turn, TurnOutcome


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


async def run_agent(
    target: str, project: str, session_id: str, turn_id: str, *, steps: int = 5, step_seconds: float = 1.0
) -> TurnOutcome | None:
    async with Client(target, project) as client:
        try:
            async with client.runner("demo-runner").turn(session_id, turn_id) as turn:
                print(f"admitted {turn_id} in {session_id} (generation {turn.generation})")
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
    print(f"{turn_id} settled {turn.outcome.proto_name if turn.outcome else 'unknown'}")
    return turn.outcome


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("session")
    parser.add_argument("turn", nargs="?", default=f"turn-{uuid.uuid4().hex[:8]}")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--step-seconds", type=float, default=2.0)
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--project", default="demo")
    args = parser.parse_args()
    asyncio.run(
        run_agent(
            args.target,
            args.project,
            args.session,
            args.turn,
            steps=args.steps,
            step_seconds=args.step_seconds,
        )
    )


if __name__ == "__main__":
    main()
