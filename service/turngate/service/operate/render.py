"""How the operator commands print what they read.

One renderer per record type turns it into labelled fields (a value of None is not shown); three
layouts print fields: `line` (`label=value …`, one event or answer), `block` (one record, a
label a line) and `table` (one record a row). `--json` prints protobuf's JSON mapping of the
message the SDK's value was built from (its `raw`) instead, one compact object a line, every
field present (an unset message as null).

Times are UTC. Deadlines are shown as seconds from `now` (the local clock; negative when overdue)
where a renderer is given `now`, as instants otherwise.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar, assert_never

from google.protobuf import json_format
from google.protobuf.message import Message

from turngate.client import (
    Cancelled,
    Event,
    Idle,
    Interaction,
    InteractionChanged,
    Mismatch,
    MovedQueue,
    ProjectSummary,
    QueuedTurn,
    QueuePaused,
    QueueReordered,
    QueueResumed,
    ResumedQueue,
    SessionSnapshot,
    SessionSummary,
    SessionToken,
    Steered,
    SteerEnded,
    SteerMismatch,
    SteerQueued,
    SteerResult,
    StopRequested,
    StopResult,
    ToolCall,
    ToolCallChanged,
    TurnAdmitted,
    TurnDequeued,
    TurnQueued,
    TurnRecord,
    TurnSettled,
    TurnSteered,
    UnknownEvent,
)
from turngate.client.enums import ContractEnum
from turngate.v1 import turngate_pb2 as pb

Field = tuple[str, str | None]
Fields = list[Field]
M = TypeVar("M", bound=Message, covariant=True)


class Built(Protocol[M]):
    """A value of the SDK built from a message of the contract (`raw`)."""

    @property
    def raw(self) -> M | None: ...


# Longer values (error texts, resolutions) are cut in text output; --json has them whole.
MAX_CELL = 80
# Texts come from runners and gateways: control and format characters (terminal escapes, BIDI
# overrides) are shown as JSON-style escapes, never sent to the operator's terminal as they are.
_UNPRINTABLE = ("Cc", "Cf")


def _escaped(text: str) -> str:
    return "".join(_escape(c) if unicodedata.category(c) in _UNPRINTABLE else c for c in text)


def _escape(char: str) -> str:
    utf16 = char.encode("utf-16-be")
    return "".join(f"\\u{int.from_bytes(utf16[i : i + 2]):04x}" for i in range(0, len(utf16), 2))


def json_line(message: Message) -> str:
    """Protobuf's JSON mapping (int64 as strings) with every field present: scalars with their
    zero values, a message that is not set as null (which the mapping parses back as unset); of
    a oneof, the member that is set."""
    fields = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    return _escaped(
        json.dumps(_with_unset_messages(message, fields), separators=(",", ":"), ensure_ascii=False)
    )


def _with_unset_messages(message: Message, shown: dict[str, Any]) -> dict[str, Any]:
    """`shown` (MessageToDict of `message`, which omits unset message fields), with those as None."""
    for field in message.DESCRIPTOR.fields:
        kind = field.message_type
        if kind is None or kind.GetOptions().map_entry:
            continue
        # Well-known types (Timestamp, Duration) are JSON strings: nothing inside to fill.
        nested = not kind.full_name.startswith("google.protobuf.")
        if field.is_repeated:
            if nested:
                for item, item_shown in zip(
                    getattr(message, field.name), shown[field.json_name], strict=True
                ):
                    _with_unset_messages(item, item_shown)
        elif message.HasField(field.name):
            if nested:
                _with_unset_messages(getattr(message, field.name), shown[field.json_name])
        elif field.containing_oneof is None:
            shown[field.json_name] = None
    return shown


def raw(value: Built[M]) -> M:
    """The contract's message the SDK built `value` from."""
    if value.raw is None:
        raise ValueError(f"{type(value).__name__} was not built from a message")
    return value.raw


def json_of(value: Built[Message]) -> str:
    """`json_line` of the message the SDK built `value` from: the contract's JSON."""
    return json_line(raw(value))


