"""turngate's Python SDK: runners, gateways and watchers over one channel.

    from turngate.client import Client, Cancelled, Mismatch, Idle

    async with Client("127.0.0.1:50051", "my-project") as client:
        async with client.runner("runner-1").turn("chat-42", "turn-7") as turn:
            ...                                   # heartbeats and Stop handled for you
        match await client.gateway().stop("chat-42", expected_turn_id="turn-7"):
            case Cancelled() | Mismatch() | Idle(): ...
        async with client.watch("chat-42") as events:
            async for event in events: ...        # resumes after a disconnect, no gap

`client.runner(id).turn(...)` admits a turn (refusals are `AdmissionRefused`), renews its lease,
learns of a Stop at once (`turn.stop_requested`) and reports one outcome when the block ends;
`client.gateway()` stops turns, resolves interactions and runs the queue; `client.watch` and
the reads return frozen dataclasses (`turngate.client.models`) and IntEnums
(`turngate.client.enums`), never protobuf; errors are `TurngateError`s in families
(`Refused`, `ServiceUnavailable`, `WriteOutcomeUnknown`, …); `turngate.client.sync` is the same
API for code that is not async.

The guide and the whole reference: docs/sdk.md in the turngate repository.
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
