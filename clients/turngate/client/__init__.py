"""turngate's Python SDK: runners, gateways and watchers over one channel.

    from turngate.client import Cancelled, Client, Idle, Mismatch, SessionBusy

    async with Client("127.0.0.1:50051", "my-project") as client:

        # A runner: a turn is a context manager.
        runner = client.runner("runner-1")
        try:
            async with runner.turn("chat-42", "turn-7") as turn:
                for step in plan:
                    if turn.stop_requested.is_set():      # a Stop arrived (pushed in ms)
                        break                             # -> CANCELLED
                    async with turn.tool_call(step.id, step.tool):
                        await step.run()                  # OPEN, then SUCCEEDED or FAILED
                answer = await turn.interaction("ask-1", "approval")
                ...                                       # leaving normally -> COMPLETED
        except SessionBusy as busy:                       # another turn holds the session
            print(busy.active_turn_id, busy.retry_after)

        # A gateway: a user's Stop, with a typed answer.
        gateway = client.gateway()
        match await gateway.stop("chat-42", expected_turn_id="turn-7", reason="user"):
            case Cancelled(stopping_turn_id=stopping): ...
            case Mismatch(current_turn_id=current): ...  # a late Stop: the next turn is untouched
            case Idle(): ...
        record = await gateway.stop_and_wait("chat-42", "turn-7", force_after=10.0)  # forced if need be

        # A watcher: never loses or repeats an event, reconnects by itself.
        async with client.watch("chat-42") as events:
            async for event in events:                    # turngate.v1.SessionEvent
                print(event.seq, event.WhichOneof("kind"))

API
---
`Client(target, project_id, *, token=None, credentials=None, channel_options=(), interceptors=(),
call_timeout=10.0, retry_for=30.0, backoff=Backoff(), tracer_provider=None)` owns one grpc.aio
channel, traced by OpenTelemetry's gRPC client interceptors: every call is a client span, child
of the current span, and carries the W3C traceparent. `async with`, or `await client.close()`.

* `token`: a bearer token (`authorization: Bearer <token>`) sent on every call, watch streams
  included, over TLS or plaintext; ValueError unless printable ASCII without spaces.
  `credentials`: TLS, e.g. `tls_credentials(ca="ca.pem")`, or with a client certificate for
  mutual TLS `tls_credentials(ca="ca.pem", cert="me.pem", key="me.key")` (PEM bytes or file
  paths; the CA is gRPC's bundled public roots when None). Plaintext when None.

* `client.runner(runner_id) -> Runner`; `runner.turn(session_id, turn_id, *, lease_ttl=None)`
  is an async context manager yielding a `Turn`. Entering admits the turn inside a
  `turngate.turn` span (attributes `turngate.project_id`, `.session_id`, `.turn_id`,
  `.generation`, `.outcome`, `.settled_by`, `.refusal`), so AdmitTurn, Heartbeat and
  CompleteTurn are its children. A refusal raises `SessionBusy` (`active_turn_id`,
  `active_phase`, `retry_after` seconds), `TurnCancelled`, `TurnAlreadySettled` (`outcome`),
  `TurnOwnedByOtherRunner` or `TurnHeldByOtherPrincipal`. While the body runs, the lease is renewed every
  `turn.heartbeat_interval` seconds (each heartbeat's deadline a quarter of the lease) and the
  turn watches its own events. Leaving reports exactly one outcome: CANCELLED when the body was
  cancelled or a Stop was requested, FAILED (with the exception's text) when an exception
  escaped (re-raised), COMPLETED otherwise; nothing when the turn was abandoned.
* `Turn`: `stop_requested` (asyncio.Event: a Stop reached the turn, by push or by heartbeat;
  also set when abandoned), `stop_reason`, `abandoned` (asyncio.Event: the turn is no longer
  this runner's; nothing more is written), `outcome` / `settled` (once known), `turn_id`,
  `generation`, `lease`, `heartbeat_interval`;
  `async with turn.tool_call(call_id, name):` records OPEN then SUCCEEDED, or FAILED when an
  exception escapes; a cancelled call is left open, so settlement closes it INTERRUPTED;
  `await turn.interaction(interaction_id, kind) -> str` opens a PENDING interaction and returns
  its resolution (raises `InteractionCancelled` if a Stop withdraws it, `TurnEnded` once the
  turn is over).
* `client.gateway() -> Gateway`: `await stop(session_id, *, expected_turn_id="", force=False,
  request_id=None, reason="") -> Cancelled | Mismatch | Idle` (frozen dataclasses);
  `await resolve_interaction(session_id, interaction_id, resolution) -> pb.Interaction`;
  `await stop_and_wait(session_id, expected_turn_id, *, force_after, reason="", request_id=None)
  -> pb.TurnRecord | None`: Stop, wait up to `force_after` s for the turn to settle, then
  force it; returns the settled record (None if the turn had never been admitted).
* `client.watch(session_id, *, after_seq=0, turn_id="") -> Watch`: an async iterator (and
  async context manager) of `turngate.v1.SessionEvent` messages as sent by the service: a
  snapshot first when `after_seq` is 0, a snapshot with `resync=True` when the cursor could not
  be resumed; reconnects after UNAVAILABLE, a cut-off for falling behind (RESOURCE_EXHAUSTED,
  limit `watch_buffer`) or a lost connection with backoff and jitter, resuming after
  `watch.cursor`, the last seq it yielded; over the watch-stream limits it raises LimitExceeded.
* Reads: `await client.get_session(session_id)`, `await client.get_turn(session_id, turn_id)`,
  `client.list_turns(session_id)` and `client.active_sessions()` (async iterators over pages).

Errors: every failed call raises a `TurngateError` (`code`, `reason`); `ServiceUnavailable`
once network blips (UNAVAILABLE, DEADLINE_EXCEEDED, contention) outlast the retries, which use
exponential backoff with jitter (a TLS handshake that fails is one: the message says why).
`NotAuthenticated` (no token, or one the service does not know) and `PermissionDenied` (the
token's principal lacks the role or the project; `TurnHeldByOtherPrincipal` when a runner enters
or writes a turn admitted to another principal) are never retried. Runner writes retry while
the lease lasts; a fenced write (TURN_NOT_ACTIVE), a heartbeat answered ABANDON, and a heartbeat
or write refused UNAUTHENTICATED or PERMISSION_DENIED are never retried and abandon the turn.
A turn follows its own events with a watch, which needs the watcher role (or gateway, admin):
without it Stop arrives by heartbeat only, and `turn.interaction` raises the watch's
`PermissionDenied` without asking.

Synchronous code uses `turngate.client.sync.Client`, the same surface run on an event loop in a
background thread (`with client.runner(r).turn(s, t) as turn:`, threading.Events).
"""