def stop_message(result: StopResult) -> pb.CancelTurnResponse:
    """The SDK's typed Stop answer as the contract's CancelTurnResponse (for --json)."""
    match result:
        case Cancelled():
            return pb.CancelTurnResponse(cancelled=raw(result))
        case Mismatch():
            return pb.CancelTurnResponse(mismatch=raw(result))
        case Idle():
            return pb.CancelTurnResponse(idle=raw(result))
        case _:
            assert_never(result)


def steer_message(result: SteerResult) -> pb.SteerTurnResponse:
    """The SDK's typed steer answer as the contract's SteerTurnResponse (for --json)."""
    match result:
        case Steered():
            return pb.SteerTurnResponse(steered=raw(result))
        case SteerMismatch():
            return pb.SteerTurnResponse(mismatch=raw(result))
        case SteerQueued():
            return pb.SteerTurnResponse(queued=raw(result))
        case _:
            assert_never(result)


# Values.


def _enum(value: ContractEnum) -> str | None:
    """`TurnOutcome.CANCELLED` as `CANCELLED`; None for UNSPECIFIED (unset, or a value added
    to the contract after this command was built: its `--json` shows it)."""
    return value.name if value else None


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _deadline(label: str, at: datetime | None, now: datetime | None) -> Field:
    if now is None:
        return f"{label} at", _iso(at)
    return f"{label} in", None if at is None else f"{(at - now).total_seconds():.1f}s"


def _seconds(value: float | None) -> str | None:
    return None if value is None else f"{value:.1f}s"


def _ids(ids: Sequence[str]) -> str | None:
    return ",".join(ids) or None


def _yes(flag: bool) -> str | None:
    return "yes" if flag else None


# One renderer per record type.


def turn(record: TurnRecord, now: datetime | None = None) -> Fields:
    return [
        ("turn", record.turn_id),
        ("phase", _enum(record.phase)),
        ("outcome", _enum(record.outcome)),
        ("settled by", _enum(record.settled_by)),
        ("runner", record.runner_id),
        ("generation", str(record.generation)),
        ("admitted at", _iso(record.admitted_at)),
        _deadline("lease expires", record.lease_expires_at, now),
        ("stop requested", _yes(record.stop_requested)),
        ("stop reason", record.stop_reason or None),
        _deadline("stop deadline", record.stop_deadline, now),
        ("settled at", _iso(record.settled_at)),
        ("error", record.error or None),
        ("trace", record.trace_id or None),
        ("pending steers", _ids(record.pending_steer_ids)),
    ]


def session(snapshot: SessionSnapshot) -> Fields:
    return [
        ("session", snapshot.session.session_id),
        ("phase", _enum(snapshot.phase)),
        ("seq", str(snapshot.seq)),
        ("active", snapshot.active.turn_id if snapshot.active else None),
        ("last settled", snapshot.last_settled.turn_id if snapshot.last_settled else None),
        ("queued", str(len(snapshot.queue)) if snapshot.queue else None),
        ("queue paused by", snapshot.queue_paused_by or None),
        ("resync", _yes(snapshot.resync)),
    ]


def queued(turn: QueuedTurn, now: datetime | None = None) -> Fields:
    """A turn waiting in the queue; with `now`, how long it has waited so far."""
    return [
        ("position", str(turn.position)),
        ("turn", turn.turn_id),
        ("runner", turn.runner_id),
        ("waited", None if now is None else _seconds((now - turn.queued_at).total_seconds())),
        _deadline("expires", turn.expires_at, now),
    ]


def tool_call(call: ToolCall) -> Fields:
    return [
        ("call", call.call_id),
        ("name", call.name),
        ("status", _enum(call.status)),
        ("opened at", _iso(call.opened_at)),
        ("closed at", _iso(call.closed_at)),
        ("error", call.error or None),
    ]


def interaction(item: Interaction) -> Fields:
    return [
        ("interaction", item.interaction_id),
        ("kind", item.kind),
        ("status", _enum(item.status)),
        ("opened at", _iso(item.opened_at)),
        ("closed at", _iso(item.closed_at)),
        ("resolution", item.resolution or None),
    ]


def stop_requested(stop: StopRequested) -> Fields:
    return [
        ("turn", stop.turn_id),
        ("reason", stop.reason or None),
        ("deadline at", _iso(stop.deadline)),
        ("force", _yes(stop.force)),
        ("before start", _yes(stop.before_start)),
    ]


