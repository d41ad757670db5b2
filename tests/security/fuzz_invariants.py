"""The core invariants, checked through the SessionService API after a session was fuzzed: a
consistent snapshot (one active turn at most, a STOPPING phase only with its stop…) and an event
log with seq gapless up to the head that tells one turn at a time, each settling once with
nothing left open (I1, I6, I7, I9)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.support.calls import events_after, snapshot
from tests.support.servers import Client
from turngate.v1 import turngate_pb2 as pb

REPLAY_WINDOW = 900  # below the default event_retention (1,000), so replays never resync
WAIT_TIMEOUT_S = 10.0
Metadata = tuple[tuple[str, str], ...]


def check_snapshot(snapshot: pb.SessionSnapshot, session: pb.SessionRef) -> None:
    where = f"{session.project_id}/{session.session_id}"
    assert snapshot.session == session, where
    assert snapshot.seq >= 0, where
    has_active = snapshot.HasField("active")
    assert (snapshot.phase == pb.SESSION_PHASE_IDLE) == (not has_active), f"{where}: {snapshot}"
    if has_active:
        active = snapshot.active
        assert active.generation > 0, f"{where}: {snapshot}"
        assert active.HasField("admitted_at"), f"{where}: {snapshot}"
        assert active.HasField("lease_expires_at"), f"{where}: {snapshot}"
        assert active.outcome == pb.TURN_OUTCOME_UNSPECIFIED, f"{where}: {snapshot}"
        assert not active.HasField("settled_at"), f"{where}: {snapshot}"
        if snapshot.phase == pb.SESSION_PHASE_RUNNING:
            assert active.phase == pb.TURN_PHASE_RUNNING, f"{where}: {snapshot}"
            assert not active.stop_requested, f"{where}: {snapshot}"
            assert not active.HasField("stop_deadline"), f"{where}: {snapshot}"
        else:
            assert snapshot.phase == pb.SESSION_PHASE_STOPPING, f"{where}: {snapshot}"
            assert active.phase == pb.TURN_PHASE_STOPPING, f"{where}: {snapshot}"
            assert active.stop_requested, f"{where}: {snapshot}"
            assert active.HasField("stop_deadline"), f"{where}: {snapshot}"
    if snapshot.HasField("last_settled"):
        last = snapshot.last_settled
        assert last.phase == pb.TURN_PHASE_SETTLED, f"{where}: {snapshot}"
        assert last.outcome != pb.TURN_OUTCOME_UNSPECIFIED, f"{where}: {snapshot}"
        assert last.settled_by != pb.SETTLED_BY_UNSPECIFIED, f"{where}: {snapshot}"
        assert last.HasField("settled_at"), f"{where}: {snapshot}"
        if has_active:
            assert last.generation < snapshot.active.generation, f"{where}: {snapshot}"
            assert last.turn_id != snapshot.active.turn_id, f"{where}: {snapshot}"


_UNKNOWN = "<unknown>"  # the active turn before the first event seen


@dataclass
class LogModel:
    """Follows a stretch of a session's log; `active` is _UNKNOWN until an admission or a
    settlement tells it (a replay may start mid-turn)."""

    active: str | None = _UNKNOWN
    generation: int = 0
    open_calls: set[str] = field(default_factory=set)
    pending: set[str] = field(default_factory=set)
    # Whether open_calls and pending were followed since the active turn's admission.
    followed: bool = False
    settled: set[str] = field(default_factory=set)

    def _of_active(self, turn_id: str, event: pb.SessionEvent) -> None:
        assert self.active in (_UNKNOWN, turn_id), (
            f"event of {turn_id} while {self.active} is active: {event}"
        )

    def apply(self, event: pb.SessionEvent) -> None:
        match event.WhichOneof("kind"):
            case "turn_admitted":
                turn = event.turn_admitted.turn
                assert self.active in (_UNKNOWN, None), (
                    f"I1: {turn.turn_id} admitted while {self.active} active"
                )
                assert turn.generation > self.generation, f"I2: generation went back: {event}"
                self.active, self.generation, self.followed = turn.turn_id, turn.generation, True
                self.open_calls, self.pending = set(), set()
            case "stop_requested":
                if not event.stop_requested.before_start:
                    self._of_active(event.stop_requested.turn_id, event)
            case "tool_call":
                self._of_active(event.tool_call.turn_id, event)
                call = event.tool_call.tool_call
                if call.status == pb.TOOL_CALL_STATUS_OPEN:
                    self.open_calls.add(call.call_id)
                else:
                    self.open_calls.discard(call.call_id)
            case "interaction":
                self._of_active(event.interaction.turn_id, event)
                interaction = event.interaction.interaction
                if interaction.status == pb.INTERACTION_STATUS_PENDING:
                    self.pending.add(interaction.interaction_id)
                else:
                    self.pending.discard(interaction.interaction_id)
            case "turn_settled":
                turn = event.turn_settled.turn
                self._of_active(turn.turn_id, event)
                assert turn.turn_id not in self.settled, f"I6: {turn.turn_id} settled twice"
                if self.followed:
                    assert not self.open_calls, (
                        f"I7: {turn.turn_id} settled with calls open: {self.open_calls}"
                    )
                    assert not self.pending, f"I7: {turn.turn_id} settled with {self.pending} pending"
                self.settled.add(turn.turn_id)
                self.active, self.followed = None, False
            case "turn_queued":
                queued = event.turn_queued.turn.turn_id
                assert queued != self.active, f"I1: {queued} queued while it is the active turn"
                assert queued not in self.settled, f"I6: {queued} queued after it settled"
            case "turn_dequeued":
                left = event.turn_dequeued.turn_id
                assert left != self.active, f"{left} left the queue while it is the active turn"
                assert left not in self.settled, f"I6: {left} left the queue after it settled"
                self.settled.add(left)
            case "queue_paused" | "queue_resumed":
                pass  # the queue's state; no turn's
            case other:
                raise AssertionError(f"unexpected {other} in the log: {event}")


def check_log(
    events: Sequence[pb.SessionEvent],
    after_seq: int,
    snapshot: pb.SessionSnapshot,
    start: pb.SessionSnapshot | None = None,
) -> None:
    """`events` are the log after `after_seq` up to the snapshot's head, as a watcher saw them;
    `start` is the session at after_seq, when known."""
    where = f"{snapshot.session.project_id}/{snapshot.session.session_id}"
    assert [e.seq for e in events] == list(range(after_seq + 1, snapshot.seq + 1)), f"I9: {where} has a gap"
    assert all(e.session == snapshot.session for e in events), f"I11: {where} saw another session's event"
    model = LogModel()
    if start is not None:
        model.active = start.active.turn_id if start.HasField("active") else None
        model.generation = max(start.active.generation, start.last_settled.generation)
    for event in events:
        model.apply(event)
    if model.active != _UNKNOWN:
        current = snapshot.active.turn_id if snapshot.HasField("active") else None
        assert model.active == current, f"{where}: the log says {model.active}, the snapshot {current}"


class Steady:
    """A watcher opened with after_seq=0 before a session is fuzzed, reading everything after."""

    def __init__(self, reader: Client, session: pb.SessionRef) -> None:
        self.session = session
        self.events: list[pb.SessionEvent] = []
        self._call = reader.sessions.WatchSession(pb.WatchSessionRequest(session=session, after_seq=0))
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for response in self._call:
            self.events.append(response.event)

    async def check(self, snapshot: pb.SessionSnapshot) -> None:
        """Waits until the watcher reached the snapshot's head, then checks all it saw."""
        async with asyncio.timeout(WAIT_TIMEOUT_S):
            while not self.events or self.events[-1].seq < snapshot.seq:
                assert not self._task.done(), f"the steady watch ended: {self._task.exception()!r}"
                await asyncio.sleep(0.02)
        first, *rest = self.events
        assert first.HasField("snapshot"), first
        assert not first.snapshot.resync, first
        check_log([e for e in rest if e.seq <= snapshot.seq], first.seq, snapshot, first.snapshot)

    def close(self) -> None:
        self._call.cancel()
        self._task.cancel()


async def check_session(reader: Client, session: pb.SessionRef, steady: Steady | None) -> int:
    """Checks one session's snapshot and log; returns how many events were checked. Without a
    steady watcher the log is replayed from after_seq=max(1, head - REPLAY_WINDOW)."""
    current = await snapshot(reader, session)
    check_snapshot(current, session)
    if steady is not None:
        await steady.check(current)
        return current.seq
    after_seq = max(1, current.seq - REPLAY_WINDOW)
    events = await events_after(reader, session, after_seq) if current.seq > after_seq else []
    check_log(events, after_seq, current)
    return len(events)
