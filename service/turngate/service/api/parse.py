"""Contract messages to core commands, validated at the edge (docs/design.md §3.8, input limits;
`fields.Checker` reads each field)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from turngate.service import core
from turngate.service.api import page_tokens
from turngate.service.api.fields import Checker, choices
from turngate.service.api.policy import Policy
from turngate.service.auth import session_tokens
from turngate.service.auth.principals import Reach, Scope
from turngate.service.core import SessionKey, limits
from turngate.v1 import turngate_pb2 as pb

_RECORDABLE = choices(core.ToolCallStatus.OPEN, core.ToolCallStatus.SUCCEEDED, core.ToolCallStatus.FAILED)
_REPORTABLE = choices(core.TurnOutcome.COMPLETED, core.TurnOutcome.FAILED, core.TurnOutcome.CANCELLED)
# Unset (0) is the contract's default: REJECT for a mode, PAUSE for a queue action.
_MODES = {0: core.AdmissionMode.REJECT, **choices(*core.AdmissionMode)}
_QUEUE_ACTIONS = {0: core.QueueAction.PAUSE, **choices(*core.QueueAction)}
_FALLBACKS = {0: core.SteerFallback.REJECT, **choices(*core.SteerFallback)}
_ACKNOWLEDGEABLE = choices(core.SteerStatus.CONSUMED, core.SteerStatus.DECLINED)


def admit(
    request: pb.AdmitTurnRequest, policy: Policy, trace: str, principal: str, *, may_stop_others: bool
) -> tuple[SessionKey, core.Admit]:
    check = Checker()
    key = check.session("session", request.HasField("session"), request.session)
    turn_id = check.identifier("turn_id", request.turn_id)
    runner_id = check.identifier("runner_id", request.runner_id)
    ttl = check.lease_ttl("lease_ttl", request.HasField("lease_ttl"), request.lease_ttl)
    mode = check.choice("mode", request.mode, _MODES)
    guard = check.identifier("expected_active_turn_id", request.expected_active_turn_id, required=False)
    if guard and mode is not core.AdmissionMode.INTERRUPT:
        check.fail("expected_active_turn_id", "is only allowed with mode ADMISSION_MODE_INTERRUPT")
    has_wait = request.HasField("max_queue_wait")
    wait = check.duration(
        "max_queue_wait", has_wait, request.max_queue_wait, limits.MIN_QUEUE_WAIT, policy.max_queue_wait
    )
    if has_wait and mode is core.AdmissionMode.REJECT:
        check.fail("max_queue_wait", "is only allowed with mode ADMISSION_MODE_ENQUEUE or _INTERRUPT")
    check.done()
    assert mode is not None
    return key, core.Admit(
        turn_id,
        runner_id,
        ttl or policy.lease_ttl,
        trace,
        principal,
        max_active_in_project=policy.max_active_sessions_per_project,
        mode=mode,
        expected_active_turn_id=guard,
        max_queue_wait=wait or policy.queue_wait,
        max_queue_depth=policy.max_queue_depth,
        stop_grace=policy.stop_grace,
        may_stop_others=may_stop_others,
    )


def heartbeat(request: pb.HeartbeatRequest, principal: str) -> tuple[SessionKey, core.Heartbeat]:
    check = Checker()
    key, turn_id, generation = check.lease(request.HasField("lease"), request.lease)
    ttl = check.lease_ttl("lease_ttl", request.HasField("lease_ttl"), request.lease_ttl)
    check.done()
    return key, core.Heartbeat(turn_id, generation, ttl, principal)


def record_tool_call(
    request: pb.RecordToolCallRequest, policy: Policy, principal: str
) -> tuple[SessionKey, core.RecordToolCall]:
    check = Checker()
    key, turn_id, generation = check.lease(request.HasField("lease"), request.lease)
    call_id = check.identifier("call_id", request.call_id)
    name = check.text("name", request.name, limits.MAX_TOOL_NAME, required=True)
    status = check.choice("status", request.status, _RECORDABLE)
    error = check.text("error", request.error, limits.MAX_TEXT)
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
    check = Checker()
    key, turn_id, generation = check.lease(request.HasField("lease"), request.lease)
    interaction_id = check.identifier("interaction_id", request.interaction_id)
    kind = check.text("kind", request.kind, limits.MAX_KIND, required=True)
    check.done()
    return key, core.RecordInteraction(
        turn_id, generation, interaction_id, kind, principal, policy.max_pending_interactions
    )


def complete(request: pb.CompleteTurnRequest, principal: str) -> tuple[SessionKey, core.Complete]:
    check = Checker()
    key, turn_id, generation = check.lease(request.HasField("lease"), request.lease)
    outcome = check.choice("outcome", request.outcome, _REPORTABLE)
    error = check.text("error", request.error, limits.MAX_TEXT)
    if error and outcome is core.TurnOutcome.COMPLETED:
        check.fail("error", "is only allowed with outcome FAILED or CANCELLED")
    check.done()
    assert outcome is not None
    return key, core.Complete(turn_id, generation, outcome, error, principal)


def cancel(request: pb.CancelTurnRequest, policy: Policy) -> tuple[SessionKey, core.Cancel]:
    check = Checker()
    key = check.session("session", request.HasField("session"), request.session)
    expected = check.identifier("expected_turn_id", request.expected_turn_id, required=False)
    reason = check.text("reason", request.reason, limits.MAX_TEXT)
    request_id = check.identifier("request_id", request.request_id, required=False)
    queue = check.choice("queue", request.queue, _QUEUE_ACTIONS)
    check.done()
    assert queue is not None
    return key, core.Cancel(
        expected, reason, request.force, request_id, policy.stop_grace, policy.tombstone_ttl, queue
    )


def resume_queue(request: pb.ResumeQueueRequest, policy: Policy) -> tuple[SessionKey, core.ResumeQueue]:
    check = Checker()
    key = check.session("session", request.HasField("session"), request.session)
    request_id = check.identifier("request_id", request.request_id, required=False)
    check.done()
    return key, core.ResumeQueue(request_id, policy.tombstone_ttl)


def clear_queue(request: pb.ClearQueueRequest, policy: Policy) -> tuple[SessionKey, core.ClearQueue]:
    check = Checker()
    key = check.session("session", request.HasField("session"), request.session)
    reason = check.text("reason", request.reason, limits.MAX_TEXT)
    request_id = check.identifier("request_id", request.request_id, required=False)
    check.done()
    return key, core.ClearQueue(reason, request_id, policy.tombstone_ttl)


def move_queued_turn(
    request: pb.MoveQueuedTurnRequest, policy: Policy
) -> tuple[SessionKey, core.MoveQueuedTurn]:
    check = Checker()
    key = check.session("session", request.HasField("session"), request.session)
    turn_id = check.identifier("turn_id", request.turn_id)
    after = check.identifier("after_turn_id", request.after_turn_id, required=False)
    if after and after == turn_id:
        check.fail("after_turn_id", "must not be turn_id (empty moves it to the head)")
    expected = request.expected_queue_version if request.HasField("expected_queue_version") else None
    if expected is not None and expected < 0:
        check.fail("expected_queue_version", "must be a queue_version read from the session")
    request_id = check.identifier("request_id", request.request_id, required=False)
    check.done()
    return key, core.MoveQueuedTurn(turn_id, after, expected, request_id, policy.tombstone_ttl)


def steer(request: pb.SteerTurnRequest, policy: Policy) -> tuple[SessionKey, core.SteerTurn]:
    check = Checker()
    key = check.session("session", request.HasField("session"), request.session)
    expected = check.identifier("expected_turn_id", request.expected_turn_id)
    steer_id = check.identifier("steer_id", request.steer_id)
    content = check.text("content", request.content, policy.max_steer_bytes)
    content_type = check.text("content_type", request.content_type, limits.MAX_CONTENT_TYPE)
    request_id = check.identifier("request_id", request.request_id, required=False)
    fallback = check.choice("fallback", request.fallback, _FALLBACKS)
    check.done()
    assert fallback is not None
    return key, core.SteerTurn(
        expected,
        steer_id,
        content,
        content_type or "text/plain",
        fallback,
        request.requeue_unconsumed,
        request_id,
        steer_wait=policy.steer_wait,
        max_steers=policy.max_steers_per_turn,
        tombstone_ttl=policy.tombstone_ttl,
        max_queue_wait=policy.queue_wait,
        max_queue_depth=policy.max_queue_depth,
        lease_ttl=policy.lease_ttl,
    )


def acknowledge_steer(
    request: pb.AcknowledgeSteerRequest, principal: str
) -> tuple[SessionKey, core.AcknowledgeSteer]:
    check = Checker()
    key, turn_id, generation = check.lease(request.HasField("lease"), request.lease)
    steer_id = check.identifier("steer_id", request.steer_id)
    status = check.choice("status", request.status, _ACKNOWLEDGEABLE)
    check.done()
    assert status is not None
    return key, core.AcknowledgeSteer(turn_id, generation, steer_id, status, principal)


def resolve_interaction(
    request: pb.ResolveInteractionRequest, policy: Policy
) -> tuple[SessionKey, core.ResolveInteraction]:
    check = Checker()
    key = check.session("session", request.HasField("session"), request.session)
    interaction_id = check.identifier("interaction_id", request.interaction_id)
    resolution = check.text("resolution", request.resolution, limits.MAX_RESOLUTION)
    request_id = check.identifier("request_id", request.request_id, required=False)
    check.done()
    return key, core.ResolveInteraction(interaction_id, resolution, request_id, policy.tombstone_ttl)


@dataclass(frozen=True, slots=True)
class SessionTokenOrder:
    reach: Reach
    ttl: int


def mint_session_token(request: pb.MintSessionTokenRequest) -> SessionTokenOrder:
    check = Checker()
    key = check.session("session", request.HasField("session"), request.session)
    ttl = check.duration(
        "ttl", request.HasField("ttl"), request.ttl, session_tokens.MIN_TTL, session_tokens.MAX_TTL
    )
    check.done()
    scopes = {Scope.WATCH, Scope.STOP} if request.allow_stop else {Scope.WATCH}
    return SessionTokenOrder(
        Reach(key.project_id, key.session_id, frozenset(scopes)), ttl or session_tokens.DEFAULT_TTL
    )


@dataclass(frozen=True, slots=True)
class WatchQuery:
    key: SessionKey
    after_seq: int
    turn_id: str
    # The epoch of after_seq's event; NO_EPOCH when the client did not say.
    epoch: int = core.NO_EPOCH


def watch(request: pb.WatchSessionRequest) -> WatchQuery:
    check = Checker()
    key = check.session("session", request.HasField("session"), request.session)
    if request.after_seq < 0:
        check.fail("after_seq", "must be 0 (start with a snapshot) or the last seq seen")
    if request.epoch < 0:
        check.fail("epoch", "must be 0 (not given) or the epoch of the last event seen")
    turn_id = check.identifier("turn_id", request.turn_id, required=False)
    check.done()
    return WatchQuery(key, request.after_seq, turn_id, request.epoch)


def get_session(request: pb.GetSessionRequest) -> SessionKey:
    check = Checker()
    key = check.session("session", request.HasField("session"), request.session)
    check.done()
    return key


def get_turn(request: pb.GetTurnRequest) -> tuple[SessionKey, str]:
    check = Checker()
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
    check = Checker()
    key = check.session("session", request.HasField("session"), request.session)
    size = check.page_size(request.page_size)
    before = check.page_token(request.page_token, "ListTurns", page_tokens.turns_page_position)
    check.done()
    return TurnsPage(key, size, before)


@dataclass(frozen=True, slots=True)
class ActiveSessionsPage:
    project_id: str
    size: int
    after: tuple[int, str] | None


def list_active_sessions(request: pb.ListActiveSessionsRequest) -> ActiveSessionsPage:
    return ActiveSessionsPage(*_project_page(request, "ListActiveSessions", page_tokens.active_page_position))


@dataclass(frozen=True, slots=True)
class SessionsPage:
    project_id: str
    size: int
    before: tuple[int, str] | None


def list_sessions(request: pb.ListSessionsRequest) -> SessionsPage:
    return SessionsPage(*_project_page(request, "ListSessions", page_tokens.sessions_page_position))


def _project_page(
    request: pb.ListActiveSessionsRequest | pb.ListSessionsRequest,
    rpc: str,
    position: Callable[[str], tuple[int, str] | None],
) -> tuple[str, int, tuple[int, str] | None]:
    """A page of a project's sessions: the project, the page's size and where it starts."""
    check = Checker()
    project_id = check.identifier("project_id", request.project_id)
    size = check.page_size(request.page_size)
    at = check.page_token(request.page_token, rpc, position)
    check.done()
    return project_id, size, at


@dataclass(frozen=True, slots=True)
class ProjectsPage:
    size: int
    after: str | None


def list_projects(request: pb.ListProjectsRequest) -> ProjectsPage:
    check = Checker()
    size = check.page_size(request.page_size)
    after = check.page_token(request.page_token, "ListProjects", page_tokens.projects_page_position)
    check.done()
    return ProjectsPage(size, after)