def turn_settled(settled: TurnSettled) -> Fields:
    return [
        *_only(turn(settled.turn), *_SETTLED),
        ("interrupted calls", _ids(settled.interrupted_tool_call_ids)),
        ("cancelled interactions", _ids(settled.cancelled_interaction_ids)),
        ("unconsumed steers", _ids(settled.unconsumed_steer_ids)),
        ("trace", settled.trace_id or None),
    ]


def event(item: Event) -> str:
    """One line: seq, time, kind and the event's essentials."""
    fields: Fields
    match item.body:
        case SessionSnapshot() as snapshot:
            fields = _only(
                session(snapshot), "phase", "active", "last settled", "queued", "queue paused by", "resync"
            )
        case TurnAdmitted(turn=admitted, from_queue=from_queue, waited=waited, steer=steer):
            fields = [
                *_only(turn(admitted), "turn", "runner", "generation", "lease expires at"),
                ("from queue", _yes(from_queue)),
                ("waited", _seconds(waited)),
                ("steer", steer.content if steer is not None else None),
            ]
        case StopRequested() as stop:
            fields = stop_requested(stop)
        case ToolCallChanged(turn_id=turn_id, tool_call=call):
            fields = [("turn", turn_id), *_only(tool_call(call), *_CHANGED)]
        case InteractionChanged(turn_id=turn_id, interaction=changed):
            fields = [("turn", turn_id), *_only(interaction(changed), *_CHANGED)]
        case TurnSettled() as settled:
            fields = turn_settled(settled)
        case TurnQueued(turn=joined, position=position):
            fields = [
                ("turn", joined.turn_id),
                ("runner", joined.runner_id),
                ("position", str(position)),
                ("expires at", _iso(joined.expires_at)),
                ("steer", joined.steer.content if joined.steer is not None else None),
            ]
        case TurnDequeued() as left:
            fields = [
                ("turn", left.turn_id),
                ("runner", left.runner_id),
                ("outcome", _enum(left.outcome)),
                ("cleared", _yes(left.cleared)),
                ("reason", left.reason or None),
                ("waited", _seconds(left.waited)),
            ]
        case QueuePaused(turn_id=turn_id, outcome=outcome):
            fields = [("by", turn_id), ("outcome", _enum(outcome))]
        case QueueResumed(turn_id=turn_id):
            fields = [("paused by", turn_id)]
        case TurnSteered(turn_id=turn_id, steer=steer, expires_at=expires_at):
            fields = [
                ("turn", turn_id),
                ("steer", steer.steer_id),
                ("type", steer.content_type),
                ("content", steer.content),
                ("expires at", _iso(expires_at)),
            ]
        case SteerEnded() as ended:
            fields = [
                ("turn", ended.turn_id),
                ("steer", ended.steer_id),
                ("status", _enum(ended.status)),
                ("requeued", _yes(ended.requeued)),
            ]
        case QueueReordered(turn_ids=turn_ids, moved_turn_id=moved):
            fields = [("moved", moved), ("queue", _ids(turn_ids))]
        case UnknownEvent():
            fields = []
        case _:
            assert_never(item.body)
    return f"{item.seq:>5}  {_iso(item.time) or '-':<24}  {item.kind or '?':<14}  {line(fields)}".rstrip()


# What a line shows of a tool call or interaction that changed, and of a turn that settled.
_CHANGED = ("call", "interaction", "name", "kind", "status", "error", "resolution")
_SETTLED = ("turn", "outcome", "settled by", "error")


def _only(fields: Fields, *labels: str) -> Fields:
    return [(label, value) for label, value in fields if label in labels]


