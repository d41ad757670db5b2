"""The session's epoch (core/model.py, decide.py): a document's first write starts one at the store
clock, every later write and event keeps it, and a document written anew after the store lost it
starts another; one written before epochs existed stays in the legacy epoch."""

from __future__ import annotations

from dataclasses import replace

from turngate.service.core import LEGACY_EPOCH, NO_EPOCH, Session, decide

from .helpers import SECOND, T0, Timeline, admit, cancel, complete, tool_call


def test_a_documents_first_write_starts_its_epoch_at_the_store_clock() -> None:
    decision = decide(Session(), admit("t1"), T0)

    assert decision.state.epoch == T0
    assert [event.epoch for event in decision.events] == [T0]


def test_every_later_write_and_event_keeps_the_epoch() -> None:
    timeline = Timeline()
    lease = timeline.admit("t1")
    timeline.do(tool_call(lease, "c1"), after=SECOND)
    timeline.do(complete(lease), after=SECOND)
    timeline.admit("t2", after=SECOND)

    assert timeline.state.epoch == T0
    assert {event.epoch for event in timeline.log} == {T0}
    assert [event.seq for event in timeline.log] == [1, 2, 3, 4, 5]


def test_a_first_write_without_events_starts_the_epoch_too() -> None:
    """A Stop with a request id on an idle, never written session is remembered, with no event."""
    decision = decide(Session(), cancel("", request_id="q1"), T0)

    assert decision.changed
    assert decision.events == ()
    assert decision.state.epoch == T0


def test_a_decision_that_changes_nothing_gives_no_epoch() -> None:
    decision = decide(Session(), cancel(""), T0)

    assert not decision.changed
    assert decision.state.epoch == NO_EPOCH


def test_a_document_lost_and_written_again_starts_a_new_epoch_at_seq_1() -> None:
    before = Timeline()
    before.admit("t1")
    lost_at = before.now + 5 * SECOND

    again = decide(Session(), admit("t1"), lost_at)

    assert again.state.epoch == lost_at > before.state.epoch
    assert [(event.epoch, event.seq) for event in again.events] == [(lost_at, 1)]


def test_a_legacy_document_stays_in_the_legacy_epoch() -> None:
    timeline = Timeline(state=replace(Session(), epoch=LEGACY_EPOCH, next_seq=8, generation=T0 - SECOND))

    timeline.admit("t1")

    assert timeline.state.epoch == LEGACY_EPOCH
    assert [(event.epoch, event.seq) for event in timeline.log] == [(LEGACY_EPOCH, 8)]
