"""Property tests: random command sequences against the invariants, checked after every decision.

A small pool of turn, runner, call, interaction and request ids makes collisions (replays, stale
leases, guarded stops of ended or never-started turns) frequent; fresh turn ids keep the session
busy once the pool is used up. The clock mostly moves forward, sometimes jumps past leases and
stop graces, and sometimes steps back a little (I2 must hold regardless).

An independent model follows the event log alone and must agree with the document after every
decision. Set TURNGATE_HYPOTHESIS_PROFILE=turngate-thorough for a longer run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, multiple, rule

from turngate.service import codec
from turngate.service.core import (
    ActiveTurn,
    Admitted,
    Cancelled,
    CancelReply,
    Command,
    CompleteReply,
    Decision,
    Directive,
    ErrorReason,
    Expire,
    HeartbeatReply,
    Idle,
    InteractionChanged,
    InteractionReply,
    InteractionStatus,
    Mismatch,
    Refusal,
    Session,
    SessionPhase,
    SettledBy,
    StopRequested,
    Swept,
    ToolCallChanged,
    ToolCallReply,
    ToolCallStatus,
    TurnAdmitted,
    TurnOutcome,
    TurnPhase,
    TurnSettled,
    clock_window,
    decide,
)
from turngate.service.core.limits import RECENT_TURNS

from .helpers import (
    SECOND,
    T0,
    Lease,
    admit,
    cancel,
    complete,
    heartbeat,
    interaction,
    resolve,
    shape,
    stale,
    tool_call,
)

# Stand-ins resolved when the rule runs: the active turn's lease and id, the last settled turn's
# id, and a turn id never used before.
HOLDER = Lease("", 0)
ACTIVE_TURN = "<active>"
PREVIOUS_TURN = "<previous>"
NEW_TURN = "<new>"

POOL_TURN_IDS = st.sampled_from(["t1", "t2", "t3", "t4"])
RUNNER_IDS = st.sampled_from(["r1", "r2"])
CALL_IDS = st.sampled_from(["c1", "c2", "c3"])
INTERACTION_IDS = st.sampled_from(["i1", "i2"])
REQUEST_IDS = st.sampled_from(["", "", "q1", "q2"])
LEASE_TTLS = st.sampled_from([2 * SECOND, 20 * SECOND, 60 * SECOND])
STOP_GRACES = st.sampled_from([SECOND, 30 * SECOND])
TOMBSTONE_TTLS = st.sampled_from([10 * SECOND, 600 * SECOND])
CLOCK_STEPS = st.sampled_from([-SECOND, -1, 0, 1, 1_000, SECOND, 3 * SECOND, 12 * SECOND, 40 * SECOND])
RUNNER_OUTCOMES = st.sampled_from([TurnOutcome.COMPLETED, TurnOutcome.FAILED, TurnOutcome.CANCELLED])
RECORD_STATUSES = st.sampled_from([ToolCallStatus.OPEN, ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED])


@dataclass
class Life:
    """One admitted turn as the event log tells it."""

    calls: dict[str, ToolCallStatus] = field(default_factory=dict)
    interactions: dict[str, InteractionStatus] = field(default_factory=dict)
    outcome: TurnOutcome | None = None
    settlements: int = 0


def lease_of(active: ActiveTurn | None) -> Lease | None:
    return None if active is None else Lease(active.turn_id, active.generation)


class SessionMachine(RuleBasedStateMachine):
    """Drives one session document as a store would, through every command the core knows."""

    leases = Bundle("leases")
    # Mostly the active turn's lease; else one given earlier, one never issued, or a made-up one.
    any_lease = st.one_of(
        st.just(HOLDER),
        st.just(HOLDER),
        leases,
        leases.map(stale),
        st.builds(Lease, POOL_TURN_IDS, st.integers(1, 2)),
    )

    def __init__(self) -> None:
        super().__init__()
        self.state = Session()
        self.now = T0
        self.latest = T0  # the furthest the clock has been: what "still lives" is judged by
        self.head = 0
        self.fresh = 0
        self.generations: list[int] = []
        self.lives: dict[Lease, Life] = {}
        self.settled: list[Lease] = []  # in settlement order
        self.holder: Lease | None = None  # the active turn, per the events
        self.tombstones: dict[str, int] = {}
        self.memos: dict[str, tuple[CancelReply, int]] = {}

    # --- the rules -----------------------------------------------------------------------------

    @rule(step=CLOCK_STEPS)
    def clock(self, step: int) -> None:
        self.now += step
        self.latest = max(self.latest, self.now)

    @rule(
        target=leases,
        turn_id=st.just(NEW_TURN) | POOL_TURN_IDS,
        runner_id=RUNNER_IDS,
        lease_ttl=LEASE_TTLS,
    )
    def admit(self, turn_id: str, runner_id: str, lease_ttl: int) -> object:
        turn_id = self.named(turn_id)
        holds = self.sweep().state.active
        tombstone = self.tombstones.get(turn_id, 0)
        reply = self.apply(admit(turn_id, runner_id, lease_ttl)).reply
        if tombstone > self.latest:  # I4
            assert isinstance(reply, Refusal)
            assert reply.reason is ErrorReason.TURN_CANCELLED
        elif tombstone > self.now and isinstance(reply, Refusal):
            pass  # the clock stepped back past the tombstone's end: either answer is right
        elif holds is not None and holds.turn_id == turn_id:
            if holds.runner_id == runner_id:  # I3
                expected = Admitted(
                    turn_id, holds.generation, holds.lease_expires_at, holds.lease_ttl // 3, True
                )
                assert reply == expected
            else:
                assert isinstance(reply, Refusal)
                assert reply.reason is ErrorReason.TURN_OWNED_BY_OTHER_RUNNER
        elif self.remembers_turn(turn_id):  # a turn runs once
            assert isinstance(reply, Refusal)
            assert reply.reason is ErrorReason.TURN_ALREADY_SETTLED
        elif holds is not None:  # I1
            assert isinstance(reply, Refusal)
            busy = ErrorReason.SESSION_STOPPING if holds.stop else ErrorReason.SESSION_TURN_IN_USE
            assert (reply.reason, reply.active_turn_id) == (busy, holds.turn_id)
            assert reply.retry_after == max(0, holds.deadline() - self.now)
        else:
            assert isinstance(reply, Admitted)
            assert not reply.replayed
        if isinstance(reply, Admitted):
            return Lease(turn_id, reply.generation)
        return multiple()

    @rule(lease=any_lease, lease_ttl=st.none() | LEASE_TTLS)
    def heartbeat(self, lease: Lease, lease_ttl: int | None) -> None:
        lease = self.presented(lease)
        swept = self.sweep()
        holds = swept.state.active
        decision = self.apply(heartbeat(lease, lease_ttl))
        reply = decision.reply
        assert isinstance(reply, HeartbeatReply)
        if holds is not None and lease_of(holds) == lease:
            lease_expires_at = self.now + (lease_ttl or holds.lease_ttl)
            if holds.stop is None:
                assert reply == HeartbeatReply(Directive.CONTINUE, lease_expires_at)
            else:  # I5: the runner is told
                stop = holds.stop
                assert reply == HeartbeatReply(Directive.STOP, lease_expires_at, stop.deadline, stop.reason)
        else:  # stale, foreign, settled, or expired by this very clock (I8): abandon, change nothing
            life = self.remembered(lease)
            assert reply == HeartbeatReply(Directive.ABANDON, settled_outcome=life.outcome if life else None)
            assert (decision.state, decision.events) == (swept.state, swept.events)

    @rule(lease=any_lease, call_id=CALL_IDS, status=RECORD_STATUSES)
    def record_tool_call(self, lease: Lease, call_id: str, status: ToolCallStatus) -> None:
        lease = self.presented(lease)
        holds = self.sweep().state.active
        reply = self.apply(tool_call(lease, call_id, status, error="boom")).reply
        if holds is None or lease_of(holds) != lease:  # I2
            assert isinstance(reply, Refusal)
            assert reply.reason is ErrorReason.TURN_NOT_ACTIVE
            return
        assert isinstance(reply, ToolCallReply)
        existing = holds.tool_calls.get(call_id)
        first_close = (
            existing is not None and existing.status is ToolCallStatus.OPEN and status is not existing.status
        )
        assert reply.recorded is (existing is None or first_close)

    @rule(lease=any_lease, interaction_id=INTERACTION_IDS)
    def record_interaction(self, lease: Lease, interaction_id: str) -> None:
        lease = self.presented(lease)
        holds = self.sweep().state.active
        reply = self.apply(interaction(lease, interaction_id)).reply
        if holds is None or lease_of(holds) != lease:  # I2
            assert isinstance(reply, Refusal)
            assert reply.reason is ErrorReason.TURN_NOT_ACTIVE
            return
        assert isinstance(reply, InteractionReply)
        assert reply.recorded is (interaction_id not in holds.interactions)
        if reply.recorded:  # while stopping, nobody is asked anything
            opened = InteractionStatus.CANCELLED if holds.stop else InteractionStatus.PENDING
            assert reply.interaction.status is opened

    @rule(interaction_id=INTERACTION_IDS)
    def resolve(self, interaction_id: str) -> None:
        holds = self.sweep().state.active
        found = holds.interactions.get(interaction_id) if holds else None
        reply = self.apply(resolve(interaction_id, "yes")).reply
        if found is None or found.status is not InteractionStatus.PENDING:  # I12
            assert isinstance(reply, Refusal)
            assert reply.reason is ErrorReason.INTERACTION_NOT_PENDING
        else:
            assert isinstance(reply, InteractionReply)
            assert reply.interaction.status is InteractionStatus.RESOLVED

    @rule(lease=any_lease, outcome=RUNNER_OUTCOMES)
    def complete(self, lease: Lease, outcome: TurnOutcome) -> None:
        lease = self.presented(lease)
        holds = self.sweep().state.active
        reply = self.apply(complete(lease, outcome)).reply
        life = self.remembered(lease)
        if holds is not None and lease_of(holds) == lease:
            assert isinstance(reply, CompleteReply)
            assert (reply.recorded, reply.turn.outcome, reply.turn.settled_by) == (
                True,
                outcome,
                SettledBy.RUNNER,
            )
        elif life is not None:  # I6: a late report gets the recorded outcome back
            assert isinstance(reply, CompleteReply)
            assert (reply.recorded, reply.turn.outcome) == (False, life.outcome)
        else:
            assert isinstance(reply, Refusal)
            assert reply.reason is ErrorReason.TURN_NOT_ACTIVE

    @rule(
        expected=st.sampled_from(["", ACTIVE_TURN, PREVIOUS_TURN]) | POOL_TURN_IDS,
        force=st.sampled_from([False, False, True]),
        request_id=REQUEST_IDS,
        stop_grace=STOP_GRACES,
        tombstone_ttl=TOMBSTONE_TTLS,
    )
    def cancel(
        self, expected: str, force: bool, request_id: str, stop_grace: int, tombstone_ttl: int
    ) -> None:
        expected = self.named(expected)
        swept = self.sweep()
        holds = swept.state.active
        memo = swept.state.requests.get(request_id) if request_id else None
        replayed = memo is not None and memo.expires_at > self.now
        if request_id in self.memos and self.memos[request_id][1] > self.latest:
            assert replayed  # the answer is remembered for as long as promised
        command = cancel(
            expected, force=force, request_id=request_id, stop_grace=stop_grace, tombstone_ttl=tombstone_ttl
        )
        decision = self.apply(command)
        reply = decision.reply
        assert isinstance(reply, Cancelled | Mismatch | Idle)
        nothing_changed = (decision.state.active, decision.events) == (swept.state.active, swept.events)
        if replayed:  # a retry: the first answer, and nothing else
            assert reply == self.memos[request_id][0]
            assert nothing_changed
            return
        if request_id:
            self.memos[request_id] = (reply, self.now + tombstone_ttl)
        if holds is not None and expected in ("", holds.turn_id):
            self.check_stop(holds, decision, swept, force, stop_grace)
        elif not expected or self.remembers_turn(expected):  # I4: ended, or nothing named
            outcome = next(
                (self.lives[lease].outcome for lease in self.recent() if lease.turn_id == expected), None
            )
            if holds is None:
                last = self.settled[-1] if self.settled else None
                last_turn_id, last_outcome = (last.turn_id, self.lives[last].outcome) if last else ("", None)
                assert reply == Idle(expected, outcome, last_turn_id, last_outcome)
            else:
                assert reply == Mismatch(expected, holds.turn_id, holds.phase, outcome)
            assert nothing_changed
        else:  # I4: never admitted, so tombstoned; whatever is active is untouched
            untouched = holds.turn_id if holds is not None else ""
            assert reply == Cancelled((expected,), before_start=True, active_turn_id=untouched)
            assert decision.state.active == holds
            if decision.events != swept.events:
                self.tombstones[expected] = self.now + tombstone_ttl

    @rule()
    def expire(self) -> None:
        due = self.state.deadline()
        decision = self.apply(Expire())
        assert decision.reply == Swept(settled=due is not None and self.now >= due)

    # --- the model -----------------------------------------------------------------------------

    def presented(self, lease: Lease) -> Lease:
        return (self.holder or Lease("t1", 1)) if lease is HOLDER else lease

    def named(self, turn_id: str) -> str:
        if turn_id == ACTIVE_TURN:
            return self.presented(HOLDER).turn_id
        if turn_id == PREVIOUS_TURN:
            return self.settled[-1].turn_id if self.settled else "t2"
        if turn_id == NEW_TURN:
            self.fresh += 1
            return f"n{self.fresh}"
        return turn_id

    def recent(self) -> list[Lease]:
        """The settled turns the session still remembers, newest first."""
        return self.settled[: -RECENT_TURNS - 1 : -1]

    def remembered(self, lease: Lease) -> Life | None:
        return self.lives[lease] if lease in self.recent() else None

    def remembers_turn(self, turn_id: str) -> bool:
        return any(lease.turn_id == turn_id for lease in self.recent())

    # --- what every decision must satisfy ------------------------------------------------------

    def sweep(self) -> Decision:
        """What the clock alone would decide now (I10): the baseline a refusal may not go beyond."""
        return decide(self.state, Expire(), self.now)

    def apply(self, command: Command) -> Decision:
        before = self.state
        decision = decide(before, command, self.now)
        if not decision.changed:
            assert decision.events == ()
            assert decision.state is before
        if isinstance(decision.reply, Refusal):  # a refusal changes nothing the clock would not have
            swept = self.sweep()
            assert (decision.state, decision.events) == (swept.state, swept.events)
        self.follow(decision)
        self.check_round_trip(decision)
        self.check_clock_window(before, command, decision)
        self.state = decision.state
        return decision

    def check_clock_window(self, before: Session, command: Command, decision: Decision) -> None:
        """I8, I10: at either end of its clock window the same command is answered the same way,
        save the times it stamps (a store may write a decision anywhere in it)."""
        window = clock_window(before, self.now)
        assert window.start is None or window.start <= self.now
        assert window.end is None or self.now < window.end
        for instant in (window.start, None if window.end is None else window.end - 1):
            if instant is not None:
                assert shape(decide(before, command, instant)) == shape(decision), instant

    def check_stop(
        self, holds: ActiveTurn, decision: Decision, swept: Decision, force: bool, grace: int
    ) -> None:
        """I5: a Stop of the active turn asks it to stop (once), or with force settles it now."""
        reply = decision.reply
        assert isinstance(reply, Cancelled)
        assert (reply.cancelled_turn_ids, reply.settled, reply.before_start) == (
            (holds.turn_id,),
            force,
            False,
        )
        if force:
            settled = decision.events[-1].body
            assert isinstance(settled, TurnSettled)
            assert (settled.turn.outcome, settled.turn.settled_by) == (
                TurnOutcome.CANCELLED,
                SettledBy.GATEWAY,
            )
            assert decision.state.active is None
        elif holds.stop is not None:  # a repeated Stop: the same answer, nothing new
            assert reply.stop_deadline == holds.stop.deadline
            assert decision.events == swept.events
        else:
            pending = tuple(
                i for i, it in holds.interactions.items() if it.status is InteractionStatus.PENDING
            )
            assert reply == Cancelled(
                (holds.turn_id,),
                stopping_turn_id=holds.turn_id,
                cancelled_interaction_ids=pending,
                stop_deadline=self.now + grace,
            )
            assert decision.state.phase is SessionPhase.STOPPING

    def follow(self, decision: Decision) -> None:
        """Replays the decision's events into the model, checking I1, I2, I6, I7 and I9 on the way."""
        open_at_start = self.open_calls()
        interrupted: set[str] = set()
        cancelled: set[str] = set()
        for event in decision.events:
            assert event.seq == self.head + 1  # I9: gapless, from 1
            assert event.time == self.now
            self.head = event.seq
            body = event.body
            match body:
                case TurnAdmitted():
                    assert self.holder is None  # I1
                    assert self.tombstones.get(body.turn_id, 0) <= self.latest  # I4
                    assert not self.remembers_turn(body.turn_id)
                    assert all(body.generation > issued for issued in self.generations)  # I2
                    self.generations.append(body.generation)
                    self.holder = Lease(body.turn_id, body.generation)
                    self.lives[self.holder] = Life()
                case StopRequested(before_start=True):
                    assert body.generation == 0
                    assert self.holder is None or self.holder.turn_id != body.turn_id
                case StopRequested() | ToolCallChanged() | InteractionChanged():
                    assert self.holder is not None
                    assert Lease(body.turn_id, body.generation) == self.holder  # nothing after settling
                    self.record(self.lives[self.holder], body, interrupted, cancelled)
                case TurnSettled():
                    self.settle(body, open_at_start, interrupted, cancelled)
        assert decision.state.next_seq == self.head + 1
        self.check_matches_state(decision.state)

    @staticmethod
    def record(
        life: Life,
        body: StopRequested | ToolCallChanged | InteractionChanged,
        interrupted: set[str],
        cancelled: set[str],
    ) -> None:
        if isinstance(body, ToolCallChanged):
            life.calls[body.call_id] = body.call.status
            if body.call.status is ToolCallStatus.INTERRUPTED:
                interrupted.add(body.call_id)
        elif isinstance(body, InteractionChanged):
            life.interactions[body.interaction_id] = body.interaction.status
            if body.interaction.status is InteractionStatus.CANCELLED:
                cancelled.add(body.interaction_id)

    def settle(
        self, body: TurnSettled, open_at_start: set[str], interrupted: set[str], cancelled: set[str]
    ) -> None:
        lease = Lease(body.turn.turn_id, body.turn.generation)
        assert lease == self.holder
        life = self.lives[lease]
        life.settlements += 1
        life.outcome = body.turn.outcome
        assert life.settlements == 1  # I6
        # I7: everything left open was closed by this very decision, with an event each.
        assert ToolCallStatus.OPEN not in life.calls.values()
        assert InteractionStatus.PENDING not in life.interactions.values()
        assert set(body.interrupted_tool_call_ids) == interrupted == open_at_start
        assert set(body.cancelled_interaction_ids) <= cancelled
        self.settled.append(lease)
        self.holder = None

    def open_calls(self) -> set[str]:
        if self.holder is None:
            return set()
        calls = self.lives[self.holder].calls
        return {call_id for call_id, status in calls.items() if status is ToolCallStatus.OPEN}

    def check_matches_state(self, state: Session) -> None:
        """The document says what its event log says (I9: they change together)."""
        assert state.generation == max(self.generations, default=0)
        assert lease_of(state.active) == self.holder
        if state.active is not None and self.holder is not None:
            life = self.lives[self.holder]
            assert {cid: call.status for cid, call in state.active.tool_calls.items()} == life.calls
            assert {iid: it.status for iid, it in state.active.interactions.items()} == life.interactions
        assert [Lease(t.turn_id, t.generation) for t in reversed(state.recent)] == self.recent()

    @staticmethod
    def check_round_trip(decision: Decision) -> None:
        raw = codec.dump_session(decision.state)
        assert codec.load_session(raw) == decision.state
        assert codec.dump_session(codec.load_session(raw)) == raw  # the order of every map is kept
        for event in decision.events:
            assert codec.load_event(codec.dump_event(event)) == event
            assert codec.load_event_body(codec.dump_event_body(event.body)) == event.body

    @invariant()
    def stop_is_a_phase(self) -> None:
        """I5: a turn is STOPPING exactly when a Stop was accepted, and then asks nobody anything."""
        active = self.state.active
        if active is None:
            return
        assert (active.phase is TurnPhase.STOPPING) == (active.stop is not None)
        if active.stop is not None:
            assert InteractionStatus.PENDING not in {it.status for it in active.interactions.values()}
        assert active.generation == self.state.generation

    def teardown(self) -> None:
        """I6: once the clock has passed every deadline, every admitted turn has settled exactly once."""
        deadline = self.state.deadline()
        if deadline is not None:
            self.now = self.latest = max(self.now, deadline)
            self.apply(Expire())
        assert self.state.active is None
        assert all(life.settlements == 1 for life in self.lives.values())


# The profile tests/conftest.py loaded (TURNGATE_HYPOTHESIS_PROFILE or --hypothesis-profile).
SessionMachine.TestCase.settings = settings.get_profile(settings.get_current_profile_name())
TestSessionMachine = SessionMachine.TestCase
