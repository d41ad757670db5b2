"""Protobuf time types to and from Python's: seconds as float, instants as aware datetimes."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp


def seconds(value: Duration) -> float:
    return value.ToNanoseconds() / 1e9


def duration(value: float) -> Duration:
    result = Duration()
    result.FromNanoseconds(round(value * 1e9))
    return result


def instant(message: Message, field: str) -> datetime | None:
    """`message.field` (a Timestamp) as an aware UTC datetime; None when unset."""
    if not message.HasField(field):
        return None
    value: Timestamp = getattr(message, field)
    return value.ToDatetime(tzinfo=UTC)
