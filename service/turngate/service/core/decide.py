"""decide(state, command, now): every rule of the session state machine, once, with no I/O.

The invariants (docs/design.md §2) each have a home here:
I1 single turn and I3 idempotent admission: `_admit`; I2 fencing: `_fenced` (and a turn's writes
belong to the principal that admitted it: `_foreign`); I4 guarded Stop:
`_cancel`/`_stop`; I5 Stop is a request: `_stop_active`; I6 one outcome and I7 nothing left open:
`_settle`; I8 no resurrection and I10 one clock: `_settle_if_due`, run before every command;
I9 ordered events: `_Draft.finish`; I12 late approval refused: `_resolve_interaction`.

Retirement (§8): R1 an idle session leaves the hot store: `_retire`; R2 a Stop on a session the
store does not hold answers from history: `needs_history`, `recalled`.

The admission modes and the queue (§7): Q1 FIFO and Q4 bounded: `_admit`/`_enqueue`; Q2 promotion
in the same write: `_promote_if_idle`, run at the end of every decision; Q3 pause:
`_pause_if_asked` (in `_settle`), `_resume_queue`, `_clear_if_asked`, `_clear_queue`,
`_unpaused_if_empty`; Q4 expiry: `_expire_queued`; Q5 idempotent: `_admit`; Q6 guarded Stop:
`_stop`; Q7 guarded interrupt, and only of a turn the caller may stop: `_interrupt`; Q8 queue
edits guarded by the queue's version: `_move_queued`.

Steers (§9): S1 guarded by the running turn, S3 idempotent, S4 bounded, S5 pushed: `_steer`; S2
one end per steer: `_acknowledge_steer`, `_expire_steers`, `_end_pending_steers` (in `_settle`);
S6 requeued if unconsumed: `_requeue`; S7 the ENQUEUE fallback: `_steer_enqueued`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar, assert_never

from turngate.service.core import limits
from turngate.service.core.commands import (
    AcknowledgeSteer,
    Admit,
    Cancel,
    ClearQueue,
    Command,
    Complete,
    Expire,
    Heartbeat,
    MoveQueuedTurn,
    RecordInteraction,
    RecordToolCall,
    ResolveInteraction,
    ResumeQueue,
    Retire,
    SteerTurn,
)
from turngate.service.core.enums import (
    AdmissionMode,
    Directive,
    ErrorReason,
    InteractionStatus,
    QueueAction,
    SettledBy,
    SteerFallback,
    SteerStatus,
    ToolCallStatus,
    TurnOutcome,
    TurnPhase,
)
from turngate.service.core.events import (
    Event,
    EventBody,
    InteractionChanged,
    QueuePaused,
    QueueReordered,
    QueueResumed,
    SteerEnded,
    StopRequested,
    ToolCallChanged,
    TurnAdmitted,
    TurnDequeued,
    TurnQueued,
    TurnSettled,
    TurnSteered,
)
from turngate.service.core.model import NO_EPOCH, ActiveTurn, RequestMemo, Session
from turngate.service.core.records import (
    Interaction,
    QueuedTurn,
    QueuePause,
    SettledTurn,
    Steer,
    SteerInput,
    StopRequest,
    ToolCall,
)
from turngate.service.core.replies import (
    Admitted,
    Cancelled,
    CancelReply,
    CompleteReply,
    HeartbeatReply,
    Idle,
    InteractionReply,
    Mismatch,
    QueueCleared,
    Queued,
    QueueMoved,
    Refusal,
    RememberedReply,
    Reply,
    Resumed,
    Retired,
    SteerAcknowledged,
    Steered,
    SteerMismatch,
    SteerQueued,
    SteerReply,
    Swept,
    ToolCallReply,
)


@dataclass(frozen=True, slots=True)
class Decision:
    """The new document, the events to append (already numbered) and the caller's answer.

    `changed` False means the store writes nothing; `removed` True that it removes the session
    (R1: `state` is then the empty document a read finds).
    """

    state: Session
    events: tuple[Event, ...]
    reply: Reply
    changed: bool
    removed: bool = False


def decide(state: Session, command: Command, now: int) -> Decision:
    draft = _Draft(state, now)
    expired = _expire_queued(draft)
    _expire_steers(draft)
    swept = _settle_if_due(draft)
    match command:
        case Admit():
            reply: Reply = _admit(draft, command)
        case Heartbeat():
            reply = _heartbeat(draft, command)
        case RecordToolCall():
            reply = _record_tool_call(draft, command)
        case RecordInteraction():
            reply = _record_interaction(draft, command)
        case ResolveInteraction():
            reply = _resolve_interaction(draft, command)
        case Complete():
            reply = _complete(draft, command)
        case Cancel():
            reply = _cancel(draft, command)
        case ResumeQueue():
            reply = _resume_queue(draft, command)
        case ClearQueue():
            reply = _clear_queue(draft, command)
        case MoveQueuedTurn():
            reply = _move_queued(draft, command)
        case SteerTurn():
            reply = _steer(draft, command)
        case AcknowledgeSteer():
            reply = _acknowledge_steer(draft, command)
        case Expire():
            reply = Swept(settled=swept, expired_turn_ids=expired)
        case Retire():
            reply = _retire(draft, command)
        case _:
            assert_never(command)
    _promote_if_idle(draft)
    return draft.finish(reply)


@dataclass(slots=True)
class _Draft:
    """The document being changed and the event bodies emitted so far, in order."""

    original: Session
    now: int
    state: Session = field(init=False)
    bodies: list[EventBody] = field(default_factory=list)
    removed: bool = False

    def __post_init__(self) -> None:
        self.state = self.original

    def emit(self, body: EventBody) -> None:
        self.bodies.append(body)

    def set_active(self, turn: ActiveTurn) -> None:
        self.state = replace(self.state, active=turn)

    def finish(self, reply: Reply) -> Decision:
        if self.removed:
            return Decision(Session(), (), reply, changed=True, removed=True)
        if self.state is self.original and not self.bodies:
            return Decision(self.original, (), reply, changed=False)
        first = self.state.next_seq
        epoch = _epoch(self.state, self.now)
        moved = self.state.queue != self.original.queue
        events = tuple(Event(first + i, self.now, body, epoch) for i, body in enumerate(self.bodies))
        state = _unpaused_if_empty(
            replace(
                self.state,
                epoch=epoch,
                next_seq=first + len(events),
                touched_at=self.now,
                queue_version=self.state.queue_version + moved,
                tombstones=_unexpired(self.state.tombstones, self.now, lambda exp: exp),
                requests=_unexpired(self.state.requests, self.now, lambda memo: memo.expires_at),
            )
        )
        return Decision(state, events, reply, changed=True)


def _epoch(state: Session, now: int) -> int:
    """A document keeps its epoch; its first write starts one at `now`. The store's clock (I10) has
    moved on since any earlier write of the session, so one the store lost starts a new epoch."""
    return now if state.epoch == NO_EPOCH else state.epoch


_V = TypeVar("_V")


def _unexpired(entries: Mapping[str, _V], now: int, expiry: Callable[[_V], int]) -> dict[str, _V]:
    return {key: value for key, value in entries.items() if expiry(value) > now}


def _keep_last(entries: Mapping[str, _V], key: str, value: _V, bound: int) -> dict[str, _V]:
    """entries with key set last, dropping the oldest so at most `bound` remain."""
    kept = {k: v for k, v in entries.items() if k != key}
    kept[key] = value
    return dict(list(kept.items())[-bound:])


# --- the clock (I8, I10) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClockWindow:
    """Store-clock instants around a decision's `now` between which decide() answers a document
    the same way: `start`, the latest deadline or expiry it found passed (None: none), and `end`,
    the earliest one still ahead (None: none). Only the times it stamps would differ."""

    start: int | None
    end: int | None


def clock_window(state: Session, now: int) -> ClockWindow:
    """The window of a decision on `state` at `now`: every instant the rules compare `now` with
    (the active turn's deadline, queued turns', tombstone and request-id expiries), split at `now`."""
    instants = [
        *state.instants(),
        *state.tombstones.values(),
        *(memo.expires_at for memo in state.requests.values()),
    ]
    return ClockWindow(
        start=max((t for t in instants if t <= now), default=None),
        end=min((t for t in instants if t > now), default=None),
    )


def _settle_if_due(draft: _Draft) -> bool:
    """Settles the active turn if one of its deadlines has passed at `now`, whoever is asking."""
    turn = draft.state.active
    if turn is None or draft.now < turn.deadline():
        return False
    stop_first = turn.stop is not None and turn.stop.deadline <= turn.lease_expires_at
    _settle(draft, TurnOutcome.CANCELLED if stop_first else TurnOutcome.LOST, SettledBy.WATCHDOG)
    return True


# --- settlement (I6, I7) -------------------------------------------------------------------


def _settle(draft: _Draft, outcome: TurnOutcome, settled_by: SettledBy, error: str = "") -> SettledTurn:
    """Ends the active turn with its one outcome, closing everything it left open."""
    turn = draft.state.active
    assert turn is not None
    now = draft.now
    interrupted: list[str] = []
    for call_id, call in turn.tool_calls.items():
        if call.status is ToolCallStatus.OPEN:
            closed = replace(call, status=ToolCallStatus.INTERRUPTED, closed_at=now)
            draft.emit(ToolCallChanged(turn.turn_id, turn.generation, call_id, closed))
            interrupted.append(call_id)
    _, cancelled = _cancel_pending(draft, turn)
    unconsumed, requeued = _end_pending_steers(draft, turn)
    settled = SettledTurn(
        turn_id=turn.turn_id,
        runner_id=turn.runner_id,
        generation=turn.generation,
        outcome=outcome,
        settled_by=settled_by,
        admitted_at=turn.admitted_at,
        settled_at=now,
        stop_requested=turn.stop is not None,
        stop_reason=turn.stop.reason if turn.stop else "",
        error=error,
        principal=turn.principal,
        queued_at=turn.queued_at,
    )
    draft.emit(TurnSettled(settled, tuple(interrupted), cancelled, turn.traceparent, unconsumed))
    recent = (*draft.state.recent, settled)[-limits.RECENT_TURNS :]
    draft.state = replace(draft.state, active=None, recent=recent)
    _requeue(draft, turn, requeued)
    _pause_if_asked(draft, turn, outcome)
    return settled


def _cancel_pending(draft: _Draft, turn: ActiveTurn) -> tuple[ActiveTurn, tuple[str, ...]]:
    """Cancels the turn's pending interactions (with events); returns the turn and their ids."""
    cancelled: dict[str, Interaction] = {
        iid: replace(it, status=InteractionStatus.CANCELLED, closed_at=draft.now)
        for iid, it in turn.interactions.items()
        if it.status is InteractionStatus.PENDING
    }
    for iid, it in cancelled.items():
        draft.emit(InteractionChanged(turn.turn_id, turn.generation, iid, it))
    return replace(turn, interactions={**turn.interactions, **cancelled}), tuple(cancelled)


