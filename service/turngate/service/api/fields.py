"""Reading a request's fields against the contract's input rules: every problem is collected as a
field violation, and a request with any is refused whole (INVALID_ARGUMENT) before the store is
touched. Descriptions never echo input."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import TypeVar

from google.protobuf.duration_pb2 import Duration

from turngate.service.core import SessionKey, limits
from turngate.v1 import turngate_pb2 as pb

_ID = re.compile(limits.ID_PATTERN)
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def is_identifier(value: str) -> bool:
    """Whether `value` follows the contract's id grammar (`limits.ID_PATTERN`)."""
    return _ID.fullmatch(value) is not None


class InvalidArgument(Exception):
    """A request broke the contract's input rules; `violations` are (field path, description)."""

    def __init__(self, violations: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{f}: {d}" for f, d in violations))
        self.violations = violations


def _spoken(us: int) -> str:
    """A bound in the largest whole unit: 1s, 10m, 24h."""
    for unit, size in (("h", 3600 * limits.SECOND), ("m", 60 * limits.SECOND)):
        if us % size == 0:
            return f"{us // size}{unit}"
    return f"{us / limits.SECOND:g}s"


_E = TypeVar("_E", bound=IntEnum)
_P = TypeVar("_P")


class Checker:
    """Collects violations while reading one request."""

    def __init__(self) -> None:
        self.violations: list[tuple[str, str]] = []

    def fail(self, field: str, description: str) -> None:
        self.violations.append((field, description))

    def done(self) -> None:
        if self.violations:
            raise InvalidArgument(self.violations)

    def identifier(self, field: str, value: str, *, required: bool = True) -> str:
        if not value:
            if required:
                self.fail(field, "is required")
        elif not is_identifier(value):
            self.fail(field, f"must match {limits.ID_PATTERN}")
        return value

    def text(self, field: str, value: str, limit: int, *, required: bool = False) -> str:
        size = len(value.encode())
        if required and size == 0:
            self.fail(field, "is required")
        elif size > limit:
            self.fail(field, f"must be at most {limit} bytes of UTF-8 (got {size})")
        if "\x00" in value:
            # PostgreSQL text cannot hold it: the write would fail as if the store were down.
            self.fail(field, "must not contain NUL (U+0000)")
        return value

    def session(self, field: str, present: bool, ref: pb.SessionRef) -> SessionKey:
        if not present:
            self.fail(field, "is required")
        return SessionKey(
            self.identifier(f"{field}.project_id", ref.project_id),
            self.identifier(f"{field}.session_id", ref.session_id),
        )

    def lease(self, present: bool, lease: pb.TurnLease) -> tuple[SessionKey, str, int]:
        if not present:
            self.fail("lease", "is required")
        key = self.session("lease.session", lease.HasField("session"), lease.session)
        turn_id = self.identifier("lease.turn_id", lease.turn_id)
        if lease.generation <= 0:
            self.fail("lease.generation", "must be the positive generation returned by AdmitTurn")
        return key, turn_id, lease.generation

    def lease_ttl(self, field: str, present: bool, value: Duration) -> int | None:
        return self.duration(field, present, value, limits.MIN_LEASE_TTL, limits.MAX_LEASE_TTL)

    def duration(self, field: str, present: bool, value: Duration, low: int, high: int) -> int | None:
        """A Duration in µs, within [low, high] µs; None when absent or invalid."""
        if not present:
            return None
        if not -999_999_999 <= value.nanos <= 999_999_999 or value.seconds * value.nanos < 0:
            self.fail(field, "is not a valid duration")
            return None
        us = value.seconds * limits.SECOND + value.nanos // 1000
        if not low <= us <= high:
            self.fail(field, f"must be between {_spoken(low)} and {_spoken(high)}")
        return us

    def page_size(self, value: int) -> int:
        if not 0 <= value <= limits.MAX_PAGE_SIZE:
            self.fail(
                "page_size",
                f"must be between 0 and {limits.MAX_PAGE_SIZE} (0 means {limits.DEFAULT_PAGE_SIZE})",
            )
        return value or limits.DEFAULT_PAGE_SIZE

    def page_token(self, token: str, rpc: str, position: Callable[[str], _P | None]) -> _P | None:
        if not token:
            return None
        read = position(token)
        if read is None:
            self.fail("page_token", f"is not a next_page_token returned by {rpc}")
        return read

    def choice(self, field: str, value: int, allowed: Mapping[int, _E]) -> _E | None:
        chosen = allowed.get(value)
        if chosen is None:
            names = ", ".join(e.name for e in allowed.values())
            self.fail(field, f"must be one of {names}")
        return chosen


def choices(*values: _E) -> dict[int, _E]:
    """The values a `Checker.choice` accepts, by their contract numbers."""
    return {int(v): v for v in values}


def traceparent(metadata: Mapping[str, str]) -> str:
    """The caller's W3C traceparent, kept with the turn; anything malformed is ignored."""
    value = metadata.get("traceparent", "")
    return value if _TRACEPARENT.fullmatch(value) else ""
