"""Hypothesis fuzzing of the request of every turngate.v1 RPC, on real servers on real ports.

Requests are generated from the message descriptors (tests/security/fuzz_strategies.py) and sent
as wire bytes, so they may hold anything: valid-looking calls on a small pool of sessions with
leases the server really issued, and hostile ones (ill-formed and huge strings, beyond the 64 KiB
message limit too, bytes that are not UTF-8, negative and out-of-range numbers and durations,
unknown enum values, unknown fields, broken framing). Every answer is OK or a documented status,
never UNKNOWN or INTERNAL; refusals are short and echo no unbounded input; an INVALID_ARGUMENT
names its fields in a google.rpc.BadRequest. A second server with authentication on also gets
garbage authorization headers (huge, non-ASCII, not UTF-8, "Bearer " alone, two of them…).
Afterwards both servers still serve, and every session a request reached passes the core
invariants through the SessionService API (tests/security/fuzz_invariants.py).

Examples per RPC follow TURNGATE_HYPOTHESIS_PROFILE (turngate-thorough: a long run), and the open
server's store TURNGATE_FUZZ_BACKEND (sqlite by default; postgresql or redis on a fresh database
or keyspace); the volume is printed by the last test.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest
from google.protobuf.descriptor import MethodDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.security.fuzz_arena import CALL_TIMEOUT_S, QUIET_WATCH_S, Arena, arena, check_answer
from tests.security.fuzz_invariants import Metadata
from tests.security.fuzz_settings import FUZZ, PROFILE, SECRET_LENGTH, THOROUGH
from tests.security.fuzz_stores import backend
from tests.security.fuzz_strategies import KIB, MAX_MESSAGE, METHODS, Requests, Vocabulary, trace_metadata
from tests.security.fuzz_wire import strings
from tests.support.bare_h2 import MAX_BODY
from tests.support.principals import ADMIN, EVERYONE, PROJECT_A, PROJECT_B, RUNNER_A, RUNNER_B, Named, bearer
from tests.support.servers import running, settings_for
from turngate.service.server import TurngateServer
from turngate.v1 import turngate_pb2 as pb
from turngate.v1 import turngate_pb2_grpc as pb_grpc

BACKEND = os.environ.get("TURNGATE_FUZZ_BACKEND", "sqlite")
EXAMPLES_PER_RPC = 400 if THOROUGH else 25
AUTH_EXAMPLES = 2_000 if THOROUGH else 120
pytestmark = pytest.mark.timeout(3_600 if THOROUGH else 120)

OPEN = Vocabulary(projects=("p-fuzz", "p-fuzz-b"))
GUARDED = Vocabulary(projects=(PROJECT_A, PROJECT_B), sessions=("fz-s1", "fz-s2"))
METADATA_SOFT_LIMIT = 8 * KIB  # grpc's default: larger metadata may be refused RESOURCE_EXHAUSTED
TOKENS = tuple(named.token.encode() for named in EVERYONE)


def _metadata(named: Named) -> Metadata:
    return (("authorization", bearer(named)),)


@pytest.fixture(scope="module")
async def open_arena(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Arena]:
    """A server with authentication off and default settings, on a fresh store of the backend
    TURNGATE_FUZZ_BACKEND names (sqlite, postgresql or redis; default sqlite)."""
    async with backend(BACKEND) as overrides:
        config = settings_for(str(tmp_path_factory.mktemp("fuzz")), **overrides)
        async for server, client in running(config):
            del client  # the arena calls with raw bytes on a channel of its own
            async with arena(server.port, OPEN) as fuzzed:
                yield fuzzed


@pytest.fixture(scope="module")
async def guarded_arena(guarded: TurngateServer) -> AsyncIterator[Arena]:
    """The server of tests/support/guarded.py (bearer tokens required); each project's runner
    admits the pool's turns, the admin checks."""
    runners = {PROJECT_A: _metadata(RUNNER_A), PROJECT_B: _metadata(RUNNER_B)}
    async with arena(guarded.port, GUARDED, _metadata(ADMIN), runners) as fuzzed:
        yield fuzzed


def _rpc_id(path: str) -> str:
    return path.rsplit(".", 1)[-1]


@pytest.mark.parametrize(("path", "method"), METHODS, ids=[_rpc_id(path) for path, _ in METHODS])
@settings(FUZZ, max_examples=EXAMPLES_PER_RPC)
@given(data=st.data())
async def test_fuzzed_requests_never_get_unknown_or_internal(
    open_arena: Arena, path: str, method: MethodDescriptor, data: st.DataObject
) -> None:
    if open_arena.examples.total() % 2 == 0:
        await open_arena.top_up()
    body = data.draw(Requests(OPEN).for_method(method), label="request")
    metadata = data.draw(trace_metadata(), label="metadata")
    _, answer = await open_arena.send(path, method, body, metadata)
    check_answer(answer, method, strings(body))


@dataclass(frozen=True)
class Credential:
    """The authorization header values a call carries, and whom they authenticate (None: nobody)."""

    values: tuple[bytes, ...]
    principal: Named | None

    @property
    def printable(self) -> bool:
        """Whether grpc's own client can send them (it refuses anything but printable ASCII)."""
        return all(0x20 <= byte <= 0x7E for value in self.values for byte in value)


def _valid(named: Named, scheme: str, pad: str) -> Credential:
    return Credential((f"{scheme} {pad}{named.token}{pad}".encode(),), named)


def _garbage(*values: bytes) -> Credential:
    return Credential(values, None)


