"""A watcher printing a session's events as they happen; it survives server restarts.

python examples/demo_watch.py SESSION [--after SEQ] [--turn TURN] [--target HOST:PORT] [--project ID]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from turngate.client import Client
from turngate.v1 import turngate_pb2 as pb


def describe(event: pb.SessionEvent) -> str:
    match event.WhichOneof("kind"):
        case "snapshot":
            s = event.snapshot
            active = f" active={s.active.turn_id}" if s.active.turn_id else ""
            return f"snapshot{' (resync)' if s.resync else ''} {pb.SessionPhase.Name(s.phase)}{active}"
        case "turn_admitted":
            return f"turn_admitted {event.turn_admitted.turn.turn_id} by {event.turn_admitted.turn.runner_id}"
        case "stop_requested":
            stop = event.stop_requested
            return f"stop_requested {stop.turn_id}{' (force)' if stop.force else ''} reason={stop.reason!r}"
        case "tool_call":
            call = event.tool_call.tool_call
            return f"tool_call {call.call_id} {call.name} {pb.ToolCallStatus.Name(call.status)}"
        case "interaction":
            i = event.interaction.interaction
            return f"interaction {i.interaction_id} {pb.InteractionStatus.Name(i.status)}"
        case "turn_settled":
            turn = event.turn_settled.turn
            return (
                f"turn_settled {turn.turn_id} {pb.TurnOutcome.Name(turn.outcome)} "
                f"by {pb.SettledBy.Name(turn.settled_by)}"
            )
    return str(event.WhichOneof("kind"))


async def watch(
    target: str,
    project: str,
    session_id: str,
    *,
    after_seq: int = 0,
    turn_id: str = "",
    limit: int | None = None,
) -> None:
    """Prints events until interrupted (or `limit` of them)."""
    async with (
        Client(target, project) as client,
        client.watch(session_id, after_seq=after_seq, turn_id=turn_id) as events,
    ):
        async for event in events:
            print(f"seq={event.seq} {describe(event)}")
            limit = None if limit is None else limit - 1
            if limit == 0:
                return


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("session")
    parser.add_argument("--after", type=int, default=0, metavar="SEQ")
    parser.add_argument("--turn", default="")
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--project", default="demo")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(watch(args.target, args.project, args.session, after_seq=args.after, turn_id=args.turn))


if __name__ == "__main__":
    main()