def stop_result(result: StopResult, now: datetime) -> str:
    """One line: what the Stop did (`cancelled`, or `mismatch` / `idle`: nothing changed)."""
    match result:
        case Cancelled():
            fields: Fields = [
                ("turns", _ids(result.cancelled_turn_ids)),
                ("stopping", result.stopping_turn_id or None),
                ("settled", _yes(result.settled)),
                ("before start", _yes(result.before_start)),
                ("cancelled interactions", _ids(result.cancelled_interaction_ids)),
                _deadline("stop deadline", result.stop_deadline, now),
                ("queued", _yes(result.queued)),
                ("cleared", _ids(result.cleared_turn_ids)),
            ]
        case Mismatch():
            fields = [
                ("expected", result.expected_turn_id),
                ("expected outcome", _enum(result.expected_outcome)),
                ("current", result.current_turn_id),
                ("current phase", _enum(result.current_phase)),
            ]
        case Idle():
            fields = [
                ("expected", result.expected_turn_id or None),
                ("expected outcome", _enum(result.expected_outcome)),
                ("last", result.last_turn_id or None),
                ("last outcome", _enum(result.last_outcome)),
            ]
        case _:
            assert_never(result)
    return f"{type(result).__name__.lower()}  {line(fields)}".rstrip()


def steer_result(result: SteerResult) -> str:
    """One line: what became of a steer (`steered`, `mismatch`: nothing changed, or `queued`)."""
    match result:
        case Steered():
            label = "steered"
            fields: Fields = [
                ("turn", result.turn_id),
                ("steer", result.steer_id),
                ("seq", str(result.seq)),
                ("replayed", _yes(result.replayed)),
            ]
        case SteerMismatch():
            label = "mismatch"
            fields = [
                ("expected", result.expected_turn_id),
                ("reason", result.reason.name if result.reason else None),
                ("expected phase", _enum(result.expected_phase)),
                ("expected outcome", _enum(result.expected_outcome)),
                ("current", result.current_turn_id or None),
                ("current phase", _enum(result.current_phase)),
            ]
        case SteerQueued():
            label = "queued"
            fields = [
                ("turn", result.turn.turn_id),
                ("runner", result.turn.runner_id),
                ("position", str(result.position) if result.position else None),
                ("queue depth", str(result.queue_depth)),
                ("admitted", _yes(result.admitted)),
                ("replayed", _yes(result.replayed)),
            ]
        case _:
            assert_never(result)
    return f"{label}  {line(fields)}".rstrip()


def moved(result: MovedQueue) -> str:
    """One line: the queue after a move, head first, and its version."""
    waiting = _ids([turn.turn_id for turn in result.queue])
    return f"moved  {line([('queue', waiting), ('queue version', str(result.queue_version))])}"


def nothing_running_stopped(result: Cancelled) -> str:
    """What a Stop of a turn that had not started (or was queued) did, in words that cannot be
    read as "stopped": the turn it named will not run, and the active one runs on."""
    named = ", ".join(result.cancelled_turn_ids)
    fate = "left the queue and will not run" if result.queued else "will be refused if it starts"
    parts = ["nothing running was stopped", f"{named} {fate}"]
    if result.active_turn_id:
        parts.append(f"{result.active_turn_id} is still running")
    if result.cleared_turn_ids:
        parts.append(f"cleared from the queue: {', '.join(result.cleared_turn_ids)}")
    return "; ".join(parts)


def resumed(result: ResumedQueue) -> str:
    """One line: the turn ResumeQueue admitted, if any, and those still waiting."""
    waiting = _ids([turn.turn_id for turn in result.queue])
    return f"resumed  {line([('admitted', result.admitted_turn_id or None), ('waiting', waiting)])}".rstrip()


def session_token(minted: SessionToken, session_id: str, now: datetime) -> str:
    """One line on a minted session token, never the token itself."""
    scopes = ",".join(name for scope in minted.scopes if (name := _enum(scope))) or None
    fields: Fields = [
        ("session", session_id),
        ("scopes", scopes),
        ("expires at", _iso(minted.expires_at)),
        _deadline("expires", minted.expires_at, now),
    ]
    return f"session token  {line(fields)}"


def settlement(record: TurnRecord) -> str:
    """One line: how a turn settled."""
    return f"settled  {line(_only(turn(record), *_SETTLED, 'settled at'))}"


# Views of several records.


def never_seen(snapshot: SessionSnapshot) -> str | None:
    """The service answers a session it never heard of as an idle one: a line that says so (a
    mistyped project or session reads exactly like that), or None for a session it knows: one with
    an event, or a turn in its history (it may have left the store since, docs/design.md §8)."""
    if snapshot.seq or snapshot.last_settled is not None:
        return None
    ref = snapshot.session
    return f"never seen: no event of {ref.session_id} in project {ref.project_id}"


