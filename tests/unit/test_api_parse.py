"""api/parse.py (with fields.py and page_tokens.py): every request type becomes its command, and
every broken input rule is collected as a field violation, with nothing else collected
(docs/design.md §3, input limits). Nothing here touches a store."""

from __future__ import annotations

import base64
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message

from turngate.service import core
from turngate.service.api import page_tokens, parse
from turngate.service.api.fields import InvalidArgument, traceparent
from turngate.service.api.policy import Policy
from turngate.service.core import SessionKey, limits
from turngate.v1 import turngate_pb2 as pb

SECOND = limits.SECOND
REF = pb.SessionRef(project_id="p1", session_id="s1")
KEY = SessionKey("p1", "s1")
LEASE = pb.TurnLease(session=REF, turn_id="t1", generation=7)
POLICY = Policy(
    lease_ttl=20 * SECOND,
    stop_grace=30 * SECOND,
    tombstone_ttl=600 * SECOND,
    max_open_tool_calls=10,
    max_pending_interactions=5,
    max_active_sessions_per_project=3,
)
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
ID_RULE = f"must match {limits.ID_PATTERN}"
# The violations of a missing session, or of a missing lease (field, description).
NO_SESSION = [
    ("session", "is required"),
    ("session.project_id", "is required"),
    ("session.session_id", "is required"),
]
NO_LEASE = [
    ("lease", "is required"),
    ("lease.session", "is required"),
    ("lease.session.project_id", "is required"),
    ("lease.session.session_id", "is required"),
    ("lease.turn_id", "is required"),
    ("lease.generation", "must be the positive generation returned by AdmitTurn"),
]

Violations = list[tuple[str, str]]


def refused(parsing: Callable[[], object]) -> Violations:
    """The violations a request is refused with (it must be refused)."""
    with pytest.raises(InvalidArgument) as caught:
        parsing()
    return caught.value.violations


def fields_of(parsing: Callable[[], object]) -> list[str]:
    return [field for field, _ in refused(parsing)]


_M = TypeVar("_M", bound=Message)


def changed(request: _M, **fields: object) -> _M:
    """`request` with `fields` set (messages copied in)."""
    for name, value in fields.items():
        if isinstance(value, Message):
            getattr(request, name).CopyFrom(value)
        else:
            setattr(request, name, value)
    return request


def admit_with(**fields: object) -> pb.AdmitTurnRequest:
    return changed(pb.AdmitTurnRequest(session=REF, turn_id="t1", runner_id="r1"), **fields)


def admit(request: pb.AdmitTurnRequest, *, may_stop_others: bool = False) -> tuple[SessionKey, core.Admit]:
    return parse.admit(request, POLICY, TRACE, "alice", may_stop_others=may_stop_others)


def test_interrupt_of_another_principals_turn_whether_the_caller_may_is_carried_by_the_command() -> None:
    request = admit_with(mode=pb.ADMISSION_MODE_INTERRUPT)
    assert admit(request)[1].may_stop_others is False
    assert admit(request, may_stop_others=True)[1].may_stop_others is True


def call_with(**fields: object) -> pb.RecordToolCallRequest:
    request = pb.RecordToolCallRequest(
        lease=LEASE, call_id="c1", name="shell", status=pb.TOOL_CALL_STATUS_OPEN
    )
    return changed(request, **fields)


def token(text: str) -> str:
    """A page token carrying `text`, as page_tokens writes them."""
    return base64.urlsafe_b64encode(text.encode()).decode()


# --- every request type: the happy path ---------------------------------------------------------


def test_admit_becomes_an_admit_with_the_policys_lease_trace_principal_and_project_bound() -> None:
    assert admit(admit_with()) == (
        KEY,
        core.Admit("t1", "r1", 20 * SECOND, TRACE, "alice", max_active_in_project=3),
    )
    _, asked = admit(admit_with(lease_ttl=Duration(seconds=5, nanos=1_500)))
    assert asked.lease_ttl == 5 * SECOND + 1, "the runner's own lease, to the µs"


def test_heartbeat_becomes_a_heartbeat_keeping_or_changing_the_lease_length() -> None:
    assert parse.heartbeat(pb.HeartbeatRequest(lease=LEASE), "alice") == (
        KEY,
        core.Heartbeat("t1", 7, None, "alice"),
    )
    request = pb.HeartbeatRequest(lease=LEASE, lease_ttl=Duration(seconds=60))
    assert parse.heartbeat(request, "") == (KEY, core.Heartbeat("t1", 7, 60 * SECOND, ""))