from turngate.client.auth import tls_credentials
from turngate.client.client import Client
from turngate.client.errors import (
    InteractionCancelled,
    InteractionNotPending,
    InvalidRequest,
    LimitExceeded,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    ServiceUnavailable,
    SessionBusy,
    TurnAlreadySettled,
    TurnCancelled,
    TurnEnded,
    TurngateError,
    TurnHeldByOtherPrincipal,
    TurnNotActive,
    TurnOwnedByOtherRunner,
)
from turngate.client.gateway import Cancelled, Gateway, Idle, Mismatch, StopResult
from turngate.client.retry import Backoff
from turngate.client.runner import Runner
from turngate.client.turn import Turn
from turngate.client.watch import Watch

__all__ = [
    "Backoff",
    "Cancelled",
    "Client",
    "Gateway",
    "Idle",
    "InteractionCancelled",
    "InteractionNotPending",
    "InvalidRequest",
    "LimitExceeded",
    "Mismatch",
    "NotAuthenticated",
    "NotFound",
    "PermissionDenied",
    "Runner",
    "ServiceUnavailable",
    "SessionBusy",
    "StopResult",
    "Turn",
    "TurnAlreadySettled",
    "TurnCancelled",
    "TurnEnded",
    "TurnHeldByOtherPrincipal",
    "TurnNotActive",
    "TurnOwnedByOtherRunner",
    "TurngateError",
    "Watch",
    "tls_credentials",
]
