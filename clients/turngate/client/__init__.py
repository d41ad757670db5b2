"""turngate's Python SDK: runners, gateways and watchers over one channel.

    from turngate.client import (
        AdmissionRefused, Cancelled, Client, Idle, Mismatch, SessionBusy, TurnSettled, ToolCallChanged,
    )

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
            print(turn.outcome)                           # TurnOutcome.COMPLETED
        except SessionBusy as busy:                       # another turn holds the session
            print(busy.active_turn_id, busy.retry_after)
        except AdmissionRefused as refused:               # every other refusal of admission
            print(refused.reason)                         # e.g. ErrorReason.TURN_CANCELLED

        # A gateway: a user's Stop, with a typed answer.
        gateway = client.gateway()
        match await gateway.stop("chat-42", expected_turn_id="turn-7", reason="user"):
            case Cancelled(stopping_turn_id=stopping): ...
            case Mismatch(current_turn_id=current): ...  # a late Stop: the next turn is untouched
            case Idle(): ...
        record = await gateway.stop_and_wait("chat-42", "turn-7", force_after=10.0)  # forced if need be

        # A watcher: never loses or repeats an event, reconnects by itself.
        async with client.watch("chat-42") as events:
            async for event in events:                    # Event(seq, time, session, body)
                match event.body:
                    case TurnSettled(turn=turn):
                        print(event.seq, turn.turn_id, turn.outcome.name, turn.settled_by.name)
                    case ToolCallChanged(tool_call=call):
                        print(event.seq, call.call_id, call.status.name)
                    case _:
                        print(event.seq, event.kind)

Types
-----
The SDK returns Python values, never protobuf messages (`turngate.client.models`,
`turngate.client.enums`): frozen dataclasses named and shaped as the contract's messages
(`TurnRecord`, `ToolCall`, `Interaction`, `SessionSnapshot`, `TurnLease`, `SessionRef`; the
watch's `Event` with a `body` that is one of `SessionSnapshot`, `TurnAdmitted`, `StopRequested`,
`ToolCallChanged`, `InteractionChanged`, `TurnSettled`, `TurnQueued`, `TurnDequeued`,
`QueuePaused`, `QueueResumed` or, for a kind added to the contract later, `UnknownEvent`; the
Stop answers `Cancelled | Mismatch | Idle`; `QueuedTurn`, `ResumedQueue`), with the contract's
field names. Times are aware UTC datetimes, durations float seconds, repeated fields tuples, an unset
message field (a snapshot without an active turn) None. Enums are IntEnums whose values are the
contract's numbers (`TurnOutcome.CANCELLED == turngate_pb2.TURN_OUTCOME_CANCELLED`): `SessionPhase`,
`TurnPhase`, `TurnOutcome`, `SettledBy`, `ToolCallStatus`, `InteractionStatus`, `AdmissionMode`,
`QueueAction`, `ErrorReason`;
`.name` is the contract's name without the prefix (`CANCELLED`), `.proto_name` with it
(`TURN_OUTCOME_CANCELLED`), and a number a newer service sends that this SDK does not know reads
as UNSPECIFIED. Every value built from a message keeps it as `raw` (repr=False, compare=False):
protobuf's JSON mapping of it, or fields this SDK does not know yet, are one step away.

API
---
`Client(target, project_id, *, token=None, credentials=None, channel_options=(), interceptors=(),
call_timeout=10.0, retry_for=30.0, backoff=Backoff(), tracer_provider=None)` owns one grpc.aio
channel (`ClientOptions` is the TypedDict of its keyword options, for wrappers). With
OpenTelemetry installed (`pip install 'turngate-client[otel]'`), every call is a client span,
child of the current span, carrying the W3C traceparent; without it nothing is traced.
`async with`, or `await client.close()`.

* `token`: a bearer token (`authorization: Bearer <token>`) sent on every call, watch streams
  included, over TLS or plaintext; ValueError unless printable ASCII without spaces.
  `credentials`: TLS, e.g. `tls_credentials(ca="ca.pem")`, or with a client certificate for
  mutual TLS `tls_credentials(ca="ca.pem", cert="me.pem", key="me.key")` (PEM bytes or file
  paths; the CA is gRPC's bundled public roots when None). Plaintext when None.

* `client.runner(runner_id) -> Runner`; `runner.turn(session_id, turn_id, *, lease_ttl=None)`
  is an async context manager yielding a `Turn`. Entering admits the turn inside a
  `turngate.turn` span (attributes `turngate.project_id`, `.session_id`, `.turn_id`,
  `.generation`, `.outcome`, `.settled_by`, `.refusal`), so AdmitTurn, Heartbeat and
  CompleteTurn are its children. A refusal raises an `AdmissionRefused` (`reason`,
  `active_turn_id`, `active_phase`, `active_lease_expires_at`, `retry_after` seconds,
  `settled_outcome`): `SessionBusy`, `TurnCancelled`, `TurnAlreadySettled` (`outcome`),
  `TurnOwnedByOtherRunner`, `TurnHeldByOtherPrincipal` or `AdmissionLimitExceeded`. While the
  body runs, the lease is renewed every `turn.heartbeat_interval` seconds (each heartbeat's
  deadline a quarter of the lease) and the turn watches its own events. Leaving reports
  exactly one outcome: CANCELLED when the body was cancelled or a Stop was requested, FAILED
  (with the exception's text) when an exception escaped (re-raised), COMPLETED otherwise;
  nothing when the turn was abandoned.
  `runner.turn(..., mode=AdmissionMode.ENQUEUE | INTERRUPT, expected_active_turn_id="",
  max_queue_wait=None, on_queued=None)`: while another turn holds the session the turn waits in
  its queue (INTERRUPT first stops the active turn, only if it is `expected_active_turn_id` when
  given, and waits at the head); entering returns once it is admitted, learned by push from a
  watch of the session, and `on_queued(QueuedTurn)` is called (synchronously) with its place when
  it is queued and whenever its `position` changes. The wait ends with a `LeftQueue`:
  `QueuedTurnCancelled` (a Stop named it; also a `TurnCancelled`), `QueuedTurnCleared` (a Stop
  cleared the queue) or `QueuedTurnExpired` (waited past `max_queue_wait`; also a
  `TurnAlreadySettled`); new refusals are `SessionQueueFull` (also a `LimitExceeded`),
  `SessionQueuePaused` (REJECT while turns wait in a paused queue) and `ActiveTurnMismatch`.
  `turn.waited` is how long it waited (None: it did not). The default mode, REJECT, is as above.
* `Turn`: `stop_requested` (asyncio.Event: a Stop reached the turn, by push or by heartbeat;
  also set when abandoned), `stop_reason`, `abandoned` (asyncio.Event: the turn is no longer
  this runner's; nothing more is written), `outcome` (`TurnOutcome`) / `settled` (`TurnRecord`)
  once known, `turn_id`, `generation`, `lease` (`TurnLease`), `heartbeat_interval`;
  `async with turn.tool_call(call_id, name):` records OPEN then SUCCEEDED, or FAILED when an
  exception escapes; a cancelled call is left open, so settlement closes it INTERRUPTED;
  `await turn.interaction(interaction_id, kind) -> str` opens a PENDING interaction and returns
  its resolution (raises `InteractionCancelled` if a Stop withdraws it, `TurnEnded` once the
  turn is over).
* `client.gateway() -> Gateway`: `await stop(session_id, *, expected_turn_id="", force=False,
  request_id=None, reason="", queue=QueueAction.PAUSE) -> Cancelled | Mismatch | Idle` (a queued
  turn named is removed from the queue, `Cancelled.queued`; `queue` is what the queue does after
  the stopped turn: PAUSE, CONTINUE, or CLEAR now, `Cancelled.cleared_turn_ids`);
  `await resume_queue(session_id) -> ResumedQueue` (admits the head of a paused queue if idle);
  `await clear_queue(session_id, *, reason="", request_id=None) -> Cancelled | None` (cancels
  every queued turn in one write, leaving the active one running);
  `await resolve_interaction(session_id, interaction_id, resolution, *, request_id=None) ->
  Interaction`;
  `await mint_session_token(session_id, *, ttl=None, allow_stop=False) -> SessionToken` (a
  short-lived token reaching only that session, to watch it and, with allow_stop, stop it: what a
  web page may hold; `token`, `expires_at`, `scopes` of `SessionTokenScope`);
  `await stop_and_wait(session_id, expected_turn_id, *, force_after, reason="", request_id=None,
  queue=QueueAction.PAUSE) -> TurnRecord | None`: Stop, wait up to `force_after` s for the turn
  to settle, then force it; returns the settled record (None if the turn had never been admitted,
  or was waiting in the queue).
* `client.watch(session_id, *, after_seq=0, turn_id="", epoch=0) -> Watch`: an async iterator
  (and async context manager) of `Event`s: a snapshot first when `after_seq` is 0, a snapshot
  with `resync=True` when the cursor could not be resumed (also when the service's store lost
  the session and started its log again: a new `Event.epoch`); reconnects after UNAVAILABLE, a
  cut-off for falling behind (RESOURCE_EXHAUSTED, limit `watch_buffer`) or a lost connection with
  backoff and jitter, resuming after `watch.cursor`, the last seq it yielded, in that event's
  epoch; over the watch-stream limits it raises LimitExceeded. A cursor kept elsewhere is the
  last event's (`epoch`, `seq`): pass both.
* Reads: `await client.get_session(session_id) -> SessionSnapshot` (with its `queue`, head
  first, `queue_paused` and `queue_paused_by`),
  `await client.get_turn(session_id, turn_id) -> TurnRecord`, `client.list_turns(session_id)`
  and `client.active_sessions()` (async iterators over pages).

Errors: every failed call raises a `TurngateError` (`code`, `reason`: an `ErrorReason`);
`ServiceUnavailable` once network blips (UNAVAILABLE, DEADLINE_EXCEEDED, contention, a draining
server's CANCELLED) outlast the retries, which use exponential backoff with jitter (a TLS handshake
that fails is one: the message says why), and send the same request each time: a write whose
outcome the service could not confirm (WRITE_OUTCOME_UNKNOWN) is answered by its retry with what it
did, and is a `WriteOutcomeUnknown` (a `ServiceUnavailable` that may have taken effect, with the
`request_id` to send again) if the retries run out. A refusal for one of the contract's reasons is
a `Refused`, in families: `AdmissionRefused` (above), `WriteRefused` (a runner's writes:
`TurnNotActive`, `TurnHeldByOtherPrincipal`), `ControlRefused` (a gateway's:
`InteractionNotPending`) and `LimitExceeded` (`limit`). `NotAuthenticated` (no token, or one the
service does not know) and `PermissionDenied` (the token's principal lacks the role or the project;
`TurnHeldByOtherPrincipal` when a runner enters or writes a turn admitted to another principal) are
never retried. Runner writes retry while the lease lasts; a fenced write (TURN_NOT_ACTIVE), a
heartbeat answered ABANDON, and a heartbeat or write refused UNAUTHENTICATED or PERMISSION_DENIED
are never retried and abandon the turn. A turn follows its own events with a watch, which needs the
watcher role (or gateway, admin): without it Stop arrives by heartbeat only, and `turn.interaction`
raises the watch's `PermissionDenied` without asking.

Synchronous code uses `turngate.client.sync.Client`: the same classes, methods and types, run on
an event loop in a background thread (`with client.runner(r).turn(s, t) as turn:`,
threading.Events).
"""