def test_record_tool_call_becomes_a_record_with_the_policys_open_bound() -> None:
    request = call_with(status=pb.TOOL_CALL_STATUS_FAILED, error="disk full")
    assert parse.record_tool_call(request, POLICY, "alice") == (
        KEY,
        core.RecordToolCall("t1", 7, "c1", "shell", core.ToolCallStatus.FAILED, "disk full", "alice", 10),
    )
    for status, expected in [
        (pb.TOOL_CALL_STATUS_OPEN, core.ToolCallStatus.OPEN),
        (pb.TOOL_CALL_STATUS_SUCCEEDED, core.ToolCallStatus.SUCCEEDED),
    ]:
        assert parse.record_tool_call(call_with(status=status), POLICY, "")[1].status is expected


def test_record_interaction_becomes_a_record_with_the_policys_pending_bound() -> None:
    request = pb.RecordInteractionRequest(lease=LEASE, interaction_id="i1", kind="approval")
    assert parse.record_interaction(request, POLICY, "alice") == (
        KEY,
        core.RecordInteraction("t1", 7, "i1", "approval", "alice", 5),
    )


def test_complete_becomes_a_complete_for_each_reportable_outcome() -> None:
    request = pb.CompleteTurnRequest(lease=LEASE, outcome=pb.TURN_OUTCOME_FAILED, error="boom")
    assert parse.complete(request, "alice") == (
        KEY,
        core.Complete("t1", 7, core.TurnOutcome.FAILED, "boom", "alice"),
    )
    for outcome, expected in [
        (pb.TURN_OUTCOME_COMPLETED, core.TurnOutcome.COMPLETED),
        (pb.TURN_OUTCOME_CANCELLED, core.TurnOutcome.CANCELLED),
    ]:
        assert parse.complete(pb.CompleteTurnRequest(lease=LEASE, outcome=outcome), "")[1].outcome is expected


def test_cancel_becomes_a_cancel_with_the_policys_grace_and_memory() -> None:
    request = pb.CancelTurnRequest(
        session=REF, expected_turn_id="t1", reason="user pressed stop", force=True, request_id="q1"
    )
    assert parse.cancel(request, POLICY) == (
        KEY,
        core.Cancel("t1", "user pressed stop", True, "q1", 30 * SECOND, 600 * SECOND),
    )
    assert parse.cancel(pb.CancelTurnRequest(session=REF), POLICY) == (
        KEY,
        core.Cancel("", "", False, "", 30 * SECOND, 600 * SECOND),
    ), "whatever is active, without a request id"


def test_resolve_interaction_becomes_a_resolution() -> None:
    request = pb.ResolveInteractionRequest(session=REF, interaction_id="i1", resolution="approved")
    assert parse.resolve_interaction(request, POLICY) == (
        KEY,
        core.ResolveInteraction("i1", "approved", "", 600 * SECOND),
    )
    empty = pb.ResolveInteractionRequest(session=REF, interaction_id="i1")
    assert parse.resolve_interaction(empty, POLICY) == (
        KEY,
        core.ResolveInteraction("i1", "", "", 600 * SECOND),
    )
    retried = pb.ResolveInteractionRequest(
        session=REF, interaction_id="i1", resolution="yes", request_id="q1"
    )
    assert parse.resolve_interaction(retried, POLICY) == (
        KEY,
        core.ResolveInteraction("i1", "yes", "q1", 600 * SECOND),
    ), "with the request id that makes a retry answer as the first call"


def test_resume_queue_becomes_a_resume_with_the_policys_memory() -> None:
    request = pb.ResumeQueueRequest(session=REF, request_id="q1")
    assert parse.resume_queue(request, POLICY) == (KEY, core.ResumeQueue("q1", 600 * SECOND))
    assert parse.resume_queue(pb.ResumeQueueRequest(session=REF), POLICY) == (
        KEY,
        core.ResumeQueue("", 600 * SECOND),
    )


STEERING = Policy(
    lease_ttl=20 * SECOND,
    stop_grace=30 * SECOND,
    tombstone_ttl=600 * SECOND,
    queue_wait=300 * SECOND,
    max_queue_depth=8,
    max_steer_bytes=8,
    max_steers_per_turn=4,
    steer_wait=60 * SECOND,
)