# --- retirement (§8) ------------------------------------------------------------------------


def _retire(draft: _Draft, cmd: Retire) -> Retired:
    """R1: a session in which nothing has been live for `idle_retention` leaves the hot store, in
    one write compared like any other (an admission that got there first keeps it). What the
    clock settled in this very decision was live until now."""
    idle_since = draft.state.idle_since()
    unwritten = draft.state.epoch == NO_EPOCH  # nothing to remove
    if unwritten or draft.bodies or idle_since is None or draft.now < idle_since + cmd.idle_retention:
        return Retired(False)
    draft.removed = True
    return Retired(True)


def needs_history(state: Session, command: Command) -> bool:
    """R2: a Stop naming a turn, on a session the store does not hold (never written, or retired):
    whether that turn ran, and how the last one ended, are in the session's history."""
    return isinstance(command, Cancel) and bool(command.expected_turn_id) and state.epoch == NO_EPOCH


def recalled(state: Session, settled: Sequence[SettledTurn]) -> Session:
    """`state` remembering the turns history recorded (oldest first), as it did before it left."""
    recent = tuple(settled)[-limits.RECENT_TURNS :]
    generation = max((t.generation for t in recent), default=0)
    return replace(state, recent=recent, generation=max(state.generation, generation))


# --- admission (I1, I2, I3, I4) ------------------------------------------------------------


