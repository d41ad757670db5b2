"""The runner's records (tool calls, interactions), their fencing (I2), idempotency and limits, and
the gateway's answers to interactions (I12)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from turngate.service.core import (
    Command,
    Directive,
    ErrorReason,
    HeartbeatReply,
    Interaction,
    InteractionChanged,
    InteractionReply,
    InteractionStatus,
    ToolCall,
    ToolCallChanged,
    ToolCallReply,
    ToolCallStatus,
    TurnOutcome,
)
from turngate.service.core.limits import (
    MAX_INTERACTIONS,
    MAX_OPEN_TOOL_CALLS,
    MAX_PENDING_INTERACTIONS,
    MAX_TOOL_CALLS,
)

from .helpers import (
    SECOND,
    Lease,
    Timeline,
    assert_refused,
    assert_unchanged,
    bodies,
    cancel,
    complete,
    heartbeat,
    interaction,
    resolve,
    running,
    stale,
    tool_call,
)

# Every runner write that a lease other than the active turn's own is refused TURN_NOT_ACTIVE.
RECORDS: dict[str, Callable[[Lease], Command]] = {
    "open-call": lambda lease: tool_call(lease, "c9"),
    "close-call": lambda lease: tool_call(lease, "c1", ToolCallStatus.SUCCEEDED),
    "interaction": lambda lease: interaction(lease, "i9"),
}
RUNNER_WRITES: dict[str, Callable[[Lease], Command]] = {**RECORDS, "complete": complete}


def fill(timeline: Timeline, *, calls: int = 0, interactions: int = 0, closed: bool = False) -> None:
    """Gives the active turn that many more tool calls and interactions at once: open and pending,
    or with `closed` already succeeded and resolved."""
    turn, now = timeline.active, timeline.now
    call = ToolCall("tool", ToolCallStatus.SUCCEEDED if closed else ToolCallStatus.OPEN, now)
    ask = Interaction("ask", InteractionStatus.RESOLVED if closed else InteractionStatus.PENDING, now)
    more_calls = {f"x{n}": call for n in range(calls)}
    more_asks = {f"y{n}": ask for n in range(interactions)}
    timeline.state = replace(
        timeline.state,
        active=replace(
            turn,
            tool_calls={**turn.tool_calls, **more_calls},
            interactions={**turn.interactions, **more_asks},
        ),
    )


# --- fencing (I2) --------------------------------------------------------------------------


def test_i2_stale_generation_heartbeat_abandons_and_changes_nothing() -> None:
    timeline, lease = running("t1")
    before = timeline.state

    decision = timeline.do(heartbeat(stale(lease)), after=SECOND)

    assert decision.reply == HeartbeatReply(Directive.ABANDON)
    assert_unchanged(decision, before)


@pytest.mark.parametrize("write", RUNNER_WRITES.values(), ids=RUNNER_WRITES.keys())
def test_refusal_turn_not_active_for_a_stale_generation_i2(write: Callable[[Lease], Command]) -> None:
    timeline, lease = running("t1", open_calls=["c1"])
    before = timeline.state

    assert_refused(timeline.do(write(stale(lease)), after=SECOND), before, ErrorReason.TURN_NOT_ACTIVE)


@pytest.mark.parametrize("write", RUNNER_WRITES.values(), ids=RUNNER_WRITES.keys())
def test_refusal_turn_not_active_for_a_turn_that_is_not_active(write: Callable[[Lease], Command]) -> None:
    idle = Timeline()
    assert_refused(idle.do(write(Lease("t0", 1))), idle.state, ErrorReason.TURN_NOT_ACTIVE)
    timeline, lease = running("t1", open_calls=["c1"])
    before = timeline.state

    foreign = write(lease._replace(turn_id="t0"))
    assert_refused(timeline.do(foreign, after=SECOND), before, ErrorReason.TURN_NOT_ACTIVE)


@pytest.mark.parametrize("record", RECORDS.values(), ids=RECORDS.keys())
def test_refusal_turn_not_active_for_records_after_settlement(record: Callable[[Lease], Command]) -> None:
    timeline, lease = running("t1", open_calls=["c1"])
    timeline.do(complete(lease), after=SECOND)
    before = timeline.state

    assert_refused(timeline.do(record(lease), after=1), before, ErrorReason.TURN_NOT_ACTIVE)


# --- tool calls ----------------------------------------------------------------------------


def test_tool_call_open_then_close_records_both_with_events() -> None:
    timeline, lease = running("t1")
    opened_at = timeline.now + 1

    opened = timeline.do(tool_call(lease, "c1"), after=1)
    closed = timeline.do(tool_call(lease, "c1", ToolCallStatus.SUCCEEDED, error="ignored"), after=1)

    open_call = ToolCall("shell", ToolCallStatus.OPEN, opened_at)
    done_call = ToolCall("shell", ToolCallStatus.SUCCEEDED, opened_at, opened_at + 1)
    assert opened.reply == ToolCallReply("c1", open_call, "", recorded=True)
    assert closed.reply == ToolCallReply("c1", done_call, "", recorded=True)  # error only with FAILED
    assert bodies(opened) + bodies(closed) == [
        ToolCallChanged("t1", lease.generation, "c1", open_call),
        ToolCallChanged("t1", lease.generation, "c1", done_call),
    ]
    assert timeline.active.tool_calls == {"c1": done_call}


def test_tool_call_failed_carries_its_error_in_reply_and_event_only() -> None:
    timeline, lease = running("t1", open_calls=["c1"])

    decision = timeline.do(tool_call(lease, "c1", ToolCallStatus.FAILED, error="exit 2"), after=1)

    assert isinstance(decision.reply, ToolCallReply)
    assert decision.reply.error == "exit 2"
    assert [b.error for b in bodies(decision) if isinstance(b, ToolCallChanged)] == ["exit 2"]
    assert timeline.active.tool_calls["c1"].status is ToolCallStatus.FAILED


def test_tool_call_open_twice_is_a_no_op() -> None:
    timeline, lease = running("t1", open_calls=["c1"])
    before = timeline.state

    decision = timeline.do(tool_call(lease, "c1", name="renamed"), after=1)

    assert decision.reply == ToolCallReply("c1", timeline.active.tool_calls["c1"], "", recorded=False)
    assert_unchanged(decision, before)


@pytest.mark.parametrize("again", [ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED, ToolCallStatus.OPEN])
def test_tool_call_close_twice_first_close_wins(again: ToolCallStatus) -> None:
    timeline, lease = running("t1", open_calls=["c1"])
    timeline.do(tool_call(lease, "c1", ToolCallStatus.SUCCEEDED), after=1)
    before = timeline.state
    first = timeline.active.tool_calls["c1"]

    decision = timeline.do(tool_call(lease, "c1", again, error="late"), after=1)

    assert decision.reply == ToolCallReply("c1", first, "", recorded=False)
    assert_unchanged(decision, before)


def test_tool_call_close_without_open_records_a_finished_call() -> None:
    timeline, lease = running("t1")

    decision = timeline.do(tool_call(lease, "c1", ToolCallStatus.FAILED, name="fetch", error="404"), after=1)

    call = ToolCall("fetch", ToolCallStatus.FAILED, timeline.now, timeline.now)
    assert decision.reply == ToolCallReply("c1", call, "404", recorded=True)
    assert bodies(decision) == [ToolCallChanged("t1", lease.generation, "c1", call, "404")]


def test_tool_calls_may_still_be_recorded_while_stopping() -> None:
    timeline, lease = running("t1", open_calls=["c1"])
    timeline.do(cancel("t1"), after=1)

    closed = timeline.do(tool_call(lease, "c1", ToolCallStatus.SUCCEEDED), after=1)

    assert isinstance(closed.reply, ToolCallReply)
    assert closed.reply.recorded is True


def test_refusal_limit_exceeded_open_tool_calls_at_1024() -> None:
    timeline, lease = running("t1")
    fill(timeline, calls=MAX_OPEN_TOOL_CALLS)
    before = timeline.state

    refusal = assert_refused(
        timeline.do(tool_call(lease, "one-more"), after=1), before, ErrorReason.LIMIT_EXCEEDED
    )

    assert MAX_OPEN_TOOL_CALLS == 1024
    assert refusal.limit == "open_tool_calls"
    finished = timeline.do(tool_call(lease, "done-at-once", ToolCallStatus.SUCCEEDED), after=1)
    assert isinstance(finished.reply, ToolCallReply)  # a call that does not stay open still fits
    timeline.do(tool_call(lease, "x0", ToolCallStatus.SUCCEEDED), after=1)
    reopened = timeline.do(tool_call(lease, "one-more"), after=1)
    assert isinstance(reopened.reply, ToolCallReply)
    assert reopened.reply.recorded is True


def test_refusal_limit_exceeded_tool_calls_per_turn_counts_finished_calls_too() -> None:
    timeline, lease = running("t1")
    fill(timeline, calls=MAX_TOOL_CALLS, closed=True)
    before = timeline.state

    refusal = assert_refused(
        timeline.do(tool_call(lease, "one-more", ToolCallStatus.SUCCEEDED), after=1),
        before,
        ErrorReason.LIMIT_EXCEEDED,
    )

    assert refusal.limit == "tool_calls_per_turn"
    assert isinstance(timeline.do(tool_call(lease, "x0", ToolCallStatus.FAILED)).reply, ToolCallReply)


# --- interactions (I12) --------------------------------------------------------------------


def test_interaction_opens_pending_and_repeating_it_is_a_no_op() -> None:
    timeline, lease = running("t1")

    opened = timeline.do(interaction(lease, "i1", "approval"), after=1)
    before = timeline.state
    again = timeline.do(interaction(lease, "i1", "question"), after=1)

    pending = Interaction("approval", InteractionStatus.PENDING, timeline.now - 1)
    assert opened.reply == InteractionReply("t1", "i1", pending, "", recorded=True)
    assert bodies(opened) == [InteractionChanged("t1", lease.generation, "i1", pending)]
    assert again.reply == InteractionReply("t1", "i1", pending, "", recorded=False)
    assert_unchanged(again, before)


def test_resolve_answers_a_pending_interaction_with_its_resolution() -> None:
    timeline, lease = running("t1", pending=["i1"])
    opened_at = timeline.active.interactions["i1"].opened_at

    decision = timeline.do(resolve("i1", "yes, go ahead"), after=1)

    resolved = Interaction("approval", InteractionStatus.RESOLVED, opened_at, timeline.now)
    assert decision.reply == InteractionReply("t1", "i1", resolved, "yes, go ahead", recorded=True)
    assert bodies(decision) == [InteractionChanged("t1", lease.generation, "i1", resolved, "yes, go ahead")]


def test_i12_first_resolution_wins() -> None:
    timeline, _ = running("t1", pending=["i1"])
    timeline.do(resolve("i1", "yes"), after=1)
    before = timeline.state

    refusal = assert_refused(
        timeline.do(resolve("i1", "no"), after=1), before, ErrorReason.INTERACTION_NOT_PENDING
    )

    assert "resolved" in refusal.message


def test_i12_resolve_after_cancel_refused_interaction_not_pending() -> None:
    timeline, _ = running("t1", pending=["i1"])
    timeline.do(cancel("t1"), after=1)
    before = timeline.state

    refusal = assert_refused(timeline.do(resolve("i1"), after=1), before, ErrorReason.INTERACTION_NOT_PENDING)

    assert "cancelled" in refusal.message


def test_i12_resolve_after_settlement_refused_interaction_not_pending() -> None:
    timeline, lease = running("t1", pending=["i1"])
    timeline.do(complete(lease, TurnOutcome.FAILED), after=1)
    before = timeline.state

    assert_refused(timeline.do(resolve("i1"), after=1), before, ErrorReason.INTERACTION_NOT_PENDING)


def test_refusal_interaction_not_pending_for_an_unknown_interaction() -> None:
    timeline, _ = running("t1", pending=["i1"])
    before = timeline.state

    assert_refused(timeline.do(resolve("nope"), after=1), before, ErrorReason.INTERACTION_NOT_PENDING)


def test_refusal_limit_exceeded_pending_interactions_at_256() -> None:
    timeline, lease = running("t1")
    fill(timeline, interactions=MAX_PENDING_INTERACTIONS)
    before = timeline.state

    refusal = assert_refused(
        timeline.do(interaction(lease, "one-more"), after=1), before, ErrorReason.LIMIT_EXCEEDED
    )

    assert MAX_PENDING_INTERACTIONS == 256
    assert refusal.limit == "pending_interactions"
    timeline.do(resolve("y0"), after=1)
    reopened = timeline.do(interaction(lease, "one-more"), after=1)
    assert isinstance(reopened.reply, InteractionReply)
    assert reopened.reply.recorded is True


def test_refusal_limit_exceeded_interactions_per_turn_counts_answered_ones_too() -> None:
    timeline, lease = running("t1")
    fill(timeline, interactions=MAX_INTERACTIONS, closed=True)
    before = timeline.state

    refusal = assert_refused(
        timeline.do(interaction(lease, "one-more"), after=1), before, ErrorReason.LIMIT_EXCEEDED
    )

    assert refusal.limit == "interactions_per_turn"