def test_steer_becomes_a_steer_with_the_policys_bounds_wait_memory_and_queue() -> None:
    request = pb.SteerTurnRequest(
        session=REF,
        expected_turn_id="t1",
        steer_id="s1",
        content="12345678",
        request_id="q1",
        fallback=pb.STEER_FALLBACK_ENQUEUE,
        requeue_unconsumed=True,
    )
    assert parse.steer(request, STEERING) == (
        KEY,
        core.SteerTurn(
            "t1",
            "s1",
            "12345678",
            "text/plain",
            core.SteerFallback.ENQUEUE,
            requeue=True,
            request_id="q1",
            steer_wait=60 * SECOND,
            max_steers=4,
            tombstone_ttl=600 * SECOND,
            max_queue_wait=300 * SECOND,
            max_queue_depth=8,
            lease_ttl=20 * SECOND,
        ),
    )
    json = pb.SteerTurnRequest(
        session=REF, expected_turn_id="t1", steer_id="s1", content="{}", content_type="application/json"
    )
    _, command = parse.steer(json, STEERING)
    assert (command.content_type, command.fallback, command.requeue) == (
        "application/json",
        core.SteerFallback.REJECT,
        False,
    )
    too_long = pb.SteerTurnRequest(session=REF, expected_turn_id="t1", steer_id="s1", content="é" * 5)
    assert refused(lambda: parse.steer(too_long, STEERING)) == [
        ("content", "must be at most 8 bytes of UTF-8 (got 10)")
    ]


def test_acknowledge_steer_takes_consumed_or_declined_only() -> None:
    for status in (core.SteerStatus.CONSUMED, core.SteerStatus.DECLINED):
        request = pb.AcknowledgeSteerRequest(
            lease=LEASE, steer_id="s1", status=pb.SteerStatus.ValueType(status)
        )
        assert parse.acknowledge_steer(request, "runner-a") == (
            KEY,
            core.AcknowledgeSteer("t1", 7, "s1", status, "runner-a"),
        )
    for other in (pb.STEER_STATUS_UNSPECIFIED, pb.STEER_STATUS_PENDING, pb.STEER_STATUS_EXPIRED):
        wrong = pb.AcknowledgeSteerRequest(lease=LEASE, steer_id="s1", status=other)
        assert refused(partial(parse.acknowledge_steer, wrong, "")) == [
            ("status", "must be one of CONSUMED, DECLINED")
        ]


def test_move_queued_turn_tells_an_absent_expected_version_from_zero() -> None:
    unguarded = pb.MoveQueuedTurnRequest(session=REF, turn_id="t3", after_turn_id="t1", request_id="q1")
    assert parse.move_queued_turn(unguarded, POLICY) == (
        KEY,
        core.MoveQueuedTurn("t3", "t1", None, "q1", 600 * SECOND),
    )
    at_zero = pb.MoveQueuedTurnRequest(session=REF, turn_id="t3", expected_queue_version=0)
    assert parse.move_queued_turn(at_zero, POLICY)[1].expected_queue_version == 0
    after_itself = pb.MoveQueuedTurnRequest(session=REF, turn_id="t3", after_turn_id="t3")
    assert refused(lambda: parse.move_queued_turn(after_itself, POLICY)) == [
        ("after_turn_id", "must not be turn_id (empty moves it to the head)")
    ]


def test_the_reads_become_their_queries() -> None:
    assert parse.watch(pb.WatchSessionRequest(session=REF)) == parse.WatchQuery(KEY, 0, "")
    assert parse.watch(pb.WatchSessionRequest(session=REF, after_seq=5, turn_id="t1")) == parse.WatchQuery(
        KEY, 5, "t1"
    )
    assert parse.watch(pb.WatchSessionRequest(session=REF, after_seq=5, epoch=42)) == parse.WatchQuery(
        KEY, 5, "", 42
    )
    assert parse.get_session(pb.GetSessionRequest(session=REF)) == KEY
    assert parse.get_turn(pb.GetTurnRequest(session=REF, turn_id="t1")) == (KEY, "t1")
    assert parse.list_turns(pb.ListTurnsRequest(session=REF)) == parse.TurnsPage(KEY, 50, None)
    turns_page = pb.ListTurnsRequest(session=REF, page_size=500, page_token=page_tokens.turns_page_token(42))
    assert parse.list_turns(turns_page) == parse.TurnsPage(KEY, 500, 42)
    assert parse.list_active_sessions(pb.ListActiveSessionsRequest(project_id="p1")) == (
        parse.ActiveSessionsPage("p1", 50, None)
    )
    active_page = pb.ListActiveSessionsRequest(
        project_id="p1", page_size=1, page_token=page_tokens.active_page_token(1_700_000_000_000_000, "s-9")
    )
    assert parse.list_active_sessions(active_page) == parse.ActiveSessionsPage(
        "p1", 1, (1_700_000_000_000_000, "s-9")
    )
    assert parse.list_sessions(pb.ListSessionsRequest(project_id="p1")) == parse.SessionsPage("p1", 50, None)
    sessions_page = pb.ListSessionsRequest(
        project_id="p1", page_size=7, page_token=page_tokens.sessions_page_token(1_700_000_000_000_000, "s-9")
    )
    assert parse.list_sessions(sessions_page) == parse.SessionsPage("p1", 7, (1_700_000_000_000_000, "s-9"))
    assert parse.list_projects(pb.ListProjectsRequest()) == parse.ProjectsPage(50, None)
    projects_page = pb.ListProjectsRequest(page_size=3, page_token=page_tokens.projects_page_token("acme"))
    assert parse.list_projects(projects_page) == parse.ProjectsPage(3, "acme")


