"""A turn's steers as GetTurn shows them: the live document's active turn (`turn_view`) takes a
pending steer's content from the document and an ended one's from its ledger row, which alone keeps
it (S2, S4); `TurnRecord.steers` carries them in the order they came, GetTurn only."""

from __future__ import annotations

from dataclasses import replace

from google.protobuf.timestamp_pb2 import Timestamp

from turngate.service.api import convert
from turngate.service.core import ActiveTurn, Steer, SteerInput, SteerStatus, TurnPhase
from turngate.service.ports.history import SteerView, turn_view
from turngate.v1 import turngate_pb2 as pb

from .helpers import SECOND, T0

SENT = T0 + SECOND
ENDED = T0 + 2 * SECOND
WAIT = 600 * SECOND


def steered_turn() -> ActiveTurn:
    """A running turn steered twice: "a" consumed (its content gone from the document), "b" pending."""
    return ActiveTurn(
        "t1",
        "r1",
        1,
        TurnPhase.RUNNING,
        T0,
        30 * SECOND,
        T0 + 30 * SECOND,
        steers={
            "a": Steer(SteerStatus.CONSUMED, SENT, SENT + WAIT, 2, ended_at=ENDED),
            "b": Steer(
                SteerStatus.PENDING, ENDED, ENDED + WAIT, 4, SteerInput("b", '{"go": 1}', "application/json")
            ),
        },
    )


def test_s2_the_active_turns_steers_take_an_ended_steers_content_from_its_ledger_row() -> None:
    turn = steered_turn()
    recorded = replace(
        turn_view(turn),
        steers=(SteerView("a", SteerStatus.CONSUMED, SENT, ENDED, "go left", "text/plain", False),),
    )

    assert turn_view(turn, recorded).steers == (
        SteerView("a", SteerStatus.CONSUMED, SENT, ENDED, "go left", "text/plain", False),
        SteerView("b", SteerStatus.PENDING, ENDED, None, '{"go": 1}', "application/json", False),
    )
    assert [(s.steer_id, s.content, s.content_type) for s in turn_view(turn).steers] == [
        ("a", "", ""),
        ("b", '{"go": 1}', "application/json"),
    ], "without its ledger row, an ended steer's content is not known"


def test_s2_a_turn_record_lists_its_steers_in_the_order_they_came_unless_asked_without() -> None:
    view = turn_view(steered_turn())
    view = replace(
        view, steers=(replace(view.steers[0], content="go left", content_type="text/plain"), view.steers[1])
    )

    with_steers = convert.turn_record(view)

    assert list(with_steers.steers) == [
        pb.SteerRecord(
            steer_id="a",
            status=pb.STEER_STATUS_CONSUMED,
            sent_at=ts(SENT),
            ended_at=ts(ENDED),
            content="go left",
            content_type="text/plain",
        ),
        pb.SteerRecord(
            steer_id="b",
            status=pb.STEER_STATUS_PENDING,
            sent_at=ts(ENDED),
            content='{"go": 1}',
            content_type="application/json",
        ),
    ]
    assert list(convert.turn_record(view, with_calls=False).steers) == []


def ts(us: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMicroseconds(us)
    return stamp