def _admit(draft: _Draft, cmd: Admit) -> Reply:
    state, now = draft.state, draft.now
    if (cancelled := _cancelled_before_start(state, cmd.turn_id, now)) is not None:
        return cancelled
    active = state.active
    if active is not None and active.turn_id == cmd.turn_id:
        if active.runner_id != cmd.runner_id:
            return _refusal_about(
                active,
                ErrorReason.TURN_OWNED_BY_OTHER_RUNNER,
                f"turn {cmd.turn_id} is run by another runner",
                now,
            )
        if foreign := _foreign(active, cmd.principal):
            return foreign
        if not active.claimed:  # a promoted turn's runner picks up its lease (Q2, Q5)
            draft.set_active(replace(active, claimed=True))
        return Admitted(
            active.turn_id,
            active.generation,
            active.lease_expires_at,
            active.lease_ttl // 3,
            replayed=True,
            steer=active.steer,
        )
    if (waiting := state.queued(cmd.turn_id)) is not None:  # Q5: its position while queued
        position, queued = waiting
        if queued.runner_id != cmd.runner_id:
            return _refusal_about_queued(
                queued,
                ErrorReason.TURN_OWNED_BY_OTHER_RUNNER,
                f"turn {cmd.turn_id} is queued by another runner",
            )
        if queued.principal != cmd.principal:
            return Refusal(
                ErrorReason.TURN_HELD_BY_OTHER_PRINCIPAL,
                f"turn {cmd.turn_id} was queued by another principal",
            )
        return Queued(queued, position, len(state.queue), replayed=True)
    if (ran := _already_settled(state, cmd.turn_id)) is not None:
        return ran
    if cmd.mode is AdmissionMode.INTERRUPT:
        return _interrupt(draft, cmd)
    if active is not None:
        if cmd.mode is AdmissionMode.ENQUEUE:
            return _enqueue(draft, cmd, head=False)
        if active.phase is TurnPhase.STOPPING:
            return _refusal_about(
                active, ErrorReason.SESSION_STOPPING, f"session is stopping turn {active.turn_id}", now
            )
        return _refusal_about(
            active, ErrorReason.SESSION_TURN_IN_USE, f"session is running turn {active.turn_id}", now
        )
    if state.queue:  # idle with turns waiting: the queue is paused (Q3); nobody jumps it
        if cmd.mode is AdmissionMode.ENQUEUE:
            return _enqueue(draft, cmd, head=False)
        return _refusal_about_queued(
            state.queue[0], ErrorReason.SESSION_QUEUE_PAUSED, "the session's queue is paused"
        )
    return _start(draft, cmd)