# --- every request type: its violations, and nothing else -------------------------------------


def _missing(field: str) -> Violations:
    return [(field, "is required")]


@pytest.mark.parametrize(
    ("parsing", "expected"),
    [
        pytest.param(
            lambda: admit(pb.AdmitTurnRequest()),
            [*NO_SESSION, *_missing("turn_id"), *_missing("runner_id")],
            id="admit-empty",
        ),
        pytest.param(
            lambda: parse.heartbeat(pb.HeartbeatRequest(), ""),
            NO_LEASE,
            id="heartbeat-empty",
        ),
        pytest.param(
            lambda: parse.record_tool_call(pb.RecordToolCallRequest(), POLICY, ""),
            [
                *NO_LEASE,
                *_missing("call_id"),
                *_missing("name"),
                ("status", "must be one of OPEN, SUCCEEDED, FAILED"),
            ],
            id="record-tool-call-empty",
        ),
        pytest.param(
            lambda: parse.record_interaction(pb.RecordInteractionRequest(), POLICY, ""),
            [*NO_LEASE, *_missing("interaction_id"), *_missing("kind")],
            id="record-interaction-empty",
        ),
        pytest.param(
            lambda: parse.complete(pb.CompleteTurnRequest(), ""),
            [*NO_LEASE, ("outcome", "must be one of COMPLETED, FAILED, CANCELLED")],
            id="complete-empty",
        ),
        pytest.param(lambda: parse.cancel(pb.CancelTurnRequest(), POLICY), NO_SESSION, id="cancel-empty"),
        pytest.param(
            lambda: parse.resolve_interaction(pb.ResolveInteractionRequest(), POLICY),
            [*NO_SESSION, *_missing("interaction_id")],
            id="resolve-empty",
        ),
        pytest.param(
            lambda: parse.steer(pb.SteerTurnRequest(), POLICY),
            [*NO_SESSION, *_missing("expected_turn_id"), *_missing("steer_id")],
            id="steer-empty",
        ),
        pytest.param(
            lambda: parse.acknowledge_steer(pb.AcknowledgeSteerRequest(), ""),
            [*NO_LEASE, *_missing("steer_id"), ("status", "must be one of CONSUMED, DECLINED")],
            id="acknowledge-steer-empty",
        ),
        pytest.param(
            lambda: parse.move_queued_turn(pb.MoveQueuedTurnRequest(), POLICY),
            [*NO_SESSION, *_missing("turn_id")],
            id="move-queued-turn-empty",
        ),
        pytest.param(lambda: parse.watch(pb.WatchSessionRequest()), NO_SESSION, id="watch-empty"),
        pytest.param(lambda: parse.get_session(pb.GetSessionRequest()), NO_SESSION, id="get-session-empty"),
        pytest.param(
            lambda: parse.get_turn(pb.GetTurnRequest()),
            [*NO_SESSION, *_missing("turn_id")],
            id="get-turn-empty",
        ),
        pytest.param(lambda: parse.list_turns(pb.ListTurnsRequest()), NO_SESSION, id="list-turns-empty"),
        pytest.param(
            lambda: parse.list_active_sessions(pb.ListActiveSessionsRequest()),
            _missing("project_id"),
            id="list-active-empty",
        ),
    ],
)
def test_an_empty_request_names_every_required_field_and_nothing_else(
    parsing: Callable[[], object], expected: Violations
) -> None:
    assert refused(parsing) == expected


