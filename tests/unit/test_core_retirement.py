"""Retirement (docs/design.md §8): R1 an idle session leaves the hot store, R2 a Stop on a session
the store does not hold answers from its history; and I2 across a removal."""

from __future__ import annotations

from turngate.service.codec import dump_session, load_session
from turngate.service.core import (
    Admitted,
    Cancelled,
    Idle,
    ResumeQueue,
    Retire,
    Retired,
    Session,
    TurnOutcome,
    decide,
    needs_history,
    recalled,
)

from .helpers import (
    LEASE_TTL,
    SECOND,
    TOMBSTONE_TTL,
    Timeline,
    admit,
    assert_unchanged,
    cancel,
    complete,
    enqueue,
    running,
    tool_call,
)

RETENTION = 60 * SECOND


def idle_timeline() -> Timeline:
    """A session whose one turn ran and completed: nothing in it is live."""
    timeline, lease = running()
    timeline.do(complete(lease), after=SECOND)
    return timeline


def test_r1_a_session_idle_for_its_retention_is_removed_with_no_event() -> None:
    timeline = idle_timeline()
    idle_since = timeline.state.idle_since()
    assert idle_since == timeline.now, "idle since the write that settled its turn"

    decision = timeline.do(Retire(RETENTION), after=RETENTION)

    assert decision.reply == Retired(True)
    assert decision.changed
    assert decision.removed
    assert decision.events == ()
    assert decision.state == Session(), "what a read finds once it is gone"


def test_r1_not_before_its_retention() -> None:
    timeline = idle_timeline()
    before = timeline.state

    decision = timeline.do(Retire(RETENTION), after=RETENTION - 1)

    assert decision.reply == Retired(False)
    assert_unchanged(decision, before)


def test_r1_never_while_a_turn_holds_it_even_past_its_lease_the_clock_settles_it_first() -> None:
    timeline, _ = running()
    assert timeline.state.idle_since() is None

    decision = timeline.do(Retire(RETENTION), after=LEASE_TTL + RETENTION)

    assert decision.reply == Retired(False)
    assert not decision.removed
    assert [e.body.kind for e in decision.events] == ["turn_settled"], "settled LOST, live until now"
    assert timeline.state.idle_since() == timeline.now


def test_r1_never_while_a_turn_waits_in_its_queue() -> None:
    timeline, lease = running()
    timeline.do(enqueue("t2", wait=10 * RETENTION))
    timeline.do(cancel("t1"))  # the end of a stopped turn pauses the queue: t2 waits on
    timeline.do(complete(lease, TurnOutcome.CANCELLED))
    assert timeline.state.queue
    assert timeline.state.idle_since() is None

    assert timeline.do(Retire(RETENTION), after=2 * RETENTION).reply == Retired(False)


def test_r1_a_tombstone_keeps_the_session_until_it_is_forgotten() -> None:
    timeline = idle_timeline()
    timeline.do(cancel("never-started"), after=SECOND)
    forgotten_at = timeline.now + TOMBSTONE_TTL
    assert timeline.state.idle_since() == forgotten_at

    assert timeline.do(Retire(RETENTION), after=RETENTION).reply == Retired(False)
    timeline.now = forgotten_at + RETENTION
    assert timeline.do(Retire(RETENTION)).reply == Retired(True)


def test_r1_a_remembered_request_keeps_the_session_until_it_is_forgotten() -> None:
    timeline = idle_timeline()
    timeline.do(ResumeQueue(request_id="r1", tombstone_ttl=TOMBSTONE_TTL), after=SECOND)
    assert timeline.state.idle_since() == timeline.now + TOMBSTONE_TTL

    assert timeline.do(Retire(RETENTION), after=RETENTION).reply == Retired(False)


def test_r1_every_write_restarts_the_idle_clock() -> None:
    timeline = idle_timeline()
    timeline.now += RETENTION - SECOND
    timeline.do(cancel("t9"))  # tombstones t9: a write
    timeline.now += TOMBSTONE_TTL + RETENTION - SECOND

    assert timeline.do(Retire(RETENTION)).reply == Retired(False)


def test_r1_a_document_never_written_is_not_removed() -> None:
    never_written = Session()
    decision = decide(never_written, Retire(RETENTION), 10 * RETENTION)

    assert decision.reply == Retired(False)
    assert_unchanged(decision, never_written)


def test_i2_a_session_that_comes_back_gets_a_greater_generation_at_a_new_epoch_from_seq_1() -> None:
    timeline, lease = running()
    for n in range(2, 40):  # generations run ahead of the clock: many turns in one µs
        timeline.do(complete(lease))
        lease = timeline.admit(f"t{n}")
    timeline.do(complete(lease))
    old_epoch = timeline.state.epoch
    timeline.do(Retire(RETENTION), after=RETENTION)
    assert timeline.state == Session()

    reply = timeline.do(admit("t99"), after=1).reply

    assert isinstance(reply, Admitted)
    assert reply.generation > lease.generation
    assert timeline.state.epoch > old_epoch
    assert [e.seq for e in timeline.log[-1:]] == [1]


def test_r2_a_stop_naming_a_turn_on_a_session_not_held_needs_its_history() -> None:
    assert needs_history(Session(), cancel("t1"))
    assert not needs_history(Session(), cancel("")), "a Stop of whatever runs needs nothing"
    assert not needs_history(Session(), admit("t1")), "an admission starts afresh"
    assert not needs_history(idle_timeline().state, cancel("t1")), "a held session remembers"


def test_r2_a_stop_recalling_history_answers_idle_with_the_last_turn_and_writes_nothing() -> None:
    held = idle_timeline()
    settled = held.state.recent
    state = recalled(Session(), settled)

    decision = decide(state, cancel("t1"), held.now + RETENTION)

    assert decision.reply == Idle("t1", TurnOutcome.COMPLETED, "t1", TurnOutcome.COMPLETED)
    assert_unchanged(decision, state)


def test_r2_a_stop_naming_a_turn_history_never_saw_tombstones_it() -> None:
    held = idle_timeline()
    state = recalled(Session(), held.state.recent)

    decision = decide(state, cancel("t2"), held.now + RETENTION)

    assert isinstance(decision.reply, Cancelled)
    assert decision.reply.before_start
    assert decision.state.generation >= held.state.generation


def test_r1_touched_at_survives_the_codec() -> None:
    timeline, lease = running()
    timeline.do(tool_call(lease), after=SECOND)

    assert load_session(dump_session(timeline.state)).touched_at == timeline.now
