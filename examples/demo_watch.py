"""A watcher printing a session's events as they happen; it survives server restarts.

python examples/demo_watch.py SESSION [--after SEQ] [--turn TURN] [--target HOST:PORT] [--project ID]

It fails at once (exit code 1, one line) when the service cannot be reached as it starts; once
watching, it reconnects by itself until Ctrl-C ends it (exit code 0). Other exit codes: exits.py.
"""

from __future__ import annotations

import argparse
from typing import assert_never

from turngate.client import (
    Client,
    Event,
    InteractionChanged,
    QueuePaused,
    QueueReordered,
    QueueResumed,
    SessionSnapshot,
    SteerEnded,
    StopRequested,
    ToolCallChanged,
    TurnAdmitted,
    TurnDequeued,
    TurnQueued,
    TurnSettled,
    TurnSteered,
    UnknownEvent,
)
from turngate.client.defaults import default_project, default_target

from exits import Exit, run


def describe(event: Event) -> str:
    match event.body:
        case SessionSnapshot(phase=phase, active=active, resync=resync, queue=queue):
            running = f" active={active.turn_id}" if active else ""
            waiting = f" queued={','.join(q.turn_id for q in queue)}" if queue else ""
            return f"snapshot{' (resync)' if resync else ''} {phase.proto_name}{running}{waiting}"
        case TurnAdmitted(turn=turn, from_queue=from_queue):
            return (
                f"turn_admitted {turn.turn_id} by {turn.runner_id}{' from the queue' if from_queue else ''}"
            )
        case StopRequested(turn_id=turn_id, force=force, reason=reason):
            return f"stop_requested {turn_id}{' (force)' if force else ''} reason={reason!r}"
        case ToolCallChanged(tool_call=call):
            return f"tool_call {call.call_id} {call.name} {call.status.proto_name}"
        case InteractionChanged(interaction=interaction):
            return f"interaction {interaction.interaction_id} {interaction.status.proto_name}"
        case TurnSettled(turn=turn):
            return f"turn_settled {turn.turn_id} {turn.outcome.proto_name} by {turn.settled_by.proto_name}"
        case TurnQueued(turn=queued, position=position):
            return f"turn_queued {queued.turn_id} by {queued.runner_id} at position {position}"
        case TurnDequeued(turn_id=turn_id, outcome=outcome, cleared=cleared):
            return f"turn_dequeued {turn_id} {outcome.proto_name}{' (cleared)' if cleared else ''}"
        case QueuePaused(turn_id=turn_id, outcome=outcome):
            return f"queue_paused by {turn_id} {outcome.proto_name}"
        case QueueResumed():
            return "queue_resumed"
        case TurnSteered(turn_id=turn_id, steer=steer):
            return f"turn_steered {turn_id} {steer.steer_id}: {steer.content!r}"
        case SteerEnded(turn_id=turn_id, steer_id=steer_id, status=status):
            return f"steer_ended {turn_id} {steer_id} {status.proto_name}"
        case QueueReordered(turn_ids=turn_ids, moved_turn_id=moved):
            return f"queue_reordered {moved} moved: {', '.join(turn_ids)}"
        case UnknownEvent():
            return "an event of a kind this SDK does not know"
        case _:
            assert_never(event.body)


async def watch(
    target: str,
    project: str,
    session_id: str,
    *,
    after_seq: int = 0,
    turn_id: str = "",
    limit: int | None = None,
) -> Exit:
    """Prints events until interrupted (or `limit` of them)."""
    # Reads are not retried (the watch reconnects by itself): a service that is down fails it at once.
    async with Client(target, project, retry_for=0) as client:
        await client.get_session(session_id)
        async with client.watch(session_id, after_seq=after_seq, turn_id=turn_id) as events:
            async for event in events:
                print(f"seq={event.seq} {describe(event)}")
                limit = None if limit is None else limit - 1
                if limit == 0:
                    break
    return Exit.OK


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("session")
    parser.add_argument("--after", type=int, default=0, metavar="SEQ")
    parser.add_argument("--turn", default="")
    parser.add_argument("--target", default=default_target(), help="[TURNGATE_TARGET, 127.0.0.1:50051]")
    parser.add_argument("--project", default=default_project(), help="[TURNGATE_PROJECT, default]")
    args = parser.parse_args()
    run(
        watch(args.target, args.project, args.session, after_seq=args.after, turn_id=args.turn),
        args.target,
        interrupted=Exit.OK,  # Ctrl-C is how a watch ends
    )


if __name__ == "__main__":
    main()
