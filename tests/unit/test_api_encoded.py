"""api/encoded.py: a WatchSession response is converted and serialized once per event, however
many streams send it, and the bytes are those of the contract's message.

Conversions are counted by a spy on `convert.event`, the one conversion of an event.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from turngate.service.api import convert
from turngate.service.api.encoded import EncodedEvents, snapshot_response
from turngate.service.core import Event, Session, SessionKey, StopRequested
from turngate.service.watch import Snapshot
from turngate.v1 import turngate_pb2 as pb

from .helpers import SECOND, T0

KEY = SessionKey("p1", "s1")
OTHER = SessionKey("p1", "s2")
EPOCH = T0
STREAMS = 100
CONVERT = convert.event  # the real one, for expected bytes (the tests count calls of a spy)


def stop_event(seq: int, reason: str = "user", epoch: int = EPOCH) -> Event:
    body = StopRequested(turn_id="t1", generation=7, reason=reason, requested_at=T0, deadline=T0 + SECOND)
    return Event(seq=seq, time=T0 + seq, body=body, epoch=epoch)


def contract_bytes(key: SessionKey, event: Event) -> bytes:
    """What grpc sent before: the response message, serialized by its registered serializer."""
    return pb.WatchSessionResponse(event=CONVERT(key, event)).SerializeToString()


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[SessionKey, int, int]]:
    """Each conversion of an event, as (session, epoch, seq)."""
    seen: list[tuple[SessionKey, int, int]] = []

    def counted(key: SessionKey, event: Event) -> pb.SessionEvent:
        seen.append((key, event.epoch, event.seq))
        return CONVERT(key, event)

    monkeypatch.setattr(convert, "event", counted)
    return seen


def test_an_event_sent_by_a_hundred_streams_is_converted_once_and_sent_as_the_same_bytes(
    conversions: list[tuple[SessionKey, int, int]],
) -> None:
    encoded = EncodedEvents()
    events = [stop_event(seq) for seq in range(1, 6)]
    sent = [[encoded.response(KEY, event) for event in events] for _ in range(STREAMS)]

    assert conversions == [(KEY, EPOCH, seq) for seq in range(1, 6)]
    first = sent[0]
    assert all(all(a is b for a, b in zip(stream, first, strict=True)) for stream in sent)
    assert first == [contract_bytes(KEY, event) for event in events]


def test_an_equal_event_read_again_from_the_log_is_not_converted_again(
    conversions: list[tuple[SessionKey, int, int]],
) -> None:
    encoded = EncodedEvents()
    live = encoded.response(KEY, stop_event(3))
    replayed = encoded.response(KEY, stop_event(3))  # another object, as a replay reads it
    assert replayed is live
    assert conversions == [(KEY, EPOCH, 3)]


def test_events_of_other_sessions_epochs_or_seqs_are_encoded_apart(
    conversions: list[tuple[SessionKey, int, int]],
) -> None:
    encoded = EncodedEvents()
    cases = [
        (KEY, stop_event(1)),
        (OTHER, stop_event(1)),
        (KEY, stop_event(1, epoch=EPOCH + 1)),
        (KEY, stop_event(2)),
    ]
    sent = [encoded.response(key, event) for key, event in cases]
    assert sent == [contract_bytes(key, event) for key, event in cases]
    assert len(set(sent)) == len(cases)
    assert conversions == [(key, event.epoch, event.seq) for key, event in cases]


def test_another_event_at_a_kept_position_is_converted_never_taken_for_the_kept_one(
    conversions: list[tuple[SessionKey, int, int]],
) -> None:
    encoded = EncodedEvents()
    kept, other = stop_event(1), stop_event(1, reason="something else")
    assert encoded.response(KEY, kept) == contract_bytes(KEY, kept)
    assert encoded.response(KEY, other) == contract_bytes(KEY, other)
    assert encoded.response(KEY, replace(other)) == contract_bytes(KEY, other)
    assert conversions == [(KEY, EPOCH, 1), (KEY, EPOCH, 1)]


def test_the_oldest_kept_event_goes_first_and_a_late_stream_still_sends_its_bytes(
    conversions: list[tuple[SessionKey, int, int]],
) -> None:
    encoded = EncodedEvents(capacity=2)
    for seq in (1, 2, 3):
        encoded.response(KEY, stop_event(seq))
    assert encoded.response(KEY, stop_event(3)) == contract_bytes(KEY, stop_event(3))  # kept
    assert encoded.response(KEY, stop_event(1)) == contract_bytes(KEY, stop_event(1))  # encoded again
    assert [seq for _, _, seq in conversions] == [1, 2, 3, 1]


def test_a_snapshot_is_each_streams_own_response(conversions: list[tuple[SessionKey, int, int]]) -> None:
    state = Session(epoch=EPOCH)
    sent = snapshot_response(KEY, Snapshot(state, T0, resync=True))
    expected = pb.WatchSessionResponse(event=convert.snapshot_event(KEY, state, T0, resync=True))
    assert sent == expected.SerializeToString()
    assert conversions == []