def _near_misses(named: Named) -> st.SearchStrategy[Credential]:
    token = named.token
    return st.sampled_from(
        [
            _garbage(),
            _garbage(b""),
            _garbage(b"Bearer "),
            _garbage(b"Bearer"),
            _garbage(b"Bearer  "),
            _garbage(f"Basic {token}".encode()),
            _garbage(token.encode()),
            _garbage(f"Bearer {token}x".encode()),
            _garbage(f"Bearer {token[:-1]}".encode()),
            _garbage(f"Bearer {token.upper()}".encode()),
            _garbage(f"Bearer\t{token}".encode()),
            _garbage(f"Bearer {token}\x00".encode()),
            _garbage(f"Bearer {token}é".encode()),
            _garbage(f"Bearer\xa0{token}".encode("latin-1")),
            _garbage("Bearer tök".encode()),
            _garbage(b"Bearer \xff\xfe\xfd"),
            _garbage(b"Bearer \x7f\x01\x1b[2J"),
            _garbage(bearer(named).encode(), bearer(named).encode()),
            _garbage(b"Bearer wrong", bearer(named).encode()),
        ]
    )


def credentials() -> st.SearchStrategy[Credential]:
    named = st.sampled_from(EVERYONE)
    huge = st.sampled_from((4090, 4100, 9_000, 17_000, 70_000)).map(lambda n: _garbage(b"Bearer " + b"a" * n))
    random = st.one_of(
        st.binary(max_size=64),
        st.text(max_size=64).map(str.encode),
        st.binary(max_size=64).map(lambda b: b"Bearer " + b),
    ).map(_garbage)
    valid = st.builds(
        _valid, named, st.sampled_from(("Bearer", "bearer", "BEARER", "bEaReR")), st.sampled_from(("", " "))
    )
    return st.one_of(valid, valid, named.flatmap(_near_misses), huge, random)


@settings(FUZZ, max_examples=AUTH_EXAMPLES)
@given(data=st.data())
async def test_fuzzed_authorization_never_lets_a_bad_token_in_nor_gets_unknown_or_internal(
    guarded_arena: Arena, data: st.DataObject
) -> None:
    if guarded_arena.examples.total() % 2 == 0:
        await guarded_arena.top_up()
    path, method = data.draw(st.sampled_from(METHODS), label="rpc")
    body = data.draw(Requests(GUARDED).for_method(method), label="request")
    credential = data.draw(credentials(), label="credential")
    if credential.printable:
        metadata = tuple(("authorization", value.decode()) for value in credential.values)
        quiet_after = QUIET_WATCH_S if credential.principal else CALL_TIMEOUT_S
        wire, answer = await guarded_arena.send(path, method, body, metadata, quiet_after=quiet_after)
    else:
        raw = [(b"authorization", value) for value in credential.values]
        wire, answer = await guarded_arena.send(path, method, body, raw_metadata=raw)
        wire = wire[:MAX_BODY]
    secrets = [*TOKENS, *(value for value in credential.values if len(value) >= SECRET_LENGTH)]
    check_answer(answer, method, strings(body), secrets)
    if credential.principal is not None:
        assert answer.code != grpc.StatusCode.UNAUTHENTICATED, f"{credential.principal.name}: {answer}"
        return
    oversized = len(wire) > MAX_MESSAGE or any(
        len(value) > METADATA_SOFT_LIMIT for value in credential.values
    )
    refusals = {grpc.StatusCode.UNAUTHENTICATED} | (
        {grpc.StatusCode.RESOURCE_EXHAUSTED} if oversized else set()
    )
    assert answer.code in refusals, f"{credential} to {method.name}: {answer}"


async def _serves(port: int, metadata: Metadata, session: pb.SessionRef) -> None:
    """Health is SERVING and a turn runs start to end on `session`."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        runner = pb_grpc.AdmissionServiceStub(channel)
        admitted = await runner.AdmitTurn(
            pb.AdmitTurnRequest(session=session, turn_id="after-fuzz", runner_id="r1"), metadata=metadata
        )
        beat = await runner.Heartbeat(pb.HeartbeatRequest(lease=admitted.lease), metadata=metadata)
        assert beat.directive == pb.DIRECTIVE_CONTINUE
        done = await runner.CompleteTurn(
            pb.CompleteTurnRequest(lease=admitted.lease, outcome=pb.TURN_OUTCOME_COMPLETED), metadata=metadata
        )
        assert done.recorded
        assert done.turn.outcome == pb.TURN_OUTCOME_COMPLETED


async def test_both_servers_keep_serving_after_fuzzing(open_arena: Arena, guarded_arena: Arena) -> None:
    await _serves(open_arena.port, (), pb.SessionRef(project_id="p-fuzz", session_id="after"))
    await _serves(
        guarded_arena.port, _metadata(RUNNER_A), pb.SessionRef(project_id=PROJECT_A, session_id="fz-after")
    )


async def test_core_invariants_hold_in_every_fuzzed_session(open_arena: Arena, guarded_arena: Arena) -> None:
    for fuzzed in (open_arena, guarded_arena):
        sessions, _ = await fuzzed.check_invariants()
        assert sessions >= len(fuzzed.pool_sessions)


def test_fuzzing_volume_is_reported(
    open_arena: Arena, guarded_arena: Arena, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [f"fuzzing volume (profile {PROFILE}, open server on {BACKEND}):"]
    for name, fuzzed in (("open", open_arena), ("guarded", guarded_arena)):
        sessions, events = fuzzed.checked
        lines.append(
            f"  {name} server: {fuzzed.examples.total()} requests; invariants checked in"
            f" {sessions} sessions, {events} events"
        )
        for rpc, count in sorted(fuzzed.examples.items()):
            codes = ", ".join(f"{code} {n}" for (r, code), n in sorted(fuzzed.codes.items()) if r == rpc)
            lines.append(f"    {rpc}: {count} ({codes})")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert open_arena.examples.total() + guarded_arena.examples.total() > 0
