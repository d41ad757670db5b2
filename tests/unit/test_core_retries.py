"""A retry answers what the first call did (docs/design.md §3.2, "A write whose outcome is
unknown"): each mutating command sent again, as a caller does after WRITE_OUTCOME_UNKNOWN, gets the
first call's answer back and changes nothing more. AdmitTurn, Heartbeat, the records and
CompleteTurn are idempotent by their ids; CancelTurn, ResolveInteraction and ResumeQueue by their
request_id."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from turngate.service.codec import dump_session, load_session
from turngate.service.core import (
    Cancelled,
    Command,
    Directive,
    ErrorReason,
    HeartbeatReply,
    InteractionReply,
    InteractionStatus,
    Resumed,
    ResumeQueue,
    ToolCallStatus,
    TurnOutcome,
    limits,
)

from .helpers import (
    SECOND,
    TOMBSTONE_TTL,
    Lease,
    Timeline,
    admit,
    assert_refused,
    assert_unchanged,
    cancel,
    complete,
    enqueue,
    heartbeat,
    interaction,
    resolve,
    running,
    tool_call,
)


@dataclass(frozen=True)
class Retried:
    """A command sent twice: `prepare` brings a session to where it applies, and `again` is what
    the retry answers, from the first call's answer."""

    prepare: Callable[[], tuple[Timeline, Lease]]
    command: Callable[[Lease], Command]
    again: Callable[[Any], object] = lambda first: first


def _fresh() -> tuple[Timeline, Lease]:
    return Timeline(), Lease("", 0)


def _called() -> tuple[Timeline, Lease]:
    timeline, lease = running("t1")
    timeline.do(tool_call(lease, "c1"), after=SECOND)
    return timeline, lease


def _replayed(first: Any) -> object:
    return replace(first, replayed=True)


def _not_recorded_again(first: Any) -> object:
    return replace(first, recorded=False)


RETRIED = {
    "admit": Retried(_fresh, lambda _: admit("t1"), _replayed),
    "record_tool_call": Retried(
        _called, lambda lease: tool_call(lease, "c1", ToolCallStatus.SUCCEEDED), _not_recorded_again
    ),
    "record_interaction": Retried(running, lambda lease: interaction(lease, "i1"), _not_recorded_again),
    "complete": Retried(
        running, lambda lease: complete(lease, TurnOutcome.FAILED, "boom"), _not_recorded_again
    ),
    "cancel": Retried(running, lambda _: cancel("t1", request_id="q1")),
}


@pytest.mark.parametrize("case", RETRIED.values(), ids=RETRIED.keys())
def test_a_retry_answers_what_the_first_call_did_and_changes_nothing(case: Retried) -> None:
    """`replayed`, `recorded = false`: an earlier call did it."""
    timeline, lease = case.prepare()
    first = timeline.do(case.command(lease), after=SECOND).reply
    before = timeline.state

    retry = timeline.do(case.command(lease), after=SECOND)

    assert retry.reply == case.again(first)
    assert_unchanged(retry, before)


def test_heartbeat_retried_answers_the_same_directive_with_the_lease_extended_again() -> None:
    timeline, lease = running("t1")
    first = timeline.do(heartbeat(lease), after=SECOND).reply

    retry = timeline.do(heartbeat(lease), after=SECOND).reply

    assert isinstance(first, HeartbeatReply)
    assert isinstance(retry, HeartbeatReply)
    assert first.directive is retry.directive is Directive.CONTINUE
    assert retry.lease_expires_at == timeline.active.lease_expires_at > (first.lease_expires_at or 0)
    assert timeline.log[-1].body.kind == "turn_admitted", "a heartbeat writes no event"


def test_resolve_retried_with_its_request_id_answers_the_first_resolution_and_changes_nothing() -> None:
    timeline, _ = running("t1", pending=["i1"])
    first = timeline.do(resolve("i1", "approved", request_id="q1"), after=SECOND).reply
    before = timeline.state

    retry = timeline.do(resolve("i1", "approved", request_id="q1"), after=SECOND)

    assert isinstance(first, InteractionReply)
    assert first.interaction.status is InteractionStatus.RESOLVED
    assert retry.reply == first
    assert_unchanged(retry, before)


