"""Who may call what: the RPC → roles table and the project check, before anything is read."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from google.protobuf.message import Message

from turngate.service.auth.principals import Principal, Reach, Role, Scope
from turngate.v1 import turngate_pb2 as pb

# The roles of each service's callers (docs/design.md §1.1: runner, gateway, client); admin may call anything.
_SERVICE_ROLES: Mapping[str, frozenset[Role]] = {
    "AdmissionService": frozenset({Role.RUNNER, Role.ADMIN}),
    "ControlService": frozenset({Role.GATEWAY, Role.ADMIN}),
    "SessionService": frozenset({Role.WATCHER, Role.GATEWAY, Role.ADMIN}),
}

# A runner may also follow its own session: the SDK's turn watches it to learn of a Stop at once
# (not a heartbeat later) and to receive answers to its interactions.
_RUNNER_READS = ("WatchSession", "GetSession", "GetTurn")

# Full gRPC method name ("/turngate.v1.AdmissionService/AdmitTurn") → the roles allowed to call it.
ROLES: Mapping[str, frozenset[Role]] = MappingProxyType(
    {
        f"/{service.full_name}/{method.name}": _SERVICE_ROLES[service.name]
        | ({Role.RUNNER} if method.name in _RUNNER_READS else set())
        for service in pb.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
)

_ADMIN_ONLY = frozenset({Role.ADMIN})

MINT = "/turngate.v1.ControlService/MintSessionToken"
CANCEL = "/turngate.v1.ControlService/CancelTurn"

# All a session token may call (on its one session), and the scope each call needs.
SCOPES: Mapping[str, Scope] = MappingProxyType(
    {
        **{
            f"/turngate.v1.SessionService/{name}": Scope.WATCH
            for name in ("WatchSession", "GetSession", "GetTurn", "ListTurns")
        },
        "/turngate.v1.ControlService/CancelTurn": Scope.STOP,
        # Clearing the queue is what a Stop with queue action CLEAR already does.
        "/turngate.v1.ControlService/ClearQueue": Scope.STOP,
    }
)

# Load balancers probe health without credentials; the schema (reflection) is no secret.
OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def is_open(method: str) -> bool:
    return method.startswith(OPEN_SERVICES)


def role_denial(principal: Principal, method: str) -> str | None:
    """Why `principal` may not call `method`, or None if it may (a method the table does not
    know is for admins only; a session token's principal is held to its scopes instead)."""
    if principal.reach is not None:
        return _scope_denial(principal.reach, method)
    allowed = ROLES.get(method, _ADMIN_ONLY)
    if principal.roles & allowed:
        return None
    roles = " or ".join(sorted(role.value for role in allowed - {Role.ADMIN})) or "admin"
    return f"principal {principal.name!r} lacks the role this call needs ({roles})"


def _scope_denial(reach: Reach, method: str) -> str | None:
    needed = SCOPES.get(method)
    if needed is None:
        return f"a session token may not call {method.rsplit('/', 1)[-1]}"
    if needed not in reach.scopes:
        return f"this session token lacks the scope this call needs ({needed})"
    return None


def project_denial(principal: Principal, request: Message) -> str | None:
    """Why `principal` may not act on the project `request` names (for a session token: the
    session), or None if it may. Checked before anything is read, so the answer is the same
    whether that session exists or not."""
    if principal.reach is not None:
        return _session_denial(principal.reach, request)
    project_id = project_of(request)
    if project_id is None or principal.may_act_on(project_id):
        return None
    return f"principal {principal.name!r} may not act on this project"


def _session_denial(reach: Reach, request: Message) -> str | None:
    session = getattr(request, "session", None)
    if isinstance(session, pb.SessionRef) and (session.project_id, session.session_id) == (
        reach.project_id,
        reach.session_id,
    ):
        return None
    return "this session token does not reach the session this request names"


def visible_projects(principal: Principal) -> frozenset[str] | None:
    """The projects whose sessions `principal` may list (ListProjects): those it may act on (None:
    every project). A session token never gets here: its scopes name no listing."""
    return principal.projects


def may_stop_others(principal: Principal) -> bool:
    """Whether `principal` may stop a turn another principal holds: whoever may send a Stop
    (CancelTurn). AdmitTurn(INTERRUPT) stops the active turn, so it asks the same of its caller
    when that turn is another's (the core decides whose turn it is: `_interrupt`)."""
    return role_denial(principal, CANCEL) is None


def may_mint(principal: Principal, project_id: str) -> bool:
    """Whether `principal` may mint session tokens for `project_id` (and so vouch for those it minted)."""
    return role_denial(principal, MINT) is None and principal.may_act_on(project_id)


def project_of(request: Any) -> str | None:
    """The project a turngate request acts on (None for a message that names none)."""
    fields = request.DESCRIPTOR.fields_by_name
    if "lease" in fields:
        return str(request.lease.session.project_id)
    if "session" in fields:
        return str(request.session.project_id)
    if "project_id" in fields:
        return str(request.project_id)
    return None
