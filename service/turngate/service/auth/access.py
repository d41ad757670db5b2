"""Who may call what: the RPC → roles table and the project check, before anything is read."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from google.protobuf.message import Message

from turngate.service.auth.principals import Principal, Role
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

# Load balancers probe health without credentials; the schema (reflection) is no secret.
OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def is_open(method: str) -> bool:
    return method.startswith(OPEN_SERVICES)


def role_denial(principal: Principal, method: str) -> str | None:
    """Why `principal` may not call `method`, or None if it may (a method the table does not
    know is for admins only)."""
    allowed = ROLES.get(method, _ADMIN_ONLY)
    if principal.roles & allowed:
        return None
    roles = " or ".join(sorted(role.value for role in allowed - {Role.ADMIN})) or "admin"
    return f"principal {principal.name!r} lacks the role this call needs ({roles})"


def project_denial(principal: Principal, request: Message) -> str | None:
    """Why `principal` may not act on the project `request` names, or None if it may."""
    project_id = project_of(request)
    if project_id is None or principal.may_act_on(project_id):
        return None
    return f"principal {principal.name!r} may not act on this project"


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