def _start(draft: _Draft, cmd: Admit) -> Reply:
    """Admits cmd's turn on an idle session now."""
    if cmd.max_active_in_project and cmd.active_in_project >= cmd.max_active_in_project:
        return _limit("active_sessions_per_project", cmd.max_active_in_project)
    turn = _hold(draft, cmd)
    return Admitted(turn.turn_id, turn.generation, turn.lease_expires_at, cmd.lease_ttl // 3, replayed=False)


def _hold(draft: _Draft, claim: Admit | QueuedTurn) -> ActiveTurn:
    """The idle session goes to `claim`'s turn now: a fresh generation (I2), a lease that starts
    now, `turn_admitted`. A turn from the queue is admitted before its runner knows (unclaimed)."""
    now = draft.now
    queued = claim if isinstance(claim, QueuedTurn) else None
    turn = ActiveTurn(
        turn_id=claim.turn_id,
        runner_id=claim.runner_id,
        generation=_next_generation(draft),
        phase=TurnPhase.RUNNING,
        admitted_at=now,
        lease_ttl=claim.lease_ttl,
        lease_expires_at=now + claim.lease_ttl,
        traceparent=claim.traceparent,
        principal=claim.principal,
        claimed=queued is None,
        queued_at=queued.queued_at if queued else 0,
        steer=queued.steer if queued else None,
    )
    draft.state = replace(draft.state, active=turn)
    draft.emit(
        TurnAdmitted(
            turn.turn_id,
            turn.runner_id,
            turn.generation,
            now,
            turn.lease_expires_at,
            turn.traceparent,
            from_queue=queued is not None,
            waited=now - queued.queued_at if queued else 0,
            steer=queued.steer if queued else None,
        )
    )
    return turn


# --- the queue (Q1-Q7) ---------------------------------------------------------------------


def _enqueue(draft: _Draft, cmd: Admit, *, head: bool) -> Reply:
    """Q1/Q4: cmd's turn waits, at the tail (ENQUEUE) or the head (INTERRUPT), if there is room."""
    state, now = draft.state, draft.now
    if len(state.queue) >= cmd.max_queue_depth:
        return _queue_full(state, cmd.max_queue_depth, now)
    queued = QueuedTurn(
        cmd.turn_id,
        cmd.runner_id,
        now,
        now + cmd.max_queue_wait,
        cmd.lease_ttl,
        cmd.traceparent,
        cmd.principal,
    )
    queue = (queued, *state.queue) if head else (*state.queue, queued)
    position = 1 if head else len(queue)
    draft.state = replace(state, queue=queue)
    _emit_queued(draft, queued, position)
    return Queued(queued, position, len(queue), replayed=False)


def _queue_full(state: Session, bound: int, now: int) -> Refusal:
    message = f"the session's queue holds its {bound} turns"
    if state.active is not None:
        return _refusal_about(state.active, ErrorReason.SESSION_QUEUE_FULL, message, now)
    return _refusal_about_queued(state.queue[0], ErrorReason.SESSION_QUEUE_FULL, message)


def _interrupt(draft: _Draft, cmd: Admit) -> Reply:
    """Q7: stop the active turn (if it is the one meant) and wait at the head of the queue."""
    state, now = draft.state, draft.now
    active = state.active
    guard = cmd.expected_active_turn_id
    if guard and (active is None or active.turn_id != guard):
        message = f"turn {guard} is not the active turn"
        if active is None:
            return Refusal(ErrorReason.ACTIVE_TURN_MISMATCH, message + ": the session is idle")
        return _refusal_about(active, ErrorReason.ACTIVE_TURN_MISMATCH, message, now)
    if active is None:  # idle: it runs now, even ahead of a paused queue
        return _start(draft, cmd)
    # Stopping another principal's turn is a Stop: only a caller whose role may stop (docs/security.md).
    if not cmd.may_stop_others and (foreign := _foreign(active, cmd.principal)):
        return foreign
    if len(state.queue) >= cmd.max_queue_depth:
        return _queue_full(state, cmd.max_queue_depth, now)
    if active.stop is None:
        stop = Cancel(
            active.turn_id,
            f"interrupted by turn {cmd.turn_id}",
            force=False,
            request_id="",
            stop_grace=cmd.stop_grace,
            tombstone_ttl=0,
            queue=QueueAction.CONTINUE,
        )
        _stop_active(draft, active, stop)
    elif active.stop.queue is QueueAction.PAUSE:  # already stopping: its end must not pause the queue
        draft.set_active(replace(active, stop=replace(active.stop, queue=QueueAction.CONTINUE)))
    return _enqueue(draft, cmd, head=True)


def _promote_if_idle(draft: _Draft) -> str:
    """Q2: an idle session with an unpaused queue admits its head now; returns its turn id."""
    state = draft.state
    if state.active is not None or not state.queue or state.queue_paused:
        return ""
    head = state.queue[0]
    draft.state = replace(state, queue=state.queue[1:])
    return _hold(draft, head).turn_id


def _unpaused_if_empty(state: Session) -> Session:
    """Q3: an emptied queue is no longer paused, so the next ENQUEUE on an idle session runs (Q1)."""
    return state if state.queue or state.queue_paused_by is None else replace(state, queue_paused_by=None)


def _pause_if_asked(draft: _Draft, turn: ActiveTurn, outcome: TurnOutcome) -> None:
    """Q3: the end of `turn` pauses a non-empty queue unless nothing about it could surprise."""
    state = draft.state
    if not state.queue or state.queue_paused:
        return
    if turn.stop is not None:  # the Stop said what follows it (an INTERRUPT's says CONTINUE)
        pauses = turn.stop.queue is QueueAction.PAUSE
    elif outcome is TurnOutcome.LOST:  # a promoted turn whose runner never came: the next follows
        pauses = turn.claimed
    else:
        pauses = outcome in (TurnOutcome.FAILED, TurnOutcome.CANCELLED)
    if pauses:
        stop_reason = turn.stop.reason if turn.stop is not None else ""
        pause = QueuePause(turn.turn_id, outcome, turn.stop is not None, stop_reason)
        draft.state = replace(state, queue_paused_by=pause)
        draft.emit(QueuePaused(turn.turn_id, outcome, pause.stop_requested, pause.stop_reason))


def _expire_queued(draft: _Draft) -> tuple[str, ...]:
    """Q4: queued turns whose expires_at has passed leave the queue EXPIRED, remembered as settled."""
    state, now = draft.state, draft.now
    due = [queued for queued in state.queue if queued.expires_at <= now]
    if not due:
        return ()
    draft.state = replace(state, queue=tuple(q for q in state.queue if q.expires_at > now))
    for q in due:
        generation = _next_generation(draft)
        draft.emit(TurnDequeued(q.turn_id, q.runner_id, generation, TurnOutcome.EXPIRED, q.queued_at))
        ended = SettledTurn(
            turn_id=q.turn_id,
            runner_id=q.runner_id,
            generation=generation,
            outcome=TurnOutcome.EXPIRED,
            settled_by=SettledBy.WATCHDOG,
            admitted_at=0,
            settled_at=now,
            principal=q.principal,
            queued_at=q.queued_at,
        )
        draft.state = replace(draft.state, recent=(*draft.state.recent, ended)[-limits.RECENT_TURNS :])
    return tuple(q.turn_id for q in due)


def _next_generation(draft: _Draft) -> int:
    """A fresh generation (I2), taken: a turn's fencing token when admitted, its place in
    history when it leaves the queue without running."""
    generation = max(draft.state.generation + 1, draft.now)
    draft.state = replace(draft.state, generation=generation)
    return generation


def _drop_queued(draft: _Draft, queued: QueuedTurn, cmd: Cancel | ClearQueue, *, cleared: bool) -> None:
    """A Stop (or ClearQueue) cancels a queued turn: it leaves the queue and is tombstoned like any
    turn stopped before it started (I4), so its AdmitTurn is refused TURN_CANCELLED."""
    state = draft.state
    tombstones = _keep_last(
        state.tombstones, queued.turn_id, draft.now + cmd.tombstone_ttl, limits.MAX_TOMBSTONES
    )
    queue = tuple(q for q in state.queue if q.turn_id != queued.turn_id)
    draft.state = replace(state, queue=queue, tombstones=tombstones)
    generation = _next_generation(draft)
    draft.emit(
        TurnDequeued(
            queued.turn_id,
            queued.runner_id,
            generation,
            TurnOutcome.CANCELLED,
            queued.queued_at,
            cmd.reason,
            cleared,
        )
    )


def _clear_if_asked(draft: _Draft, cmd: Cancel, reply: Cancelled) -> Cancelled:
    """Q3: a Stop with CLEAR cancels every queued turn in its own write."""
    if cmd.queue is not QueueAction.CLEAR or not draft.state.queue:
        return reply
    cleared = draft.state.queue
    for queued in cleared:
        _drop_queued(draft, queued, cmd, cleared=True)
    return replace(reply, cleared_turn_ids=tuple(q.turn_id for q in cleared))


def _clear_queue(draft: _Draft, cmd: ClearQueue) -> QueueCleared:
    """Q3/Q6: ClearQueue cancels every queued turn in its own write and touches the active turn
    in no way; a retry of the same request_id answers what the first call cleared."""
    key = _request_key("clear", cmd.request_id)
    if isinstance(first := _recalled(draft, key), QueueCleared):
        return first
    cleared = draft.state.queue
    for queued in cleared:
        _drop_queued(draft, queued, cmd, cleared=True)
    active = draft.state.active
    reply = QueueCleared(tuple(q.turn_id for q in cleared), active.turn_id if active is not None else "")
    _remember(draft, key, reply, cmd.tombstone_ttl)
    return reply


def _resume_queue(draft: _Draft, cmd: ResumeQueue) -> Resumed:
    """Q3: ResumeQueue un-pauses the queue and admits its head if the session is idle. A retry of
    the same request_id answers the turn the first call admitted, and the queue as it is now."""
    key = _request_key("resume", cmd.request_id)
    if isinstance(first := _recalled(draft, key), Resumed):
        return replace(first, queue=draft.state.queue)
    state = draft.state
    admitted = ""
    if state.queue_paused_by is not None:
        draft.state = replace(state, queue_paused_by=None)
        draft.emit(QueueResumed(state.queue_paused_by.turn_id))
        admitted = _promote_if_idle(draft)
    # The queue is not kept with the answer: a retry reports it as it is then.
    _remember(draft, key, Resumed(admitted, ()), cmd.tombstone_ttl)
    return Resumed(admitted, draft.state.queue)


def _move_queued(draft: _Draft, cmd: MoveQueuedTurn) -> Reply:
    """Q8: a queued turn moves to the head or right after another, only on the queue version the
    editor saw, so two editors never undo each other's edits unseen. A retry of the same request_id
    answers the first move, with the queue as it is now."""
    key = _request_key("move", cmd.request_id)
    state = draft.state
    if isinstance(_recalled(draft, key), QueueMoved):
        return QueueMoved(state.queue, state.queue_version)
    expected = cmd.expected_queue_version
    if expected is not None and expected != state.queue_version:
        return Refusal(
            ErrorReason.QUEUE_VERSION_MISMATCH,
            f"the queue is at version {state.queue_version}, not {expected}: read it again",
        )
    for turn_id in (cmd.turn_id, cmd.after_turn_id):
        if turn_id and state.queued(turn_id) is None:
            return Refusal(ErrorReason.TURN_NOT_QUEUED, f"turn {turn_id} is not in the queue")
    queue = _moved(state.queue, cmd.turn_id, cmd.after_turn_id)
    _remember(draft, key, QueueMoved((), 0), cmd.tombstone_ttl)
    if queue != state.queue:
        draft.state = replace(draft.state, queue=queue)
        draft.emit(QueueReordered(tuple(q.turn_id for q in queue), cmd.turn_id))
    version = state.queue_version + (queue != draft.original.queue)
    return QueueMoved(queue, version)


def _moved(queue: tuple[QueuedTurn, ...], turn_id: str, after_turn_id: str) -> tuple[QueuedTurn, ...]:
    """`queue` with turn_id at the head ('' after_turn_id) or right after after_turn_id (both
    queued); after itself, it stays where it is."""
    if turn_id == after_turn_id:
        return queue
    moving = next(q for q in queue if q.turn_id == turn_id)
    rest = [q for q in queue if q.turn_id != turn_id]
    at = next((i + 1 for i, q in enumerate(rest) if q.turn_id == after_turn_id), 0)
    return (*rest[:at], moving, *rest[at:])


def _cancelled_before_start(state: Session, turn_id: str, now: int) -> Refusal | None:
    """I4: a turn tombstoned by a Stop before it started never starts."""
    if not _tombstoned(state, turn_id, now):
        return None
    return Refusal(ErrorReason.TURN_CANCELLED, f"turn {turn_id} was cancelled before it started")


def _already_settled(state: Session, turn_id: str) -> Refusal | None:
    """A turn that ran (or left the queue) does not start again."""
    settled = state.settled(turn_id)
    if settled is None:
        return None
    return Refusal(
        ErrorReason.TURN_ALREADY_SETTLED,
        f"turn {turn_id} already settled {settled.outcome.name}",
        settled_outcome=settled.outcome,
    )


def _refusal_about_queued(queued: QueuedTurn, reason: ErrorReason, message: str) -> Refusal:
    return Refusal(reason, message, active_turn_id=queued.turn_id, active_phase=TurnPhase.QUEUED)


def _tombstoned(state: Session, turn_id: str, now: int) -> bool:
    expires_at = state.tombstones.get(turn_id)
    return expires_at is not None and expires_at > now


_RETRYABLE = frozenset({ErrorReason.SESSION_TURN_IN_USE, ErrorReason.SESSION_STOPPING})


def _refusal_about(active: ActiveTurn, reason: ErrorReason, message: str, now: int) -> Refusal:
    """A refusal naming the active turn; a retryable one says when the session will have changed."""
    return Refusal(
        reason,
        message,
        active_turn_id=active.turn_id,
        active_phase=active.phase,
        active_lease_expires_at=active.lease_expires_at,
        retry_after=max(0, active.deadline() - now) if reason in _RETRYABLE else None,
    )


# --- the runner's writes (I2) --------------------------------------------------------------


def _fenced(state: Session, turn_id: str, generation: int) -> ActiveTurn | None:
    """The active turn if the presented pair is its own; None for a stale or foreign lease."""
    active = state.active
    if active is None or active.turn_id != turn_id or active.generation != generation:
        return None
    return active


def _foreign(turn: ActiveTurn | SettledTurn, principal: str) -> Refusal | None:
    """A refusal when `principal` is not the one the turn was admitted to."""
    if turn.principal == principal:
        return None
    return Refusal(
        ErrorReason.TURN_HELD_BY_OTHER_PRINCIPAL, f"turn {turn.turn_id} was admitted to another principal"
    )


def _writable(
    state: Session, cmd: RecordToolCall | RecordInteraction | AcknowledgeSteer
) -> ActiveTurn | Refusal:
    """The active turn a runner's record writes to: its lease's (I2), held by its principal."""
    turn = _fenced(state, cmd.turn_id, cmd.generation)
    if turn is None:
        return _not_active(cmd.turn_id)
    return _foreign(turn, cmd.principal) or turn


def _recorded_settlement(state: Session, turn_id: str, generation: int) -> SettledTurn | None:
    settled = state.settled(turn_id)
    return settled if settled is not None and settled.generation == generation else None


def _not_active(turn_id: str) -> Refusal:
    return Refusal(ErrorReason.TURN_NOT_ACTIVE, f"turn {turn_id} with this generation is not active")


def _limit(limit: str, bound: int) -> Refusal:
    return Refusal(ErrorReason.LIMIT_EXCEEDED, f"at most {bound} {limit.replace('_', ' ')}", limit=limit)


def _heartbeat(draft: _Draft, cmd: Heartbeat) -> Reply:
    turn = _fenced(draft.state, cmd.turn_id, cmd.generation)
    if turn is None:
        settled = _recorded_settlement(draft.state, cmd.turn_id, cmd.generation)
        if settled is None:
            return HeartbeatReply(Directive.ABANDON)
        return _foreign(settled, cmd.principal) or HeartbeatReply(
            Directive.ABANDON, settled_outcome=settled.outcome
        )
    if foreign := _foreign(turn, cmd.principal):
        return foreign
    turn = replace(turn, lease_expires_at=draft.now + (cmd.lease_ttl or turn.lease_ttl), claimed=True)
    draft.set_active(turn)
    if turn.stop is None:
        return HeartbeatReply(Directive.CONTINUE, turn.lease_expires_at)
    return HeartbeatReply(Directive.STOP, turn.lease_expires_at, turn.stop.deadline, turn.stop.reason)


def _record_tool_call(draft: _Draft, cmd: RecordToolCall) -> Reply:
    turn = _writable(draft.state, cmd)
    if isinstance(turn, Refusal):
        return turn
    opening = cmd.status is ToolCallStatus.OPEN
    existing = turn.tool_calls.get(cmd.call_id)
    if existing is not None:
        if opening or existing.status is not ToolCallStatus.OPEN:
            return ToolCallReply(cmd.call_id, existing, "", recorded=False)
        call = replace(existing, status=cmd.status, closed_at=draft.now)
    else:
        if len(turn.tool_calls) >= limits.MAX_TOOL_CALLS:
            return _limit("tool_calls_per_turn", limits.MAX_TOOL_CALLS)
        open_count = sum(1 for c in turn.tool_calls.values() if c.status is ToolCallStatus.OPEN)
        if opening and open_count >= cmd.max_open:
            return _limit("open_tool_calls", cmd.max_open)
        call = ToolCall(cmd.name, cmd.status, draft.now, None if opening else draft.now)
    error = cmd.error if cmd.status is ToolCallStatus.FAILED else ""
    draft.set_active(replace(turn, tool_calls={**turn.tool_calls, cmd.call_id: call}, claimed=True))
    draft.emit(ToolCallChanged(turn.turn_id, turn.generation, cmd.call_id, call, error))
    return ToolCallReply(cmd.call_id, call, error, recorded=True)


def _record_interaction(draft: _Draft, cmd: RecordInteraction) -> Reply:
    turn = _writable(draft.state, cmd)
    if isinstance(turn, Refusal):
        return turn
    existing = turn.interactions.get(cmd.interaction_id)
    if existing is not None:
        return InteractionReply(turn.turn_id, cmd.interaction_id, existing, "", recorded=False)
    if len(turn.interactions) >= limits.MAX_INTERACTIONS:
        return _limit("interactions_per_turn", limits.MAX_INTERACTIONS)
    pending = sum(1 for i in turn.interactions.values() if i.status is InteractionStatus.PENDING)
    if pending >= cmd.max_pending:
        return _limit("pending_interactions", cmd.max_pending)
    # A stopping turn may not put a new question to anyone: it is recorded already cancelled.
    if turn.phase is TurnPhase.STOPPING:
        interaction = Interaction(cmd.kind, InteractionStatus.CANCELLED, draft.now, draft.now)
    else:
        interaction = Interaction(cmd.kind, InteractionStatus.PENDING, draft.now)
    draft.set_active(
        replace(turn, interactions={**turn.interactions, cmd.interaction_id: interaction}, claimed=True)
    )
    draft.emit(InteractionChanged(turn.turn_id, turn.generation, cmd.interaction_id, interaction))
    return InteractionReply(turn.turn_id, cmd.interaction_id, interaction, "", recorded=True)


def _complete(draft: _Draft, cmd: Complete) -> Reply:
    turn = _fenced(draft.state, cmd.turn_id, cmd.generation)
    if turn is None:
        settled = _recorded_settlement(draft.state, cmd.turn_id, cmd.generation)
        if settled is None:
            return _not_active(cmd.turn_id)
        return _foreign(settled, cmd.principal) or CompleteReply(settled, recorded=False)
    if foreign := _foreign(turn, cmd.principal):
        return foreign
    return CompleteReply(_settle(draft, cmd.outcome, SettledBy.RUNNER, cmd.error), recorded=True)


# --- the gateway (I4, I5, I12) -------------------------------------------------------------


def _resolve_interaction(draft: _Draft, cmd: ResolveInteraction) -> Reply:
    """I12; a retry of the same request_id answers what the first call resolved (with the retry's
    own resolution: the document does not keep texts)."""
    key = _request_key("resolve", cmd.request_id)
    if isinstance(first := _recalled(draft, key), InteractionReply):
        return replace(first, resolution=cmd.resolution)
    turn = draft.state.active
    interaction = turn.interactions.get(cmd.interaction_id) if turn else None
    if turn is None or interaction is None or interaction.status is not InteractionStatus.PENDING:
        status = interaction.status.name.lower() if interaction else "not open in the active turn"
        return Refusal(
            ErrorReason.INTERACTION_NOT_PENDING, f"interaction {cmd.interaction_id} is not pending: {status}"
        )
    resolved = replace(interaction, status=InteractionStatus.RESOLVED, closed_at=draft.now)
    draft.set_active(replace(turn, interactions={**turn.interactions, cmd.interaction_id: resolved}))
    draft.emit(
        InteractionChanged(turn.turn_id, turn.generation, cmd.interaction_id, resolved, cmd.resolution)
    )
    reply = InteractionReply(turn.turn_id, cmd.interaction_id, resolved, cmd.resolution, recorded=True)
    # A refusal is not remembered (it changes nothing); nor is the text, up to 16 KiB.
    _remember(draft, key, replace(reply, resolution=""), cmd.tombstone_ttl)
    return reply


def _cancel(draft: _Draft, cmd: Cancel) -> CancelReply:
    key = _request_key("cancel", cmd.request_id)
    if isinstance(first := _recalled(draft, key), Cancelled | Mismatch | Idle):
        return first
    reply = _stop(draft, cmd)
    _remember(draft, key, reply, cmd.tombstone_ttl)
    return reply


# --- request ids: a retry answers what the first call did (docs/design.md §3.2) -------------------


def _request_key(kind: str, request_id: str) -> str:
    """Where a request_id's answer is kept: CancelTurn's under the id itself (as ever), the others'
    under `kind/id` ('/' is in no id, so no two kinds share a key); '' when there is no id."""
    if not request_id:
        return ""
    return request_id if kind == "cancel" else f"{kind}/{request_id}"


def _recalled(draft: _Draft, key: str) -> RememberedReply | None:
    """The answer first given under `key`, while it is remembered."""
    memo = draft.state.requests.get(key) if key else None
    return memo.reply if memo is not None and memo.expires_at > draft.now else None


def _remember(draft: _Draft, key: str, reply: RememberedReply, ttl: int) -> None:
    """Keeps `reply` under `key` for `ttl` (nothing without a key), the oldest dropped past the bound."""
    if key:
        memo = RequestMemo(reply, draft.now + ttl)
        requests = _keep_last(draft.state.requests, key, memo, limits.MAX_REQUEST_MEMOS)
        draft.state = replace(draft.state, requests=requests)


def _stop(draft: _Draft, cmd: Cancel) -> CancelReply:
    state, expected = draft.state, cmd.expected_turn_id
    active = state.active
    if active is not None and expected in ("", active.turn_id):
        return _clear_if_asked(draft, cmd, _stop_active(draft, active, cmd))
    # A turn that had not started is cancelled below; the answer names the turn that runs on.
    untouched = active.turn_id if active is not None else ""
    if expected and (waiting := state.queued(expected)) is not None:  # Q6: only that queued turn
        _drop_queued(draft, waiting[1], cmd, cleared=False)
        return _clear_if_asked(draft, cmd, Cancelled((expected,), queued=True, active_turn_id=untouched))
    last = state.last_settled
    last_turn_id, last_outcome = (last.turn_id, last.outcome) if last else ("", None)
    settled = state.settled(expected) if expected else None
    if not expected or settled is not None:
        expected_outcome = settled.outcome if settled else None
        if active is not None:
            return Mismatch(expected, active.turn_id, active.phase, expected_outcome)
        if not expected and cmd.queue is QueueAction.CLEAR and state.queue:  # clears a paused queue
            return _clear_if_asked(draft, cmd, Cancelled(()))
        return Idle(expected, expected_outcome, last_turn_id, last_outcome)
    # Never admitted, as far as this session remembers: it must not start when it arrives.
    if not _tombstoned(state, expected, draft.now):
        tombstones = _keep_last(
            state.tombstones, expected, draft.now + cmd.tombstone_ttl, limits.MAX_TOMBSTONES
        )
        draft.state = replace(state, tombstones=tombstones)
        draft.emit(StopRequested(expected, 0, cmd.reason, draft.now, None, before_start=True))
    return _clear_if_asked(draft, cmd, Cancelled((expected,), before_start=True, active_turn_id=untouched))


def _stop_active(draft: _Draft, turn: ActiveTurn, cmd: Cancel) -> Cancelled:
    now = draft.now
    if turn.stop is None or cmd.force:
        deadline = None if cmd.force else now + cmd.stop_grace
        draft.emit(StopRequested(turn.turn_id, turn.generation, cmd.reason, now, deadline, force=cmd.force))
    if turn.stop is None:
        turn, cancelled = _cancel_pending(draft, turn)
        stop = StopRequest(now, cmd.reason, now if cmd.force else now + cmd.stop_grace, cancelled, cmd.queue)
        turn = replace(turn, phase=TurnPhase.STOPPING, stop=stop)
        draft.set_active(turn)
    else:
        stop = turn.stop
    if cmd.force:
        _settle(draft, TurnOutcome.CANCELLED, SettledBy.GATEWAY)
        return Cancelled(
            (turn.turn_id,), settled=True, cancelled_interaction_ids=stop.cancelled_interaction_ids
        )
    return Cancelled(
        (turn.turn_id,),
        stopping_turn_id=turn.turn_id,
        cancelled_interaction_ids=stop.cancelled_interaction_ids,
        stop_deadline=stop.deadline,
    )


# --- steers (§9: S1-S7) --------------------------------------------------------------------


def _steer(draft: _Draft, cmd: SteerTurn) -> Reply:
    """S1 guarded by the turn it names, S3 idempotent, S4 bounded, S5 pushed; S7 the fallback."""
    key = _request_key("steer", cmd.request_id or cmd.steer_id)
    if isinstance(first := _recalled(draft, key), Steered | SteerQueued):
        return replace(first, replayed=True)
    active = draft.state.active
    if active is not None and active.turn_id == cmd.expected_turn_id:
        if (known := active.steers.get(cmd.steer_id)) is not None:
            return Steered(active.turn_id, cmd.steer_id, known.seq, replayed=True)
        if active.phase is TurnPhase.RUNNING:
            if len(active.steers) >= cmd.max_steers:
                return _limit("steers_per_turn", cmd.max_steers)
            reply: SteerReply | Refusal = _steer_running(draft, active, cmd)
            _remember_steer(draft, key, reply, cmd)
            return reply
    if cmd.fallback is SteerFallback.ENQUEUE and (runner := _runner_of(draft.state, cmd.expected_turn_id)):
        reply = _steer_enqueued(draft, cmd, runner)
        _remember_steer(draft, key, reply, cmd)
        return reply
    return _steer_mismatch(draft.state, cmd.expected_turn_id)


def _steer_running(draft: _Draft, turn: ActiveTurn, cmd: SteerTurn) -> Steered:
    """S1/S5: the steer joins the running turn, pending, its input kept until the runner answers."""
    seq = draft.state.next_seq + len(draft.bodies)
    steer = Steer(
        SteerStatus.PENDING,
        draft.now,
        draft.now + cmd.steer_wait,
        seq,
        SteerInput(cmd.steer_id, cmd.content, cmd.content_type),
        cmd.max_queue_wait if cmd.requeue else 0,
    )
    draft.set_active(replace(turn, steers={**turn.steers, cmd.steer_id: steer}))
    draft.emit(
        TurnSteered(
            turn.turn_id, turn.generation, cmd.steer_id, cmd.content, cmd.content_type, steer.expires_at
        )
    )
    return Steered(turn.turn_id, cmd.steer_id, seq)


def _remember_steer(draft: _Draft, key: str, reply: SteerReply | Refusal, cmd: SteerTurn) -> None:
    if isinstance(reply, Steered | SteerQueued):
        _remember(draft, key, reply, cmd.tombstone_ttl)


def _steer_mismatch(state: Session, expected: str) -> SteerMismatch:
    """S1: nothing changes; the answer says what holds the session and what became of the turn."""
    active = state.active
    expected_phase: TurnPhase | None = None
    if active is not None and active.turn_id == expected:
        expected_phase = active.phase
    elif state.queued(expected) is not None:
        expected_phase = TurnPhase.QUEUED
    settled = state.settled(expected)
    if settled is not None:
        expected_phase = TurnPhase.SETTLED
    other_active = active is not None and active.turn_id != expected
    return SteerMismatch(
        expected,
        ErrorReason.ACTIVE_TURN_MISMATCH if other_active else ErrorReason.TURN_NOT_ACTIVE,
        current_turn_id=active.turn_id if active is not None else "",
        current_phase=active.phase if active is not None else None,
        expected_phase=expected_phase,
        expected_outcome=settled.outcome if settled is not None else None,
    )


@dataclass(frozen=True, slots=True)
class _Runner:
    """Who runs a turn a steer becomes: the runner (and principal) of the turn the steer named."""

    runner_id: str
    principal: str
    traceparent: str


def _runner_of(state: Session, turn_id: str) -> _Runner | None:
    """The runner of turn_id, active, queued or settled; None for a turn this session never saw."""
    active = state.active
    if active is not None and active.turn_id == turn_id:
        return _Runner(active.runner_id, active.principal, active.traceparent)
    if (waiting := state.queued(turn_id)) is not None:
        return _Runner(waiting[1].runner_id, waiting[1].principal, waiting[1].traceparent)
    settled = state.settled(turn_id)
    if settled is not None:
        return _Runner(settled.runner_id, settled.principal, "")
    return None


def _steer_enqueued(draft: _Draft, cmd: SteerTurn, runner: _Runner) -> SteerQueued | Refusal:
    """S7: the steer becomes a turn of its own, `steer_id`, for the same runner, waiting at the
    queue's tail as an ENQUEUE would (Q1, Q4); on an idle session with an unpaused queue it is
    promoted in this write (Q2), and its runner learns it, with the input, from its watch."""
    state, now = draft.state, draft.now
    if (taken := _turn_id_taken(state, cmd.steer_id, now)) is not None:
        return taken
    if len(state.queue) >= cmd.max_queue_depth:
        return _queue_full(state, cmd.max_queue_depth, now)
    queued = QueuedTurn(
        cmd.steer_id,
        runner.runner_id,
        now,
        now + cmd.max_queue_wait,
        cmd.lease_ttl,
        runner.traceparent,
        runner.principal,
        SteerInput(cmd.steer_id, cmd.content, cmd.content_type),
    )
    queue = (*state.queue, queued)
    draft.state = replace(state, queue=queue)
    _emit_queued(draft, queued, len(queue))
    admitted = _promote_if_idle(draft) == queued.turn_id
    return SteerQueued(queued, 0 if admitted else len(queue), len(draft.state.queue), admitted)


def _turn_id_taken(state: Session, turn_id: str, now: int) -> Refusal | None:
    """Why a steer cannot become turn `turn_id`: the session knows a turn by that id (refused as
    its admission would be)."""
    if (
        refused := _cancelled_before_start(state, turn_id, now) or _already_settled(state, turn_id)
    ) is not None:
        return refused
    active = state.active
    if (active is not None and active.turn_id == turn_id) or state.queued(turn_id) is not None:
        return Refusal(ErrorReason.TURN_OWNED_BY_OTHER_RUNNER, f"turn {turn_id} exists already")
    return None


def _acknowledge_steer(draft: _Draft, cmd: AcknowledgeSteer) -> Reply:
    """S2: the runner ends a pending steer of its own turn, once; a repeat answers that end."""
    turn = _writable(draft.state, cmd)
    if isinstance(turn, Refusal):
        return turn
    steer = turn.steers.get(cmd.steer_id)
    if steer is None:
        return Refusal(ErrorReason.STEER_NOT_FOUND, f"turn {turn.turn_id} has no steer {cmd.steer_id}")
    if steer.status is not SteerStatus.PENDING:
        return SteerAcknowledged(cmd.steer_id, steer.status, recorded=False)
    draft.set_active(replace(_steer_ended(draft, turn, cmd.steer_id, cmd.status), claimed=True))
    return SteerAcknowledged(cmd.steer_id, cmd.status, recorded=True)


def _steer_ended(
    draft: _Draft, turn: ActiveTurn, steer_id: str, status: SteerStatus, *, requeued: bool = False
) -> ActiveTurn:
    """`turn` with its steer ended (S2): its input dropped, its event emitted."""
    steer = replace(turn.steers[steer_id], status=status, ended_at=draft.now, input=None)
    draft.emit(SteerEnded(turn.turn_id, turn.generation, steer_id, status, requeued))
    return replace(turn, steers={**turn.steers, steer_id: steer})


def _expire_steers(draft: _Draft) -> None:
    """S2: a steer not acknowledged by its expires_at ends EXPIRED, unless its turn's own deadline
    came first (then the turn's end finds it UNCONSUMED)."""
    turn = draft.state.active
    if turn is None:
        return
    until = min(draft.now, turn.deadline() - 1)
    due = [sid for sid, s in turn.pending_steers().items() if s.expires_at <= until]
    for steer_id in due:
        turn = _steer_ended(draft, turn, steer_id, SteerStatus.EXPIRED)
    if due:
        draft.set_active(turn)


def _end_pending_steers(draft: _Draft, turn: ActiveTurn) -> tuple[tuple[str, ...], list[str]]:
    """S2 at settlement: every steer still pending ends UNCONSUMED; returns their ids, and those
    that join the queue once the turn has settled (S6)."""
    unconsumed = tuple(turn.pending_steers())
    requeued = _requeued(draft, turn, unconsumed)
    ended = turn
    for steer_id in unconsumed:
        ended = _steer_ended(draft, ended, steer_id, SteerStatus.UNCONSUMED, requeued=steer_id in requeued)
    return unconsumed, requeued


def _requeued(draft: _Draft, turn: ActiveTurn, unconsumed: tuple[str, ...]) -> list[str]:
    """S6: the unconsumed steers whose sender asked, whose id names no turn of the session, as many
    as the document's bound on the queue leaves room for."""
    room = max(0, limits.MAX_QUEUE_DEPTH - len(draft.state.queue))
    asked = [
        sid
        for sid in unconsumed
        if turn.steers[sid].requeue_wait and _turn_id_taken(draft.state, sid, draft.now) is None
    ]
    return asked[:room]


def _requeue(draft: _Draft, turn: ActiveTurn, requeued: list[str]) -> None:
    """S6: the requeued steers join the queue's head, in the order they came, each a turn of the
    ending turn's runner carrying its input."""
    now = draft.now
    turns = [
        QueuedTurn(
            steer_id,
            turn.runner_id,
            now,
            now + turn.steers[steer_id].requeue_wait,
            turn.lease_ttl,
            turn.traceparent,
            turn.principal,
            turn.steers[steer_id].input,
        )
        for steer_id in requeued
    ]
    draft.state = replace(draft.state, queue=(*turns, *draft.state.queue))
    for position, queued in enumerate(turns, start=1):
        _emit_queued(draft, queued, position)


def _emit_queued(draft: _Draft, queued: QueuedTurn, position: int) -> None:
    draft.emit(
        TurnQueued(
            queued.turn_id,
            queued.runner_id,
            position,
            queued.queued_at,
            queued.expires_at,
            queued.traceparent,
            queued.steer,
        )
    )