@pytest.mark.parametrize(
    ("parsing", "expected"),
    [
        pytest.param(
            lambda: admit(admit_with(turn_id="-t", runner_id="r 1", lease_ttl=Duration(seconds=0))),
            [("turn_id", ID_RULE), ("runner_id", ID_RULE), ("lease_ttl", "must be between 1s and 24h")],
            id="admit",
        ),
        pytest.param(
            lambda: admit(
                pb.AdmitTurnRequest(session=pb.SessionRef(project_id="p/1"), turn_id="t", runner_id="r")
            ),
            [("session.project_id", ID_RULE), ("session.session_id", "is required")],
            id="admit-session",
        ),
        pytest.param(
            lambda: parse.heartbeat(
                pb.HeartbeatRequest(
                    lease=pb.TurnLease(session=REF, turn_id="t1", generation=-3),
                    lease_ttl=Duration(seconds=1, nanos=-1),
                ),
                "",
            ),
            [
                ("lease.generation", "must be the positive generation returned by AdmitTurn"),
                ("lease_ttl", "is not a valid duration"),
            ],
            id="heartbeat",
        ),
        pytest.param(
            lambda: parse.record_tool_call(
                call_with(call_id="c" * 129, name="n" * 257, status=pb.TOOL_CALL_STATUS_INTERRUPTED),
                POLICY,
                "",
            ),
            [
                ("call_id", ID_RULE),
                ("name", "must be at most 256 bytes of UTF-8 (got 257)"),
                ("status", "must be one of OPEN, SUCCEEDED, FAILED"),
            ],
            id="record-tool-call",
        ),
        pytest.param(
            lambda: parse.record_tool_call(
                call_with(status=pb.TOOL_CALL_STATUS_SUCCEEDED, error="x"), POLICY, ""
            ),
            [("error", "is only allowed with status FAILED")],
            id="record-tool-call-error-without-failure",
        ),
        pytest.param(
            lambda: parse.record_tool_call(call_with(status=99), POLICY, ""),
            [("status", "must be one of OPEN, SUCCEEDED, FAILED")],
            id="record-tool-call-unknown-status",
        ),
        pytest.param(
            lambda: parse.record_interaction(
                pb.RecordInteractionRequest(lease=LEASE, interaction_id="i\x00", kind="k" * 129), POLICY, ""
            ),
            [("interaction_id", ID_RULE), ("kind", "must be at most 128 bytes of UTF-8 (got 129)")],
            id="record-interaction",
        ),
        pytest.param(
            lambda: parse.complete(pb.CompleteTurnRequest(lease=LEASE, outcome=pb.TURN_OUTCOME_LOST), ""),
            [("outcome", "must be one of COMPLETED, FAILED, CANCELLED")],
            id="complete-lost-is-the-watchdogs",
        ),
        pytest.param(
            lambda: parse.complete(
                pb.CompleteTurnRequest(lease=LEASE, outcome=pb.TURN_OUTCOME_COMPLETED, error="no"), ""
            ),
            [("error", "is only allowed with outcome FAILED or CANCELLED")],
            id="complete-error-without-failure",
        ),
        pytest.param(
            lambda: parse.cancel(
                pb.CancelTurnRequest(session=REF, expected_turn_id=".t", reason="r" * 1025, request_id="q q"),
                POLICY,
            ),
            [
                ("expected_turn_id", ID_RULE),
                ("reason", "must be at most 1024 bytes of UTF-8 (got 1025)"),
                ("request_id", ID_RULE),
            ],
            id="cancel",
        ),
        pytest.param(
            lambda: parse.resolve_interaction(
                pb.ResolveInteractionRequest(
                    session=REF, interaction_id="i1", resolution="r" * (16 * 1024 + 1)
                ),
                POLICY,
            ),
            [("resolution", "must be at most 16384 bytes of UTF-8 (got 16385)")],
            id="resolve",
        ),
        pytest.param(
            lambda: parse.watch(pb.WatchSessionRequest(session=REF, after_seq=-1, turn_id="t/1")),
            [("after_seq", "must be 0 (start with a snapshot) or the last seq seen"), ("turn_id", ID_RULE)],
            id="watch",
        ),
        pytest.param(
            lambda: parse.watch(pb.WatchSessionRequest(session=REF, after_seq=3, epoch=-1)),
            [("epoch", "must be 0 (not given) or the epoch of the last event seen")],
            id="watch-epoch",
        ),
        pytest.param(
            lambda: parse.get_turn(pb.GetTurnRequest(session=REF, turn_id="é")),
            [("turn_id", ID_RULE)],
            id="get-turn",
        ),
        pytest.param(
            lambda: parse.list_turns(pb.ListTurnsRequest(session=REF, page_size=501, page_token="garbage!")),
            [
                ("page_size", "must be between 0 and 500 (0 means 50)"),
                ("page_token", "is not a next_page_token returned by ListTurns"),
            ],
            id="list-turns",
        ),
        pytest.param(
            lambda: parse.list_active_sessions(
                pb.ListActiveSessionsRequest(
                    project_id="p1", page_size=-1, page_token=page_tokens.turns_page_token(5)
                )
            ),
            [
                ("page_size", "must be between 0 and 500 (0 means 50)"),
                ("page_token", "is not a next_page_token returned by ListActiveSessions"),
            ],
            id="list-active-sessions",
        ),
        pytest.param(
            lambda: parse.list_sessions(
                pb.ListSessionsRequest(page_size=501, page_token=page_tokens.active_page_token(5, "s1"))
            ),
            [
                ("project_id", "is required"),
                ("page_size", "must be between 0 and 500 (0 means 50)"),
                ("page_token", "is not a next_page_token returned by ListSessions"),
            ],
            id="list-sessions",
        ),
        pytest.param(
            lambda: parse.list_projects(pb.ListProjectsRequest(page_size=-1, page_token="garbage!")),
            [
                ("page_size", "must be between 0 and 500 (0 means 50)"),
                ("page_token", "is not a next_page_token returned by ListProjects"),
            ],
            id="list-projects",
        ),
    ],
)
def test_each_broken_rule_is_one_violation_of_its_field(
    parsing: Callable[[], object], expected: Violations
) -> None:
    assert refused(parsing) == expected