from turngate.client._version import __version__
from turngate.client.admission import OnQueued
from turngate.client.auth import tls_credentials
from turngate.client.client import Client, ClientOptions
from turngate.client.enums import (
    AdmissionMode,
    ErrorReason,
    InteractionStatus,
    QueueAction,
    SessionPhase,
    SessionTokenScope,
    SettledBy,
    ToolCallStatus,
    TurnOutcome,
    TurnPhase,
)
from turngate.client.errors import (
    ActiveTurnMismatch,
    AdmissionLimitExceeded,
    AdmissionRefused,
    ControlRefused,
    InteractionCancelled,
    InteractionNotPending,
    InvalidRequest,
    LeftQueue,
    LimitExceeded,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    QueuedTurnCancelled,
    QueuedTurnCleared,
    QueuedTurnExpired,
    Refused,
    ServiceUnavailable,
    SessionBusy,
    SessionQueueFull,
    SessionQueuePaused,
    TurnAlreadySettled,
    TurnCancelled,
    TurnEnded,
    TurngateError,
    TurnHeldByOtherPrincipal,
    TurnNotActive,
    TurnOwnedByOtherRunner,
    WriteOutcomeUnknown,
    WriteRefused,
)
from turngate.client.gateway import Gateway
from turngate.client.models import (
    Cancelled,
    Event,
    EventBody,
    Idle,
    Interaction,
    InteractionChanged,
    Mismatch,
    QueuedTurn,
    QueuePaused,
    QueueResumed,
    ResumedQueue,
    SessionRef,
    SessionSnapshot,
    SessionToken,
    StopRequested,
    StopResult,
    ToolCall,
    ToolCallChanged,
    TurnAdmitted,
    TurnDequeued,
    TurnLease,
    TurnQueued,
    TurnRecord,
    TurnSettled,
    UnknownEvent,
)
from turngate.client.retry import Backoff
from turngate.client.runner import Runner
from turngate.client.turn import Turn
from turngate.client.watch import Watch

