"""Contract messages to core commands, validated at the edge (DESIGN.md §3, input limits).

Every problem with a request is collected as a field violation; a request with any violation
is refused whole (INVALID_ARGUMENT) before the store is touched. Descriptions never echo input.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from google.protobuf.duration_pb2 import Duration

from turngate.service import core
from turngate.service.core import limits
from turngate.service.store.base import SessionKey
from turngate.v1 import turngate_pb2 as pb

ID_PATTERN = "[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
_ID = re.compile(ID_PATTERN)
MAX_TEXT = 1024
MAX_RESOLUTION = 16 * 1024
MAX_TOOL_NAME = 256
MAX_KIND = 128
MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 50
_US = 1_000_000
MIN_LEASE_TTL = 1 * _US
MAX_LEASE_TTL = 24 * 3600 * _US
_MAX_GENERATION = 2**63 - 1  # generations and times are int64 in every store
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


class InvalidArgument(Exception):
    """A request broke the contract's input rules; `violations` are (field path, description)."""

    def __init__(self, violations: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{f}: {d}" for f, d in violations))
        self.violations = violations


@dataclass(frozen=True, slots=True)
class Policy:
    """Settings the core needs with commands (durations in µs)."""

    lease_ttl: int
    stop_grace: int
    memory_ttl: int
    max_open_tool_calls: int = limits.MAX_OPEN_TOOL_CALLS
    max_pending_interactions: int = limits.MAX_PENDING_INTERACTIONS
    max_active_sessions_per_project: int = 0


_E = TypeVar("_E", bound=IntEnum)
_P = TypeVar("_P")


class _Checker:
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
        elif not _ID.fullmatch(value):
            self.fail(field, f"must match {ID_PATTERN}")
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
        if not present:
            return None
        if not -999_999_999 <= value.nanos <= 999_999_999 or value.seconds * value.nanos < 0:
            self.fail(field, "is not a valid duration")
            return None
        us = value.seconds * _US + value.nanos // 1000
        if not MIN_LEASE_TTL <= us <= MAX_LEASE_TTL:
            self.fail(field, "must be between 1s and 24h")
        return us

    def page_size(self, value: int) -> int:
        if not 0 <= value <= MAX_PAGE_SIZE:
            self.fail("page_size", f"must be between 0 and {MAX_PAGE_SIZE} (0 means {DEFAULT_PAGE_SIZE})")
        return value or DEFAULT_PAGE_SIZE

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


def _choices(*values: _E) -> dict[int, _E]:
    return {int(v): v for v in values}


_RECORDABLE = _choices(core.ToolCallStatus.OPEN, core.ToolCallStatus.SUCCEEDED, core.ToolCallStatus.FAILED)
_REPORTABLE = _choices(core.TurnOutcome.COMPLETED, core.TurnOutcome.FAILED, core.TurnOutcome.CANCELLED)


def traceparent(metadata: Mapping[str, str]) -> str:
    """The caller's W3C traceparent, kept with the turn; anything malformed is ignored."""
    value = metadata.get("traceparent", "")
    return value if _TRACEPARENT.fullmatch(value) else ""


def admit(
    request: pb.AdmitTurnRequest, policy: Policy, trace: str, principal: str
) -> tuple[SessionKey, core.Admit]:
    check = _Checker()
    key = check.session("session", request.HasField("session"), request.session)
    turn_id = check.identifier("turn_id", request.turn_id)
    runner_id = check.identifier("runner_id", request.runner_id)
    ttl = check.lease_ttl("lease_ttl", request.HasField("lease_ttl"), request.lease_ttl)
    check.done()
    return key, core.Admit(
        turn_id,
        runner_id,
        ttl or policy.lease_ttl,
        trace,
        principal,
        max_active_in_project=policy.max_active_sessions_per_project,
    )


def heartbeat(request: pb.HeartbeatRequest, principal: str) -> tuple[SessionKey, core.Heartbeat]:
    check = _Checker()
    key, turn_id, generation = check.lease(request.HasField("lease"), request.lease)
    ttl = check.lease_ttl("lease_ttl", request.HasField("lease_ttl"), request.lease_ttl)
    check.done()
    return key, core.Heartbeat(turn_id, generation, ttl, principal)


def record_tool_call(
    request: pb.RecordToolCallRequest, policy: Policy, principal: str
) -> tuple[SessionKey, core.RecordToolCall]:
    check = _Checker()
    key, turn_id, generation = check.lease(request.HasField("lease"), request.lease)
    call_id = check.identifier("call_id", request.call_id)
    name = check.text("name", request.name, MAX_TOOL_NAME, required=True)
    status = check.choice("status", request.status, _RECORDABLE)
    error = check.text("error", request.error, MAX_TEXT)
    if error and status is not core.ToolCallStatus.FAILED:
        check.fail("error", "is only allowed with status FAILED")
    check.done()
    assert status is not None
    return key, core.RecordToolCall(
        turn_id, generation, call_id, name, status, error, principal, policy.max_open_tool_calls
    )


def record_interaction(
    request: pb.RecordInteractionRequest, policy: Policy, principal: str
) -> tuple[SessionKey, core.RecordInteraction]:
    check = _Checker()
    key, turn_id, generation = check.lease(request.HasField("lease"), request.lease)
    interaction_id = check.identifier("interaction_id", request.interaction_id)
    kind = check.text("kind", request.kind, MAX_KIND, required=True)
    check.done()
    return key, core.RecordInteraction(
        turn_id, generation, interaction_id, kind, principal, policy.max_pending_interactions
    )


def complete(request: pb.CompleteTurnRequest, principal: str) -> tuple[SessionKey, core.Complete]:
    check = _Checker()
    key, turn_id, generation = check.lease(request.HasField("lease"), request.lease)
    outcome = check.choice("outcome", request.outcome, _REPORTABLE)
    error = check.text("error", request.error, MAX_TEXT)
    if error and outcome is core.TurnOutcome.COMPLETED:
        check.fail("error", "is only allowed with outcome FAILED or CANCELLED")
    check.done()
    assert outcome is not None
    return key, core.Complete(turn_id, generation, outcome, error, principal)


def cancel(request: pb.CancelTurnRequest, policy: Policy) -> tuple[SessionKey, core.Cancel]:
    check = _Checker()
    key = check.session("session", request.HasField("session"), request.session)
    expected = check.identifier("expected_turn_id", request.expected_turn_id, required=False)
    reason = check.text("reason", request.reason, MAX_TEXT)
    request_id = check.identifier("request_id", request.request_id, required=False)
    check.done()
    return key, core.Cancel(expected, reason, request.force, request_id, policy.stop_grace, policy.memory_ttl)


def resolve_interaction(request: pb.ResolveInteractionRequest) -> tuple[SessionKey, core.ResolveInteraction]:
    check = _Checker()
    key = check.session("session", request.HasField("session"), request.session)
    interaction_id = check.identifier("interaction_id", request.interaction_id)
    resolution = check.text("resolution", request.resolution, MAX_RESOLUTION)
    check.done()
    return key, core.ResolveInteraction(interaction_id, resolution)


@dataclass(frozen=True, slots=True)
class WatchQuery:
    key: SessionKey
    after_seq: int
    turn_id: str


def watch(request: pb.WatchSessionRequest) -> WatchQuery:
    check = _Checker()
    key = check.session("session", request.HasField("session"), request.session)
    if request.after_seq < 0:
        check.fail("after_seq", "must be 0 (start with a snapshot) or the last seq seen")
    turn_id = check.identifier("turn_id", request.turn_id, required=False)
    check.done()
    return WatchQuery(key, request.after_seq, turn_id)


def get_session(request: pb.GetSessionRequest) -> SessionKey:
    check = _Checker()
    key = check.session("session", request.HasField("session"), request.session)
    check.done()
    return key


def get_turn(request: pb.GetTurnRequest) -> tuple[SessionKey, str]:
    check = _Checker()
    key = check.session("session", request.HasField("session"), request.session)
    turn_id = check.identifier("turn_id", request.turn_id)
    check.done()
    return key, turn_id


@dataclass(frozen=True, slots=True)
class TurnsPage:
    key: SessionKey
    size: int
    before_generation: int | None


def list_turns(request: pb.ListTurnsRequest) -> TurnsPage:
    check = _Checker()
    key = check.session("session", request.HasField("session"), request.session)
    size = check.page_size(request.page_size)
    before = check.page_token(request.page_token, "ListTurns", turns_page_position)
    check.done()
    return TurnsPage(key, size, before)


@dataclass(frozen=True, slots=True)
class ActiveSessionsPage:
    project_id: str
    size: int
    after: tuple[int, str] | None


def list_active_sessions(request: pb.ListActiveSessionsRequest) -> ActiveSessionsPage:
    check = _Checker()
    project_id = check.identifier("project_id", request.project_id)
    size = check.page_size(request.page_size)
    after = check.page_token(request.page_token, "ListActiveSessions", active_page_position)
    check.done()
    return ActiveSessionsPage(project_id, size, after)


# Page tokens are opaque to callers: base64url of a short text this module writes and reads back.


def turns_page_token(before_generation: int) -> str:
    return _encode(f"g{before_generation}")


def turns_page_position(token: str) -> int | None:
    raw = _decode(token)
    return _int64(raw[1:]) if raw is not None and raw.startswith("g") else None


def active_page_token(deadline: int, session_id: str) -> str:
    return _encode(f"d{deadline}/{session_id}")


def active_page_position(token: str) -> tuple[int, str] | None:
    raw = _decode(token)
    if raw is None or not raw.startswith("d") or "/" not in raw:
        return None
    deadline, session_id = raw[1:].split("/", 1)
    position = _int64(deadline)
    return None if position is None or not _ID.fullmatch(session_id) else (position, session_id)


def _encode(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


def _decode(token: str) -> str | None:
    if len(token) > 400:
        return None
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def _int64(digits: str) -> int | None:
    # ASCII only: str.isdigit() also accepts digits int() cannot parse (e.g. superscripts).
    if not (digits.isascii() and digits.isdigit()):
        return None
    value = int(digits)
    return value if value <= _MAX_GENERATION else None