def test_invalid_argument_lists_every_violation_in_its_message() -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse.get_turn(pb.GetTurnRequest(session=REF))
    assert str(caught.value) == "turn_id: is required"
    with pytest.raises(InvalidArgument) as both:
        parse.list_active_sessions(pb.ListActiveSessionsRequest(page_size=501))
    assert str(both.value) == "project_id: is required; page_size: must be between 0 and 500 (0 means 50)"


# --- identifiers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["a", "0", "t-1", "Turn_1.retry:2", "a" * 128, "a" + "._:-" * 31 + "Z9b"],
)
def test_an_identifier_of_the_grammar_up_to_128_characters_is_accepted(value: str) -> None:
    assert parse.get_turn(pb.GetTurnRequest(session=REF, turn_id=value)) == (KEY, value)


@pytest.mark.parametrize(
    "value",
    ["a" * 129, "-a", ".a", "_a", ":a", "a b", "a/b", "a\x00", "a\n", "é", "\uff41", "a" * 128 + "é"],
)
def test_an_identifier_outside_the_grammar_or_longer_than_128_is_refused(value: str) -> None:
    assert refused(lambda: parse.get_turn(pb.GetTurnRequest(session=REF, turn_id=value))) == [
        ("turn_id", ID_RULE)
    ]


# --- texts --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        pytest.param("r" * 1024, [], id="1024-ascii-bytes"),
        pytest.param("é" * 512, [], id="1024-bytes-of-512-characters"),
        pytest.param("€" * 341 + "a", [], id="1024-bytes-of-three-byte-characters"),
        pytest.param("r" * 1025, [("reason", "must be at most 1024 bytes of UTF-8 (got 1025)")], id="1025"),
        pytest.param(
            "é" * 513, [("reason", "must be at most 1024 bytes of UTF-8 (got 1026)")], id="513-e-acute"
        ),
        pytest.param("😀" * 257, [("reason", "must be at most 1024 bytes of UTF-8 (got 1028)")], id="emoji"),
        pytest.param("a\x00b", [("reason", "must not contain NUL (U+0000)")], id="nul"),
        pytest.param(
            "\x00" * 1025,
            [
                ("reason", "must be at most 1024 bytes of UTF-8 (got 1025)"),
                ("reason", "must not contain NUL (U+0000)"),
            ],
            id="nul-and-too-long",
        ),
    ],
)
def test_texts_are_bounded_in_bytes_of_utf8_and_refuse_nul(reason: str, expected: Violations) -> None:
    request = pb.CancelTurnRequest(session=REF, reason=reason)
    if expected:
        assert refused(lambda: parse.cancel(request, POLICY)) == expected
    else:
        assert parse.cancel(request, POLICY)[1].reason == reason


def test_required_texts_refuse_empty_and_nul_in_every_text_field() -> None:
    assert refused(lambda: parse.record_tool_call(call_with(name=""), POLICY, "")) == [
        ("name", "is required")
    ]
    assert refused(
        lambda: parse.record_tool_call(
            call_with(name="a\x00", status=pb.TOOL_CALL_STATUS_FAILED, error="\x00"), POLICY, ""
        )
    ) == [("name", "must not contain NUL (U+0000)"), ("error", "must not contain NUL (U+0000)")]
    assert refused(
        lambda: parse.resolve_interaction(
            pb.ResolveInteractionRequest(session=REF, interaction_id="i1", resolution="\x00"), POLICY
        )
    ) == [("resolution", "must not contain NUL (U+0000)")]
    assert refused(
        lambda: parse.complete(
            pb.CompleteTurnRequest(lease=LEASE, outcome=pb.TURN_OUTCOME_FAILED, error="x\x00"), ""
        )
    ) == [("error", "must not contain NUL (U+0000)")]
    assert parse.record_tool_call(call_with(name="n" * 256), POLICY, "")[1].name == "n" * 256
    kind = parse.record_interaction(
        pb.RecordInteractionRequest(lease=LEASE, interaction_id="i", kind="k" * 128), POLICY, ""
    )
    assert kind[1].kind == "k" * 128
    resolution = "r" * (16 * 1024)
    resolved = parse.resolve_interaction(
        pb.ResolveInteractionRequest(session=REF, interaction_id="i", resolution=resolution), POLICY
    )
    assert resolved[1].resolution == resolution


