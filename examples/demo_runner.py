"""A fake agent that runs one turn: one tool call after another until stopped, honouring Stop.

    python examples/demo_runner.py SESSION [TURN] [--queue] [--steps N] [--step-seconds S]
                                   [--target HOST:PORT] [--project ID]

Stop it from another terminal with `python examples/demo_stop.py SESSION`: the Stop reaches the
runner at once (pushed, not polled); the tool call in progress is cancelled, so the service closes
it INTERRUPTED, and the turn reports CANCELLED. Without `--steps` the turn runs until it is
stopped (or Ctrl-C, which reports it CANCELLED too); with `--steps N` it completes after N calls.
With `--queue`, a turn that finds the session busy waits in its queue (printing its place as it
changes) and runs once the turns ahead have ended. Text sent to the running turn with `turngate
steer SESSION --expect TURN "text"` is printed and folded into the turn's next tool call, and
acknowledged CONSUMED. Exit codes (exits.py): 0 the turn ran, 3 it was
not admitted (one line says why), 1 the service failed or the turn was taken from this runner.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import uuid

from turngate.client import (
    AdmissionMode,
    AdmissionRefused,
    Client,
    LeftQueue,
    QueuedTurn,
    SessionBusy,
    SessionQueueFull,
    SessionQueuePaused,
    Steer,
    Turn,
    TurnAlreadySettled,
    TurnCancelled,
    TurnOwnedByOtherRunner,
)
from turngate.client.defaults import default_project, default_target

from exits import Exit, run


async def tool(turn: Turn, call_id: str, seconds: float) -> None:
    """One tool call: recorded OPEN, then SUCCEEDED (or left open if cancelled), searching for
    what the steers received since the last call say."""
    steered = [await folded(turn, steer) for steer in turn.steers.received()]
    async with turn.tool_call(call_id, "search"):
        also = f", now also for {', '.join(steered)}" if steered else ""
        print(f"   {call_id}: searching for {seconds:.1f}s{also}")
        await asyncio.sleep(seconds)


async def folded(turn: Turn, steer: Steer) -> str:
    """A steer taken into the next step: printed, and acknowledged CONSUMED."""
    print(f"   steered ({steer.steer_id}): {steer.content!r}")
    await turn.acknowledge(steer.steer_id)
    return repr(steer.content)


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


def refusal(refused: AdmissionRefused, session_id: str, turn_id: str) -> str:
    """Why the turn was not admitted, in one line."""
    match refused:
        case LeftQueue(outcome=outcome):  # before TurnCancelled: a cancelled queued turn is both
            return f"{turn_id} left the queue without running: {outcome.proto_name}"
        case SessionBusy(active_turn_id=active, retry_after=retry_after):
            holds = "is stopping in" if refused.stopping else "holds"
            return f"busy: {active} {holds} {session_id}; retry in {retry_after:.1f}s"
        case TurnAlreadySettled(outcome=outcome):
            return f"{turn_id} already ran (it ended {outcome.proto_name}): a turn runs once; name a new one"
        case TurnCancelled():
            return f"{turn_id} was stopped before it started: it will not run; name a new turn"
        case TurnOwnedByOtherRunner():
            return f"{turn_id} is running under another runner"
        case SessionQueuePaused(active_turn_id=head):
            return f"{session_id}'s queue is paused ({head} waits first): resume it, or pass --queue"
        case SessionQueueFull(limit=limit):
            return f"{session_id}'s queue is full ({limit}): nothing was queued"
        case _:
            return f"{turn_id} refused ({refused.reason.name}): {refused}"


async def run_agent(
    target: str,
    project: str,
    session_id: str,
    turn_id: str,
    *,
    steps: int | None = None,
    step_seconds: float = 5.0,
    queue: bool = False,
) -> Exit:
    mode = AdmissionMode.ENQUEUE if queue else AdmissionMode.REJECT
    async with Client(target, project) as client:
        runner = client.runner("demo-runner")
        try:
            async with runner.turn(session_id, turn_id, mode=mode, on_queued=print_place) as turn:
                waited = f", after waiting {turn.waited:.1f}s in the queue" if turn.waited else ""
                print(f"admitted {turn_id} in {session_id} (generation {turn.generation}{waited})")
                if turn.steer is not None:  # a turn a steer became: its text is the input
                    print(f"   input (steer {turn.steer.steer_id}): {turn.steer.content!r}")
                for step in itertools.islice(itertools.count(1), steps):
                    done = await unless_stopped(
                        turn, asyncio.create_task(tool(turn, f"call-{step}", step_seconds))
                    )
                    if not done:
                        reason = f" ({turn.stop_reason!r})" if turn.stop_reason else " (no reason given)"
                        print(f"   stop requested{reason}: call-{step} cancelled, winding down")
                        break
        except AdmissionRefused as refused:
            print(refusal(refused, session_id, turn_id))
            return Exit.REFUSED
    if turn.abandoned.is_set():
        print(f"{turn_id} abandoned: it is no longer this runner's ({turn.stop_reason})")
        return Exit.FAILURE
    print(f"{turn_id} settled {turn.outcome.proto_name if turn.outcome else 'unknown'}")
    return Exit.OK


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("session")
    parser.add_argument("turn", nargs="?", default=f"turn-{uuid.uuid4().hex[:8]}")
    parser.add_argument("--queue", action="store_true", help="wait in the session's queue if it is busy")
    parser.add_argument("--steps", type=int, default=None, help="tool calls to make (default: until stopped)")
    parser.add_argument("--step-seconds", type=float, default=5.0, help="each tool call's duration (5)")
    parser.add_argument("--target", default=default_target(), help="[TURNGATE_TARGET, 127.0.0.1:50051]")
    parser.add_argument("--project", default=default_project(), help="[TURNGATE_PROJECT, default]")
    args = parser.parse_args()
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be at least 1")
    run(
        run_agent(
            args.target,
            args.project,
            args.session,
            args.turn,
            steps=args.steps,
            step_seconds=args.step_seconds,
            queue=args.queue,
        ),
        args.target,
    )


if __name__ == "__main__":
    main()