def test_resolve_retried_with_its_request_id_after_the_turn_settled_still_answers_the_first() -> None:
    timeline, lease = running("t1", pending=["i1"])
    first = timeline.do(resolve("i1", "approved", request_id="q1"), after=SECOND).reply
    timeline.do(complete(lease), after=SECOND)
    timeline.admit("t2")
    before = timeline.state

    retry = timeline.do(resolve("i1", "approved", request_id="q1"), after=SECOND)

    assert retry.reply == first
    assert_unchanged(retry, before)


def test_i12_resolve_retried_without_a_request_id_is_refused_as_before() -> None:
    timeline, _ = running("t1", pending=["i1"])
    timeline.do(resolve("i1", "approved"), after=SECOND)
    before = timeline.state

    assert_refused(
        timeline.do(resolve("i1", "approved"), after=SECOND), before, ErrorReason.INTERACTION_NOT_PENDING
    )


def test_i12_a_second_resolution_under_another_request_id_is_refused() -> None:
    timeline, _ = running("t1", pending=["i1"])
    timeline.do(resolve("i1", "approved", request_id="q1"), after=SECOND)
    before = timeline.state

    refused = timeline.do(resolve("i1", "denied", request_id="q2"), after=SECOND)

    assert_refused(refused, before, ErrorReason.INTERACTION_NOT_PENDING)


def test_a_refused_resolution_is_not_remembered() -> None:
    timeline, _ = running("t1")
    before = timeline.state

    assert_refused(
        timeline.do(resolve("i9", request_id="q1"), after=SECOND), before, ErrorReason.INTERACTION_NOT_PENDING
    )


def test_a_remembered_resolution_keeps_no_text_in_the_document() -> None:
    timeline, _ = running("t1", pending=["i1"])
    text = "x" * limits.MAX_RESOLUTION
    timeline.do(resolve("i1", text, request_id="q1"), after=SECOND)

    assert text not in dump_session(timeline.state).decode()
    assert load_session(dump_session(timeline.state)) == timeline.state


def test_resume_retried_with_its_request_id_answers_the_turn_the_first_admitted() -> None:
    timeline, lease = running("t1")
    for turn_id in ("t2", "t3"):
        timeline.do(enqueue(turn_id), after=SECOND)
    timeline.do(complete(lease, TurnOutcome.FAILED), after=SECOND)
    first = timeline.do(ResumeQueue("q1", TOMBSTONE_TTL), after=SECOND).reply
    timeline.do(enqueue("t4"), after=SECOND)
    before = timeline.state

    retry = timeline.do(ResumeQueue("q1", TOMBSTONE_TTL), after=SECOND)

    assert first == Resumed("t2", tuple(q for q in before.queue if q.turn_id == "t3"))
    assert retry.reply == Resumed("t2", before.queue), "the turn it admitted, the queue as it is now"
    assert_unchanged(retry, before)


def test_resume_retried_with_its_request_id_resumes_nothing_the_first_did_not() -> None:
    timeline, lease = running("t1")
    timeline.do(enqueue("t2"), after=SECOND)
    first = timeline.do(ResumeQueue("q1", TOMBSTONE_TTL), after=SECOND).reply
    timeline.do(complete(lease, TurnOutcome.FAILED), after=SECOND)  # pauses the queue
    before = timeline.state

    retry = timeline.do(ResumeQueue("q1", TOMBSTONE_TTL), after=SECOND)

    assert first == Resumed("", before.queue)
    assert retry.reply == first
    assert_unchanged(retry, before)
    assert timeline.state.queue_paused


def test_request_ids_of_different_calls_never_share_an_answer() -> None:
    timeline, _ = running("t1", pending=["i1"])
    resolved = timeline.do(resolve("i1", request_id="same"), after=SECOND).reply

    stopped = timeline.do(cancel("t1", request_id="same"), after=SECOND).reply

    assert isinstance(resolved, InteractionReply)
    assert isinstance(stopped, Cancelled)
    assert stopped.stopping_turn_id == "t1"
