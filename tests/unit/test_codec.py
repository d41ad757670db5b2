"""codec.py: the session document and its events survive JSON exactly (every store relies on it).

The property tests round-trip every state and event they reach; these pin down the awkward shapes.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from turngate.service import codec
from turngate.service.core import (
    LEGACY_EPOCH,
    Cancelled,
    Event,
    Idle,
    InteractionChanged,
    Mismatch,
    Session,
    SettledBy,
    StopRequested,
    ToolCallChanged,
    ToolCallStatus,
    TurnAdmitted,
    TurnOutcome,
    TurnPhase,
    TurnSettled,
)

from .helpers import SECOND, Timeline, active_of, cancel, complete, interaction, resolve, running, tool_call


def busy_session() -> Timeline:
    """A session with something in every field: history, tombstones, remembered Stops of all three
    answers, and a stopping turn with calls and interactions in every status."""
    timeline, _ = running("t1", open_calls=["c1"])
    timeline.do(cancel("", force=True, request_id="q-force"), after=SECOND)
    timeline.do(cancel("t1", request_id="q-idle"), after=1)
    timeline.do(cancel("t0", reason="never mind"), after=1)
    second = timeline.admit("t2", "r2")
    timeline.do(complete(second, TurnOutcome.FAILED, "boom"), after=1)
    lease = timeline.admit("t3")
    timeline.do(cancel("t1", request_id="q-mismatch"), after=1)
    for call_id, status in [("z-open", ToolCallStatus.OPEN), ("a-done", ToolCallStatus.SUCCEEDED)]:
        timeline.do(tool_call(lease, call_id, status), after=1)
    timeline.do(tool_call(lease, "m-failed", ToolCallStatus.FAILED, error="exit 1"), after=1)
    for interaction_id in ["i2", "i1", "i0"]:
        timeline.do(interaction(lease, interaction_id), after=1)
    timeline.do(resolve("i1", "yes"), after=1)
    timeline.do(cancel("t3", reason="enough"), after=1)
    timeline.do(interaction(lease, "late"), after=1)
    return timeline


def test_fresh_session_round_trips() -> None:
    assert codec.load_session(codec.dump_session(Session())) == Session()


def test_busy_session_round_trips_with_every_field() -> None:
    state = busy_session().state
    replies = {key: type(memo.reply) for key, memo in state.requests.items()}
    assert replies == {"q-force": Cancelled, "q-idle": Idle, "q-mismatch": Mismatch}
    assert state.tombstones
    assert len(state.recent) == 2
    assert active_of(state).stop is not None

    loaded = codec.load_session(codec.dump_session(state))

    assert loaded == state
    assert {key: type(memo.reply) for key, memo in loaded.requests.items()} == replies


def test_loaded_session_has_enum_members_and_keeps_map_order() -> None:
    state = busy_session().state

    loaded = codec.load_session(codec.dump_session(state).decode())

    active = active_of(loaded)
    assert active.phase is TurnPhase.STOPPING
    assert list(active.tool_calls) == ["z-open", "a-done", "m-failed"]
    assert list(active.interactions) == ["i2", "i1", "i0", "late"]
    assert list(loaded.requests) == list(state.requests)
    assert [turn.settled_by for turn in loaded.recent] == [SettledBy.GATEWAY, SettledBy.RUNNER]
    assert all(type(turn.outcome) is TurnOutcome for turn in loaded.recent)


def test_enums_are_stored_as_their_contract_numbers() -> None:
    raw = json.loads(codec.dump_session(busy_session().state))

    assert raw["active"]["phase"] == TurnPhase.STOPPING.value == 2
    assert raw["active"]["tool_calls"]["a-done"]["status"] == 2
    assert [turn["outcome"] for turn in raw["recent"]] == [3, 2]


def test_every_event_kind_round_trips_as_its_own_type() -> None:
    log = busy_session().log
    assert {type(event.body) for event in log} == {
        TurnAdmitted,
        StopRequested,
        ToolCallChanged,
        InteractionChanged,
        TurnSettled,
    }

    for event in log:
        assert codec.load_event(codec.dump_event(event)) == event
        body = codec.load_event_body(codec.dump_event_body(event.body))
        assert body == event.body
        assert type(body) is type(event.body)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'{"seq": 1, "time": 5, "body": {"kind": "nope"}}', id="unknown-kind"),
        pytest.param(b'{"seq": 1, "time": 5}', id="no-body"),
    ],
)
def test_an_event_that_is_not_one_fails_to_load(raw: bytes) -> None:
    with pytest.raises(ValueError, match="validation error"):
        codec.load_event(raw)


def test_event_turn_id_names_the_turn_of_every_kind() -> None:
    log: list[Event] = busy_session().log

    assert {event.turn_id for event in log} == {"t0", "t1", "t2", "t3"}


def test_a_document_written_before_epochs_loads_in_the_legacy_epoch() -> None:
    """Documents of 0.1.0 (in Redis and SQLite) have no `epoch`; they are not new documents."""
    state = busy_session().state
    raw = json.loads(codec.dump_session(state))
    del raw["epoch"]

    loaded = codec.load_session(json.dumps(raw))

    assert loaded == replace(state, epoch=LEGACY_EPOCH)
    assert codec.load_session(codec.dump_session(loaded)).epoch == LEGACY_EPOCH


def test_an_event_written_before_epochs_loads_in_the_legacy_epoch() -> None:
    event = busy_session().log[0]
    raw = json.loads(codec.dump_event(event))
    del raw["epoch"]

    assert codec.load_event(json.dumps(raw)) == replace(event, epoch=LEGACY_EPOCH)