# --- durations ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "nanos", "us"),
    [
        pytest.param(1, 0, SECOND, id="1s"),
        pytest.param(0, 1_000_000_000 - 1, None, id="just-under-1s"),
        pytest.param(1, 999, SECOND, id="sub-microsecond-nanos-dropped"),
        pytest.param(1, 1_000, SECOND + 1, id="1s-and-1us"),
        pytest.param(86_400, 0, 86_400 * SECOND, id="24h"),
        pytest.param(86_400, 1_000, None, id="24h-and-1us"),
        pytest.param(0, 0, None, id="zero"),
        pytest.param(-1, 0, None, id="negative"),
        pytest.param(0, -5_000, None, id="negative-nanos"),
        pytest.param(10**10, 0, None, id="centuries"),
    ],
)
def test_a_lease_ttl_must_be_between_1s_and_24h_to_the_microsecond(
    seconds: int, nanos: int, us: int | None
) -> None:
    request = admit_with(lease_ttl=Duration(seconds=seconds, nanos=nanos))
    if us is None:
        assert refused(lambda: admit(request)) == [("lease_ttl", "must be between 1s and 24h")]
    else:
        assert admit(request)[1].lease_ttl == us


@pytest.mark.parametrize(
    ("seconds", "nanos"),
    [(1, 1_000_000_000), (1, -1), (-1, 1), (0, -1_000_000_000), (5, 2**31 - 1)],
)
def test_a_duration_with_invalid_nanos_is_not_a_valid_duration(seconds: int, nanos: int) -> None:
    request = pb.HeartbeatRequest(lease=LEASE, lease_ttl=Duration(seconds=seconds, nanos=nanos))
    assert refused(lambda: parse.heartbeat(request, "")) == [("lease_ttl", "is not a valid duration")]


# --- page sizes and tokens ----------------------------------------------------------------------


@pytest.mark.parametrize(("size", "used"), [(0, 50), (1, 1), (50, 50), (499, 499), (500, 500)])
def test_a_page_size_from_0_to_500_is_used_and_0_means_50(size: int, used: int) -> None:
    assert parse.list_turns(pb.ListTurnsRequest(session=REF, page_size=size)).size == used
    assert (
        parse.list_active_sessions(pb.ListActiveSessionsRequest(project_id="p1", page_size=size)).size == used
    )


@pytest.mark.parametrize("size", [-1, 501, 2**31 - 1, -(2**31)])
def test_a_page_size_outside_0_to_500_is_refused(size: int) -> None:
    assert fields_of(lambda: parse.list_turns(pb.ListTurnsRequest(session=REF, page_size=size))) == [
        "page_size"
    ]


@pytest.mark.parametrize("generation", [0, 1, 1_700_000_000_000_000, 2**63 - 1])
def test_a_turns_page_token_round_trips_its_generation(generation: int) -> None:
    assert page_tokens.turns_page_position(page_tokens.turns_page_token(generation)) == generation


@pytest.mark.parametrize(
    ("deadline", "session_id"), [(0, "s"), (1_700_000_000_000_000, "s-1.a:b_c"), (2**63 - 1, "s" * 128)]
)
def test_an_active_sessions_page_token_round_trips_its_position(deadline: int, session_id: str) -> None:
    assert page_tokens.active_page_position(page_tokens.active_page_token(deadline, session_id)) == (
        deadline,
        session_id,
    )


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param("garbage!", id="not-base64"),
        pytest.param("abc", id="bad-padding"),
        pytest.param(base64.urlsafe_b64encode(b"g\xff1").decode(), id="not-utf8"),
        pytest.param(token("x5"), id="unknown-kind"),
        pytest.param(token("g"), id="no-digits"),
        pytest.param(token("g-5"), id="negative"),
        pytest.param(token("g5 "), id="trailing-space"),
        pytest.param(token("g²"), id="superscript-digit"),
        pytest.param(token("g\u0661\u0662"), id="arabic-indic-digits"),
        pytest.param(token("g\uff15"), id="fullwidth-digit"),
        pytest.param(token(f"g{2**63}"), id="beyond-int64"),
        pytest.param(token("d5/s1"), id="an-active-sessions-token"),
        pytest.param(token("g" + "0" * 299 + "5"), id="longer-than-400-characters"),
    ],
)
def test_a_turns_page_token_it_did_not_write_is_refused(garbage: str) -> None:
    request = pb.ListTurnsRequest(session=REF, page_token=garbage)
    assert refused(lambda: parse.list_turns(request)) == [
        ("page_token", "is not a next_page_token returned by ListTurns")
    ]