def status(snapshot: SessionSnapshot, now: datetime) -> list[str]:
    lines = block(session(snapshot))
    if (unknown := never_seen(snapshot)) is not None:
        lines += ["", unknown]
    for title, record in (("active turn", snapshot.active), ("last settled turn", snapshot.last_settled)):
        if record is not None:
            lines += ["", title, *block(turn(record, now), indent="  ")]
    if snapshot.queue:
        lines += ["", "queue", *queue_table(snapshot, now, indent="  ")]
    return lines


def queue(snapshot: SessionSnapshot, now: datetime) -> list[str]:
    """The session's queue, head first, under what holds it: the active turn and who paused it."""
    fields = _only(session(snapshot), "session", "phase", "active", "queued", "queue paused by")
    waiting = (
        queue_table(snapshot, now) if snapshot.queue else [f"no turns wait in {snapshot.session.session_id}"]
    )
    return [*block(fields), "", *waiting]


def queue_table(snapshot: SessionSnapshot, now: datetime, indent: str = "") -> list[str]:
    return [f"{indent}{row}" for row in table([queued(waiting, now) for waiting in snapshot.queue])]


def turn_detail(record: TurnRecord, now: datetime) -> list[str]:
    lines = block(turn(record, now))
    for title, rows in (
        ("tool calls", [tool_call(call) for call in record.tool_calls]),
        ("interactions", [interaction(item) for item in record.interactions]),
    ):
        lines += ["", *table(rows)] if rows else ["", f"no {title}"]
    return lines


def busy_session(snapshot: SessionSnapshot, now: datetime) -> Fields:
    """A session of `sessions busy`: its active turn, and its queue when turns wait (a session
    whose paused queue alone waits has no turn)."""
    active = turn(snapshot.active, now) if snapshot.active is not None else []
    return [
        ("session", snapshot.session.session_id),
        *active,
        ("queued", str(len(snapshot.queue)) if snapshot.queue else None),
        ("queue paused by", snapshot.queue_paused_by or None),
    ]


def listed_session(summary: SessionSummary) -> Fields:
    """A session of `sessions list`: when it was last active, its phase (the turn that holds it,
    the turns waiting) and the last turn that ran and how it ended."""
    snapshot = summary.snapshot
    last = snapshot.last_settled
    return [
        ("session", snapshot.session.session_id),
        ("last active", _iso(summary.last_activity_at)),
        ("phase", _enum(snapshot.phase)),
        ("active", snapshot.active.turn_id if snapshot.active else None),
        ("queued", str(len(snapshot.queue)) if snapshot.queue else None),
        ("last settled", last.turn_id if last else None),
        ("outcome", _enum(last.outcome) if last else None),
    ]


def listed_project(project: ProjectSummary) -> Fields:
    return [("project", project.project_id), ("last active", _iso(project.last_activity_at))]


# Layouts.


def _short(value: str) -> str:
    text = _escaped(" ".join(value.split()))
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def line(fields: Fields) -> str:
    def quoted(value: str) -> str:
        text = _short(value)
        return json.dumps(text, ensure_ascii=False) if not text or any(c in text for c in ' "=') else text

    return " ".join(
        f"{label.replace(' ', '_')}={quoted(value)}" for label, value in fields if value is not None
    )


def block(fields: Fields, indent: str = "") -> list[str]:
    shown = [(label, value) for label, value in fields if value is not None]
    width = max(len(label) for label, _ in shown)
    return [f"{indent}{label:<{width}}  {_short(value)}" for label, value in shown]


def table(rows: Sequence[Fields]) -> list[str]:
    """Rows of one renderer's fields, under a header; columns empty in every row are left out."""
    values = [dict(row) for row in rows]
    every = dict.fromkeys(label for row in rows for label, _ in row)
    labels = [label for label in every if any(row.get(label) is not None for row in values)]
    cells = [[label.upper() for label in labels]]
    cells += [
        [_short(value) if (value := row.get(label)) is not None else "-" for label in labels]
        for row in values
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(labels))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
