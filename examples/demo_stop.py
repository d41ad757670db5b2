"""A gateway forwarding a user's Stop, printing the typed answer.

    python examples/demo_stop.py SESSION [TURN] [--force] [--wait SECONDS]
                                 [--target HOST:PORT] [--project ID]

Without TURN it stops whatever turn is active; with TURN, only that one (a late Stop answers
`mismatch` and leaves the next turn alone). `--wait S` waits for the turn to settle and forces it
after S seconds if its runner never ends it. Exit codes (exits.py), as `turngate stop`'s: 0 a running
turn was stopped, 3 another turn runs (mismatch), 4 nothing runs (idle), 8 the turn named had not
started (it will not run; nothing running was stopped), 1 the service failed.
"""

from __future__ import annotations

import argparse
from typing import assert_never

from turngate.client import Cancelled, Client, Idle, Mismatch, StopResult
from turngate.client.defaults import default_project, default_target

from exits import Exit, run


def describe(answer: StopResult) -> str:
    match answer:
        case Cancelled(queued=True) | Cancelled(before_start=True):  # nothing running was stopped
            named = ", ".join(answer.cancelled_turn_ids)
            fate = "left the queue: it will not run" if answer.queued else "will be refused if it starts"
            still = f"; {answer.active_turn_id} is still running" if answer.active_turn_id else ""
            return f"nothing running was stopped: {named} {fate}{still}"
        case Cancelled(settled=True):
            return f"cancelled and settled at once: {', '.join(answer.cancelled_turn_ids)}"
        case Cancelled():
            return f"cancelled: {answer.stopping_turn_id} is stopping (deadline {answer.stop_deadline})"
        case Mismatch():
            current = answer.current_turn_id
            return f"mismatch: {answer.expected_turn_id} already ended; {current} runs on, untouched"
        case Idle():
            return f"idle: nothing runs (last turn {answer.last_turn_id or '-'})"
        case _:
            assert_never(answer)


def exit_code(answer: StopResult) -> Exit:
    match answer:
        case Cancelled() if not answer.stopped_running_turn:
            return Exit.NOT_STARTED
        case Cancelled():
            return Exit.OK
        case Mismatch():
            return Exit.REFUSED
        case Idle():
            return Exit.IDLE
        case _:
            assert_never(answer)


async def stop(
    target: str,
    project: str,
    session_id: str,
    turn_id: str = "",
    *,
    force: bool = False,
    wait: float | None = None,
) -> Exit:
    async with Client(target, project) as client:
        gateway = client.gateway()
        if wait is not None and turn_id:
            record = await gateway.stop_and_wait(session_id, turn_id, force_after=wait, reason="demo stop")
            if record is None:
                print(f"{turn_id} had not started: it will be refused")
                return Exit.NOT_STARTED
            print(f"{turn_id} settled {record.outcome.proto_name} by {record.settled_by.proto_name}")
            return Exit.OK
        answer = await gateway.stop(session_id, expected_turn_id=turn_id, force=force, reason="demo stop")
        print(describe(answer))
        return exit_code(answer)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("session")
    parser.add_argument("turn", nargs="?", default="")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--wait", type=float, default=None, metavar="SECONDS")
    parser.add_argument("--target", default=default_target(), help="[TURNGATE_TARGET, 127.0.0.1:50051]")
    parser.add_argument("--project", default=default_project(), help="[TURNGATE_PROJECT, default]")
    args = parser.parse_args()
    if args.wait is not None and not args.turn:
        parser.error("--wait needs the TURN to stop")
    run(
        stop(args.target, args.project, args.session, args.turn, force=args.force, wait=args.wait),
        args.target,
    )


if __name__ == "__main__":
    main()
