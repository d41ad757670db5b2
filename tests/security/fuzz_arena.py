"""Where the fuzz tests send their requests: a real server, raw calls that take wire bytes, the
pool of leases it issued, the sessions a request reached, and the checks every answer must pass.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import re
import urllib.parse
from collections import Counter, deque
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import grpc
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import DecodeError
from google.protobuf.message_factory import GetMessageClass
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from tests.security.fuzz_invariants import Metadata, Steady, check_session
from tests.security.fuzz_strategies import ID_LIMIT, KIB, Vocabulary
from tests.security.fuzz_wire import Body, Long, encode, prefix
from tests.support import bare_h2
from tests.support.servers import Client, client_for
from turngate.client.auth import metadata_interceptors
from turngate.service.core.limits import ID_PATTERN
from turngate.v1 import turngate_pb2 as pb

# What the service may answer (docs/design.md §3, issue 5): never UNKNOWN, INTERNAL or UNAVAILABLE,
# and no DEADLINE_EXCEEDED within the generous deadline the fuzz calls carry.
DOCUMENTED = frozenset(
    {
        grpc.StatusCode.OK,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
    }
)
CALL_TIMEOUT_S = 10.0
# A watch with nothing to send yet (e.g. its turn_id filter matches nothing) is left after this long.
QUIET_WATCH_S = 0.5
MAX_MESSAGE_BYTES = KIB  # the longest status message the service may answer
MAX_STATUS_BYTES = 4 * KIB  # the longest google.rpc.Status (details included)
_RECENT_LEASES = 32
_IDENTIFIER = re.compile(ID_PATTERN)


@dataclass(frozen=True)
class Answer:
    """How a call ended: its code and message, the google.rpc.Status the service attached (None
    when there is none), and on OK the (first) response message."""

    code: grpc.StatusCode
    message: str
    status: status_pb2.Status | None = None
    response: bytes | None = None


class Pool:
    """Leases the server issued (the newest last) and identifiers never sent before."""

    def __init__(self) -> None:
        self.leases: deque[pb.TurnLease] = deque(maxlen=_RECENT_LEASES)
        self._fresh = itertools.count(1)

    def fresh_id(self) -> str:
        return f"f{next(self._fresh)}"

    def live_lease(self, pick: int) -> pb.TurnLease | None:
        return self.leases[-1 - pick % len(self.leases)] if self.leases else None

    def issued(self, lease: pb.TurnLease) -> None:
        self.leases.append(lease)


def _same(raw: bytes) -> bytes:
    return raw


async def send_unary(channel: grpc.aio.Channel, path: str, body: bytes, metadata: Metadata) -> Answer:
    multi = channel.unary_unary(path, request_serializer=_same, response_deserializer=_same)
    try:
        response = await multi(body, metadata=metadata, timeout=CALL_TIMEOUT_S)
    except grpc.aio.AioRpcError as error:
        return Answer(error.code(), error.details() or "", rpc_status.from_call(error))
    return Answer(grpc.StatusCode.OK, "", None, response)


async def send_watch(
    channel: grpc.aio.Channel, path: str, body: bytes, metadata: Metadata, quiet_after: float
) -> Answer:
    """The first response of a server-streaming call (OK without one if none came within
    `quiet_after` seconds)."""
    call = channel.unary_stream(path, request_serializer=_same, response_deserializer=_same)(
        body, metadata=metadata, timeout=CALL_TIMEOUT_S
    )
    try:
        first = await _first(call, quiet_after)
    except grpc.aio.AioRpcError as error:
        return Answer(error.code(), error.details() or "", rpc_status.from_call(error))
    finally:
        call.cancel()
    return Answer(grpc.StatusCode.OK, "", None, first)


async def _first(call: grpc.aio.UnaryStreamCall[bytes, bytes], quiet_after: float) -> bytes | None:
    try:
        async with asyncio.timeout(quiet_after):
            async for response in call:
                return response
    except TimeoutError:
        return None
    return None


async def send_h2(port: int, path: str, body: bytes, metadata: list[tuple[bytes, bytes]]) -> Answer:
    async with asyncio.timeout(CALL_TIMEOUT_S):
        answer = await bare_h2.call(port, path, body, metadata)
    if answer.reset is not None or b"grpc-status" not in answer.headers:
        return Answer(grpc.StatusCode.UNKNOWN, f"no grpc-status; HTTP/2 error {answer.reset}")
    number = int(answer.headers[b"grpc-status"])
    code = next(c for c in grpc.StatusCode if c.value[0] == number)
    message = urllib.parse.unquote(answer.headers.get(b"grpc-message", b"").decode("utf-8", "replace"))
    details = answer.headers.get(b"grpc-status-details-bin")
    status = (
        None
        if details is None
        else status_pb2.Status.FromString(base64.b64decode(details + b"=" * (-len(details) % 4)))
    )
    return Answer(code, message, status)


def bad_request(status: status_pb2.Status) -> error_details_pb2.BadRequest | None:
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            found = error_details_pb2.BadRequest()
            detail.Unpack(found)
            return found
    return None


def check_answer(
    answer: Answer,
    method: MethodDescriptor,
    fuzzed: Iterable[bytes | Long],
    secrets: Iterable[bytes] = (),
) -> None:
    """The answer is documented; refusals are short, never echo a string longer than any valid
    identifier nor a secret, and an INVALID_ARGUMENT says which fields in a BadRequest."""
    where = f"{method.full_name} answered {answer.code.name} {answer.message[:200]!r}"
    assert answer.code in DOCUMENTED, where
    blobs = [answer.message.encode()]
    if answer.status is not None:
        blobs.append(answer.status.SerializeToString())
        assert len(blobs[0]) <= MAX_MESSAGE_BYTES, where
        assert len(blobs[1]) <= MAX_STATUS_BYTES, where
        assert answer.status.code == answer.code.value[0], where
    for value in fuzzed:
        if len(value) > ID_LIMIT:
            needle = prefix(value, ID_LIMIT + 1)
            assert not any(needle in blob for blob in blobs), f"{where}: echoes a fuzzed string"
    for secret in secrets:
        assert not any(secret in blob for blob in blobs), f"{where}: echoes a secret"
    if answer.code == grpc.StatusCode.INVALID_ARGUMENT:
        assert answer.status is not None, f"{where}: no google.rpc.Status"
        violations = bad_request(answer.status)
        assert violations is not None, f"{where}: no BadRequest"
        assert violations.field_violations, f"{where}: an empty BadRequest"
    if answer.code == grpc.StatusCode.OK and answer.response is not None:
        output = GetMessageClass(method.output_type)
        output.FromString(answer.response)


def session_of(method: MethodDescriptor, wire: bytes) -> pb.SessionRef | None:
    """The well-formed session a request names, if it decodes and names one."""
    try:
        request = GetMessageClass(method.input_type).FromString(wire)
    except DecodeError:
        return None
    fields = request.DESCRIPTOR.fields_by_name
    ref: pb.SessionRef | None = None
    if "lease" in fields:
        ref = getattr(request, "lease").session  # noqa: B009
    elif "session" in fields:
        ref = getattr(request, "session")  # noqa: B009
    if ref is None or not (_IDENTIFIER.fullmatch(ref.project_id) and _IDENTIFIER.fullmatch(ref.session_id)):
        return None
    return pb.SessionRef(project_id=ref.project_id, session_id=ref.session_id)


@dataclass(repr=False)
class Arena:
    """One fuzzed server: who the fuzz calls and the checks are, and what was done to it."""

    port: int
    channel: grpc.aio.Channel
    vocabulary: Vocabulary
    # Who checks (reads and watches every project), and each project's runner's metadata.
    reader: Client
    runners: dict[str, Metadata] = field(default_factory=dict)
    pool: Pool = field(default_factory=Pool)
    steady: dict[tuple[str, str], Steady] = field(default_factory=dict)
    touched: set[tuple[str, str]] = field(default_factory=set)
    examples: Counter[str] = field(default_factory=Counter)
    codes: Counter[tuple[str, str]] = field(default_factory=Counter)
    # (sessions, events) the last check_invariants went through.
    checked: tuple[int, int] = (0, 0)
    _top_ups: itertools.count[int] = field(default_factory=itertools.count)

    def __repr__(self) -> str:
        return f"Arena(port={self.port}, projects={self.vocabulary.projects})"

    @property
    def pool_sessions(self) -> list[pb.SessionRef]:
        v = self.vocabulary
        return [pb.SessionRef(project_id=p, session_id=s) for p in v.projects for s in v.sessions]

    async def send(
        self,
        path: str,
        method: MethodDescriptor,
        body: Body,
        metadata: Metadata = (),
        *,
        raw_metadata: list[tuple[bytes, bytes]] | None = None,
        quiet_after: float = QUIET_WATCH_S,
    ) -> tuple[bytes, Answer]:
        """Sends `body` to `path` (over bare HTTP/2 with `raw_metadata`); notes what it did. A
        watch that must be refused is given `quiet_after`=CALL_TIMEOUT_S, so a slow refusal is
        not taken for a quiet stream."""
        wire = encode(body, self.pool)
        if raw_metadata is not None:
            answer = await send_h2(self.port, path, wire, raw_metadata)
        elif method.server_streaming:
            answer = await send_watch(self.channel, path, wire, metadata, quiet_after)
        else:
            answer = await send_unary(self.channel, path, wire, metadata)
        self.examples[method.full_name] += 1
        self.codes[method.full_name, answer.code.name] += 1
        if answer.code == grpc.StatusCode.OK and method.name == "AdmitTurn" and answer.response:
            self.pool.issued(pb.AdmitTurnResponse.FromString(answer.response).lease)
        reached = answer.code not in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)
        session = session_of(method, wire) if reached else None
        if session is not None:
            self.touched.add((session.project_id, session.session_id))
        return wire, answer

    def start_watching(self) -> None:
        """A steady watcher on every pool session, before anything is fuzzed."""
        for ref in self.pool_sessions:
            self.steady[ref.project_id, ref.session_id] = Steady(self.reader, ref)
            self.touched.add((ref.project_id, ref.session_id))

    async def top_up(self) -> None:
        """Admits a fresh turn in the next pool session (refused while one is active) and opens a
        tool call and an interaction in it, so fuzzed records, resolves and stops meet real ones."""
        sessions = self.pool_sessions
        ref = sessions[next(self._top_ups) % len(sessions)]
        metadata = self.runners.get(ref.project_id, ())
        admission = pb.AdmitTurnRequest(session=ref, turn_id=self.pool.fresh_id(), runner_id="r1")
        answer = await send_unary(
            self.channel, "/turngate.v1.AdmissionService/AdmitTurn", admission.SerializeToString(), metadata
        )
        assert answer.code in DOCUMENTED, answer
        if answer.code != grpc.StatusCode.OK or answer.response is None:
            return
        lease = pb.AdmitTurnResponse.FromString(answer.response).lease
        self.pool.issued(lease)
        v = self.vocabulary
        for path, request in (
            (
                "/turngate.v1.AdmissionService/RecordToolCall",
                pb.RecordToolCallRequest(
                    lease=lease, call_id=v.calls[0], name="search", status=pb.TOOL_CALL_STATUS_OPEN
                ),
            ),
            (
                "/turngate.v1.AdmissionService/RecordInteraction",
                pb.RecordInteractionRequest(lease=lease, interaction_id=v.interactions[0], kind="approval"),
            ),
        ):
            answer = await send_unary(self.channel, path, request.SerializeToString(), metadata)
            assert answer.code in DOCUMENTED, answer

    async def check_invariants(self) -> tuple[int, int]:
        """Checks every session a request reached; returns (sessions, events) checked."""
        events = 0
        for project_id, session_id in sorted(self.touched):
            ref = pb.SessionRef(project_id=project_id, session_id=session_id)
            steady = self.steady.get((project_id, session_id))
            events += await check_session(self.reader, ref, steady)
        self.checked = (len(self.touched), events)
        return self.checked

    def close(self) -> None:
        for steady in self.steady.values():
            steady.close()


@asynccontextmanager
async def arena(
    port: int, vocabulary: Vocabulary, reader: Metadata = (), runners: dict[str, Metadata] | None = None
) -> AsyncIterator[Arena]:
    # The checks' own channel, carrying the reader's metadata on every call.
    interceptors = [i for key, value in reader for i in metadata_interceptors(key, value)]
    async with (
        grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
        grpc.aio.insecure_channel(f"127.0.0.1:{port}", interceptors=interceptors) as checks,
    ):
        fuzzed = Arena(port, channel, vocabulary, client_for(checks), runners or {})
        fuzzed.start_watching()
        try:
            yield fuzzed
        finally:
            fuzzed.close()