__all__ = [
    "ActiveTurnMismatch",
    "AdmissionLimitExceeded",
    "AdmissionMode",
    "AdmissionRefused",
    "Backoff",
    "Cancelled",
    "Client",
    "ClientOptions",
    "ControlRefused",
    "ErrorReason",
    "Event",
    "EventBody",
    "Gateway",
    "Idle",
    "Interaction",
    "InteractionCancelled",
    "InteractionChanged",
    "InteractionNotPending",
    "InteractionStatus",
    "InvalidRequest",
    "LeftQueue",
    "LimitExceeded",
    "Mismatch",
    "NotAuthenticated",
    "NotFound",
    "OnQueued",
    "PermissionDenied",
    "QueueAction",
    "QueuePaused",
    "QueueResumed",
    "QueuedTurn",
    "QueuedTurnCancelled",
    "QueuedTurnCleared",
    "QueuedTurnExpired",
    "Refused",
    "ResumedQueue",
    "Runner",
    "ServiceUnavailable",
    "SessionBusy",
    "SessionPhase",
    "SessionQueueFull",
    "SessionQueuePaused",
    "SessionRef",
    "SessionSnapshot",
    "SessionToken",
    "SessionTokenScope",
    "SettledBy",
    "StopRequested",
    "StopResult",
    "ToolCall",
    "ToolCallChanged",
    "ToolCallStatus",
    "Turn",
    "TurnAdmitted",
    "TurnAlreadySettled",
    "TurnCancelled",
    "TurnDequeued",
    "TurnEnded",
    "TurnHeldByOtherPrincipal",
    "TurnLease",
    "TurnNotActive",
    "TurnOutcome",
    "TurnOwnedByOtherRunner",
    "TurnPhase",
    "TurnQueued",
    "TurnRecord",
    "TurnSettled",
    "TurngateError",
    "UnknownEvent",
    "Watch",
    "WriteOutcomeUnknown",
    "WriteRefused",
    "__version__",
    "tls_credentials",
]