def test_a_page_token_of_400_characters_is_read_and_one_longer_is_not() -> None:
    at_limit = token("g" + "0" * 298 + "5")
    beyond = token("g" + "0" * 299 + "5")
    assert (len(at_limit), len(beyond)) == (400, 404)
    assert page_tokens.turns_page_position(at_limit) == 5
    assert page_tokens.turns_page_position(beyond) is None


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(token("g5"), id="a-turns-token"),
        pytest.param(token("d5"), id="no-session"),
        pytest.param(token("d/s1"), id="no-deadline"),
        pytest.param(token("d\u0665/s1"), id="non-ascii-deadline"),
        pytest.param(token(f"d{2**63}/s1"), id="beyond-int64"),
        pytest.param(token("d5/-s"), id="session-outside-the-grammar"),
        pytest.param(token("d5/" + "s" * 129), id="session-of-129"),
        pytest.param(token("d5/s1/s2"), id="two-sessions"),
    ],
)
def test_an_active_sessions_page_token_it_did_not_write_is_refused(garbage: str) -> None:
    request = pb.ListActiveSessionsRequest(project_id="p1", page_token=garbage)
    assert refused(lambda: parse.list_active_sessions(request)) == [
        ("page_token", "is not a next_page_token returned by ListActiveSessions")
    ]


@pytest.mark.parametrize(
    ("last_activity_at", "session_id"),
    [(0, "s"), (1_700_000_000_000_000, "s-1.a:b_c"), (2**63 - 1, "s" * 128)],
)
def test_a_sessions_page_token_round_trips_its_position(last_activity_at: int, session_id: str) -> None:
    written = page_tokens.sessions_page_token(last_activity_at, session_id)
    assert page_tokens.sessions_page_position(written) == (last_activity_at, session_id)


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param("garbage!", id="not-base64"),
        pytest.param(token("d5/s1"), id="an-active-sessions-token"),
        pytest.param(token("g5"), id="a-turns-token"),
        pytest.param(token("pacme"), id="a-projects-token"),
        pytest.param(token("a5"), id="no-session"),
        pytest.param(token("a/s1"), id="no-time"),
        pytest.param(token("a-5/s1"), id="negative"),
        pytest.param(token(f"a{2**63}/s1"), id="beyond-int64"),
        pytest.param(token("a5/-s"), id="session-outside-the-grammar"),
        pytest.param(token("a5/" + "s" * 129), id="session-of-129"),
    ],
)
def test_a_sessions_page_token_it_did_not_write_is_refused(garbage: str) -> None:
    request = pb.ListSessionsRequest(project_id="p1", page_token=garbage)
    assert refused(lambda: parse.list_sessions(request)) == [
        ("page_token", "is not a next_page_token returned by ListSessions")
    ]


@pytest.mark.parametrize("project_id", ["p", "acme-1.a:b_c", "p" * 128])
def test_a_projects_page_token_round_trips_its_project(project_id: str) -> None:
    assert page_tokens.projects_page_position(page_tokens.projects_page_token(project_id)) == project_id


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param("garbage!", id="not-base64"),
        pytest.param(token("a5/s1"), id="a-sessions-token"),
        pytest.param(token("p"), id="no-project"),
        pytest.param(token("p-acme"), id="project-outside-the-grammar"),
        pytest.param(token("p" + "a" * 129), id="project-of-129"),
        pytest.param(token("pa/b"), id="a-slash"),
    ],
)
def test_a_projects_page_token_it_did_not_write_is_refused(garbage: str) -> None:
    request = pb.ListProjectsRequest(page_token=garbage)
    assert refused(lambda: parse.list_projects(request)) == [
        ("page_token", "is not a next_page_token returned by ListProjects")
    ]


# --- traceparent --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "kept"),
    [
        pytest.param({"traceparent": TRACE}, TRACE, id="w3c"),
        pytest.param(
            {"traceparent": TRACE.replace("-01", "-00")}, TRACE.replace("-01", "-00"), id="unsampled"
        ),
        pytest.param({}, "", id="absent"),
        pytest.param({"traceparent": ""}, "", id="empty"),
        pytest.param({"traceparent": TRACE.upper()}, "", id="uppercase-hex"),
        pytest.param({"traceparent": TRACE + "-extra"}, "", id="trailing"),
        pytest.param({"traceparent": " " + TRACE}, "", id="leading-space"),
        pytest.param({"traceparent": TRACE[:-1]}, "", id="short-flags"),
        pytest.param({"traceparent": TRACE.replace("0af7", "0af")}, "", id="short-trace-id"),
        pytest.param({"traceparent": TRACE.replace("-", "_")}, "", id="wrong-separators"),
        pytest.param({"tracestate": TRACE}, "", id="another-header"),
    ],
)
def test_a_traceparent_is_kept_only_when_well_formed(metadata: dict[str, str], kept: str) -> None:
    assert traceparent(metadata) == kept
