"""A Hypothesis state machine for the admission modes and the queue (§7): any mix of REJECT, ENQUEUE
and INTERRUPT admissions, runner reports, Stops with every queue action, ResumeQueue, ClearQueue
and the clock. Its model, built from the event log alone, checks Q1 (FIFO, an INTERRUPT's turn at
the head), Q2 (promotion only from the head, never while paused), that every queued turn ends
exactly once (admitted, cancelled, cleared or expired), I1 and I2, and that the document's queue is
the log's."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from turngate.service import codec
from turngate.service.core import (
    AdmissionMode,
    Admit,
    ClearQueue,
    Command,
    Complete,
    Decision,
    Expire,
    Heartbeat,
    QueueAction,
    QueueCleared,
    QueuePaused,
    QueueResumed,
    Refusal,
    ResumeQueue,
    Session,
    StopRequested,
    TurnAdmitted,
    TurnDequeued,
    TurnOutcome,
    TurnQueued,
    TurnSettled,
    clock_window,
    decide,
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
        self.follow(decision)
        window = clock_window(before, self.now)  # I10: the same answer anywhere in its clock window
        for instant in (window.start, None if window.end is None else window.end - 1):
            if instant is not None:
                assert shape(decide(before, command, instant)) == shape(decision), instant
        raw = codec.dump_session(decision.state)
        assert codec.load_session(raw) == decision.state
        self.state = decision.state
        return decision

    def follow(self, decision: Decision) -> None:
        resumed = False
        settled_now: set[str] = set()
        for event in decision.events:
            assert event.seq == self.head_seq + 1
            self.head_seq = event.seq
            body = event.body
            match body:
                case TurnQueued():
                    assert body.turn_id not in self.queue
                    assert body.turn_id not in self.ends
                    assert body.position in (1, len(self.queue) + 1)  # Q1: tail, or an INTERRUPT's head
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
                    self.holder = None
                    settled_now.add(body.turn.turn_id)
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
        assert len(self.state.queue) <= 4  # Q4

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


# The profile tests/conftest.py loaded (TURNGATE_HYPOTHESIS_PROFILE or --hypothesis-profile).
QueueMachine.TestCase.settings = settings.get_profile(settings.get_current_profile_name())
TestQueueMachine = QueueMachine.TestCase
