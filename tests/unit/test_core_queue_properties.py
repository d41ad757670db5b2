"""A Hypothesis state machine for the admission modes and the queue (§7) and steers (§9): any mix
of REJECT, ENQUEUE and INTERRUPT admissions, runner reports, Stops with every queue action,
ResumeQueue, ClearQueue, MoveQueuedTurn, steers with either fallback and acknowledgements, and the
clock. Its model, built from the event log alone, checks Q1 (FIFO, an INTERRUPT's turn and requeued
steers at the head), Q2 (promotion only from the head, never while paused), that every queued turn
ends exactly once (admitted, cancelled, cleared or expired), S2 (every steer ends exactly once, and
a settlement ends the turn's pending ones), S1 (steers reach only a running turn), Q8 (the queue's
version counts the writes that changed it), I1 and I2, and that the document's queue is the log's."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from turngate.service import codec
from turngate.service.core import (
    AcknowledgeSteer,
    AdmissionMode,
    Admit,
    ClearQueue,
    Command,
    Complete,
    Decision,
    Expire,
    Heartbeat,
    MoveQueuedTurn,
    QueueAction,
    QueueCleared,
    QueuePaused,
    QueueReordered,
    QueueResumed,
    Refusal,
    ResumeQueue,
    Session,
    SteerEnded,
    SteerFallback,
    SteerStatus,
    SteerTurn,
    StopRequested,
    TurnAdmitted,
    TurnDequeued,
    TurnOutcome,
    TurnPhase,
    TurnQueued,
    TurnSettled,
    TurnSteered,
    clock_window,
    decide,
    limits,
)

from .helpers import SECOND, T0, cancel, shape

MODES = st.sampled_from(list(AdmissionMode))
ACTIONS = st.sampled_from(list(QueueAction))
OUTCOMES = st.sampled_from([TurnOutcome.COMPLETED, TurnOutcome.FAILED, TurnOutcome.CANCELLED])
STEPS = st.sampled_from([0, 1, SECOND, 5 * SECOND, 15 * SECOND, 40 * SECOND])
WAITS = st.sampled_from([3 * SECOND, 30 * SECOND, 600 * SECOND])
ACTIVE, HEAD, TAIL, NEW = "<active>", "<head>", "<tail>", "<new>"
TARGETS = st.sampled_from(["", ACTIVE, HEAD, TAIL, NEW, "q1", "q2"])


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = Session()
        self.now = T0
        self.head_seq = 0
        self.fresh = 0
        self.queue: list[str] = []  # per the events, head first
        self.holder: tuple[str, int] | None = None
        self.generations: list[int] = []
        self.ends: dict[str, int] = {}  # queued turn -> how many times it left the queue
        self.paused = False
        self.queued_ever: set[str] = set()
        self.pending: dict[str, str] = {}  # pending steer -> its turn, per the events
        self.steer_ends: dict[str, int] = {}  # steer -> how many times it ended
        self.steered_ever: set[str] = set()
        self.requeued_ever: set[str] = set()
        self.queue_writes = 0  # writes that changed the queue (Q8)

    # --- the rules -----------------------------------------------------------------------------

    @rule(step=STEPS)
    def clock(self, step: int) -> None:
        self.now += step

    @rule(
        fresh=st.booleans(), pool=st.sampled_from(["q1", "q2"]), mode=MODES, wait=WAITS, guard=st.booleans()
    )
    def admit(self, fresh: bool, pool: str, mode: AdmissionMode, wait: int, guard: bool) -> None:
        turn_id = self.named(NEW) if fresh else pool
        expected = self.named(ACTIVE) if guard and mode is AdmissionMode.INTERRUPT else ""
        command = Admit(
            turn_id,
            "r1",
            20 * SECOND,
            mode=mode,
            expected_active_turn_id=expected,
            max_queue_wait=wait,
            max_queue_depth=4,
            stop_grace=10 * SECOND,
        )
        self.apply(command)

    @rule(outcome=OUTCOMES)
    def complete(self, outcome: TurnOutcome) -> None:
        if self.holder is not None:
            self.apply(Complete(*self.holder, outcome))

    @rule()
    def heartbeat(self) -> None:
        if self.holder is not None:
            self.apply(Heartbeat(*self.holder))

    @rule(named=TARGETS, action=ACTIONS, force=st.booleans())
    def stop(self, named: str, action: QueueAction, force: bool) -> None:
        self.apply(replace(cancel(self.named(named), force=force), queue=action))

    @rule()
    def resume(self) -> None:
        self.apply(ResumeQueue())

    @rule()
    def clear(self) -> None:
        holder = self.holder
        decision = self.apply(ClearQueue("clear"))
        assert isinstance(decision.reply, QueueCleared)
        assert self.queue == [], "every queued turn left"
        # Q6: nothing but the clock (a deadline passed) ends the active turn; nothing is admitted.
        assert self.holder in (holder, None)
        assert not any(isinstance(event.body, TurnAdmitted) for event in decision.events)

    @rule()
    def expire(self) -> None:
        self.apply(Expire())

    @rule(named=TARGETS, enqueue=st.booleans(), requeue=st.booleans(), wait=WAITS)
    def steer(self, named: str, enqueue: bool, requeue: bool, wait: int) -> None:
        running = self.state.active is not None and self.state.active.phase is TurnPhase.RUNNING
        expected = self.named(named)
        decision = self.apply(
            SteerTurn(
                expected,
                self.named(NEW),
                "input",
                fallback=SteerFallback.ENQUEUE if enqueue else SteerFallback.REJECT,
                requeue=requeue,
                steer_wait=wait,
                max_steers=3,
                max_queue_depth=4,
                max_queue_wait=wait,
            )
        )
        steered = [e.body for e in decision.events if isinstance(e.body, TurnSteered)]
        assert not steered or (running and steered[0].turn_id == expected), "S1: only the running turn named"

    @rule(pick=st.integers(0, 3), consumed=st.booleans())
    def acknowledge(self, pick: int, consumed: bool) -> None:
        if self.holder is None:
            return
        steer_ids = [*self.pending, "unknown"]
        status = SteerStatus.CONSUMED if consumed else SteerStatus.DECLINED
        self.apply(AcknowledgeSteer(*self.holder, steer_ids[pick % len(steer_ids)], status))

    @rule(pick=st.integers(0, 7), after=st.integers(-1, 7), stale=st.booleans())
    def move(self, pick: int, after: int, stale: bool) -> None:
        if not self.queue:
            return
        after_turn_id = "" if after < 0 else self.queue[after % len(self.queue)]
        version = self.state.queue_version - stale
        self.apply(MoveQueuedTurn(self.queue[pick % len(self.queue)], after_turn_id, version))

    # --- the model -----------------------------------------------------------------------------

    def named(self, target: str) -> str:
        if target == ACTIVE:
            return self.holder[0] if self.holder else "nobody"
        if target == HEAD:
            return self.queue[0] if self.queue else "q1"
        if target == TAIL:
            return self.queue[-1] if self.queue else "q2"
        if target == NEW:
            self.fresh += 1
            return f"n{self.fresh}"
        return target

    def apply(self, command: Command) -> Decision:
        before = self.state
        decision = decide(before, command, self.now)
        if isinstance(decision.reply, Refusal):  # a refusal changes nothing the clock would not have
            swept = decide(before, Expire(), self.now)
            assert (decision.state, decision.events) == (swept.state, swept.events)
        self.follow(before, decision)
        window = clock_window(before, self.now)  # I10: the same answer anywhere in its clock window
        for instant in (window.start, None if window.end is None else window.end - 1):
            if instant is not None:
                assert shape(decide(before, command, instant)) == shape(decision), instant
        raw = codec.dump_session(decision.state)
        assert codec.load_session(raw) == decision.state
        self.state = decision.state
        return decision

    def follow(self, before: Session, decision: Decision) -> None:
        resumed = False
        settled_now: set[str] = set()
        requeued: list[str] = []
        for event in decision.events:
            assert event.seq == self.head_seq + 1
            self.head_seq = event.seq
            body = event.body
            match body:
                case TurnQueued():
                    assert body.turn_id not in self.queue
                    assert body.turn_id not in self.ends
                    if body.turn_id in requeued:  # S6: at the head, in the order the steers came
                        assert body.position == requeued.index(body.turn_id) + 1
                        assert body.steer is not None
                    else:  # Q1: tail, or an INTERRUPT's head
                        assert body.position in (1, len(self.queue) + 1)
                    self.queue.insert(body.position - 1, body.turn_id)
                    self.queued_ever.add(body.turn_id)
                case TurnAdmitted():
                    assert self.holder is None  # I1
                    assert all(body.generation > g for g in self.generations)  # I2
                    self.generations.append(body.generation)
                    if body.from_queue:  # Q1/Q2: only the head, only when not paused
                        assert self.queue
                        assert self.queue[0] == body.turn_id
                        assert not self.paused or resumed
                        self.queue.pop(0)
                        self.ended(body.turn_id)
                    else:
                        assert body.turn_id not in self.queue
                    self.holder = (body.turn_id, body.generation)
                case TurnDequeued():
                    assert body.turn_id in self.queue
                    assert body.outcome in (TurnOutcome.CANCELLED, TurnOutcome.EXPIRED)
                    assert all(body.generation > g for g in self.generations)  # its own place in history
                    self.generations.append(body.generation)
                    self.queue.remove(body.turn_id)
                    self.ended(body.turn_id)
                case TurnSettled():
                    assert self.holder == (body.turn.turn_id, body.turn.generation)
                    # S2: the settlement ended every steer of the turn still pending, in this write
                    assert not [s for s, t in self.pending.items() if t == body.turn.turn_id]
                    self.holder = None
                    settled_now.add(body.turn.turn_id)
                case TurnSteered():
                    assert self.holder == (body.turn_id, body.generation)
                    assert body.steer_id not in self.steered_ever
                    self.steered_ever.add(body.steer_id)
                    self.pending[body.steer_id] = body.turn_id
                case SteerEnded():
                    assert self.pending.pop(body.steer_id) == body.turn_id
                    self.steer_ends[body.steer_id] = self.steer_ends.get(body.steer_id, 0) + 1
                    assert self.steer_ends[body.steer_id] == 1  # S2: one end per steer
                    if body.requeued:
                        requeued.append(body.steer_id)
                        self.requeued_ever.add(body.steer_id)
                case QueueReordered():
                    assert sorted(body.turn_ids) == sorted(self.queue)
                    self.queue = list(body.turn_ids)
                case QueuePaused():  # Q3: only the end of a turn, in its own write, pauses
                    assert self.queue
                    assert body.turn_id in settled_now
                    self.paused = True
                case QueueResumed():
                    resumed = True
                    self.paused = False
                case StopRequested():
                    pass
                case _:
                    pass
        if not self.queue:
            self.paused = False
        state = decision.state
        self.queue_writes += state.queue != before.queue
        assert state.queue_version == self.queue_writes  # Q8
        assert [q.turn_id for q in state.queue] == self.queue
        assert state.queue_paused == self.paused
        active = None if state.active is None else (state.active.turn_id, state.active.generation)
        assert active == self.holder

    def ended(self, turn_id: str) -> None:
        self.ends[turn_id] = self.ends.get(turn_id, 0) + 1
        assert self.ends[turn_id] == 1  # every queued turn ends exactly once

    @invariant()
    def idle_means_nothing_waits_unpaused(self) -> None:
        """Q2: an idle session's queue is empty or paused."""
        if self.state.active is None:
            assert not self.state.queue or self.state.queue_paused

    @invariant()
    def queue_is_bounded(self) -> None:
        """Q4; requeued steers may go past the configured bound (S6), never past the document's."""
        assert len([q for q in self.state.queue if q.turn_id not in self.requeued_ever]) <= 4
        assert len(self.state.queue) <= limits.MAX_QUEUE_DEPTH

    @invariant()
    def pending_steers_are_the_active_turns(self) -> None:
        active = self.state.active
        assert set(self.pending) == (set() if active is None else set(active.pending_steers()))

    def teardown(self) -> None:
        """Once the clock has passed every deadline, the session is idle and nothing waits."""
        for _ in range(64):
            deadline = self.state.deadline()
            if deadline is None:
                break
            self.now = max(self.now, deadline)
            self.apply(Expire())
        assert self.state.active is None
        assert self.state.queue == ()
        assert set(self.ends) == self.queued_ever  # every queued turn ended, once (see ended())
        assert not self.queue
        assert set(self.steer_ends) == self.steered_ever  # S2: every steer ended, once


# The profile tests/conftest.py loaded (TURNGATE_HYPOTHESIS_PROFILE or --hypothesis-profile).
QueueMachine.TestCase.settings = settings.get_profile(settings.get_current_profile_name())
TestQueueMachine = QueueMachine.TestCase
