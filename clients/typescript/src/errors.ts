/**
 * Typed errors: every refusal of the service, read from the google.rpc details of a ConnectError
 * (the same details gRPC carries: ErrorInfo, RetryInfo, BadRequest and, for admissions,
 * AdmissionRefusal). The classes follow the Python SDK's (turngate.client.errors):
 *
 *     TurngateError
 *     ├── ServiceUnavailable (WriteOutcomeUnknown), InvalidRequest, NotFound, NotAuthenticated,
 *     │   PermissionDenied
 *     └── Refused (reason: an ErrorReason; admission: the AdmissionRefusal's fields, if any)
 *         ├── SessionBusy, TurnCancelled, TurnAlreadySettled, TurnOwnedByOtherRunner,
 *         │   TurnHeldByOtherPrincipal, TurnNotActive, InteractionNotPending,
 *         │   SessionQueuePaused, ActiveTurnMismatch, SteerNotFound, QueueVersionMismatch,
 *         │   TurnNotQueued
 *         └── LimitExceeded
 *             └── SessionQueueFull
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { durationMs, timestampDate } from "@bufbuild/protobuf/wkt";
import {
  BadRequestSchema,
  ErrorInfoSchema,
  RetryInfoSchema,
  type BadRequest,
  type ErrorInfo,
  type RetryInfo,
} from "./gen/google/rpc/error_details_pb.js";
import {
  AdmissionRefusalSchema,
  ErrorReason,
  TurnOutcome,
  TurnPhase,
  type AdmissionRefusal,
} from "./gen/turngate/v1/turngate_pb.js";

/** ErrorInfo.domain of the contract's refusals. */
export const DOMAIN = "turngate.v1";
/** ErrorInfo.reason of an UNAVAILABLE whose write may have taken effect (not a refusal). */
const WRITE_OUTCOME_UNKNOWN = "WRITE_OUTCOME_UNKNOWN";
/** The ErrorInfo `limit` of a watcher cut off for falling behind: resume, do not report. */
export const WATCH_BUFFER = "watch_buffer";
/** The setting that bounds a session's queue (SESSION_QUEUE_FULL's limit). */
export const MAX_QUEUE_DEPTH = "max_queue_depth";

/** The google.rpc details of a failed call, decoded. */
export interface ErrorDetails {
  errorInfo?: ErrorInfo;
  retryInfo?: RetryInfo;
  badRequest?: BadRequest;
  admissionRefusal?: AdmissionRefusal;
}

/** What an AdmitTurn refusal says about the turn in the way (its AdmissionRefusal detail). */
export interface AdmissionFields {
  activeTurnId: string;
  activePhase: TurnPhase;
  activeLeaseExpiresAt: Date | undefined;
  /** Milliseconds until the active turn's earliest deadline; undefined when there is none. */
  retryAfterMs: number | undefined;
  settledOutcome: TurnOutcome;
}

/** One field the service named as invalid (google.rpc.BadRequest). */
export interface FieldViolation {
  field: string;
  description: string;
}

/** A call failed. `code` is the status code; `cause` the ConnectError it was read from. */
export class TurngateError extends Error {
  override name = "TurngateError";
  readonly code: Code;
  readonly details: ErrorDetails;
  /** RetryInfo's delay in milliseconds, when the service sent one. */
  readonly retryAfterMs: number | undefined;
  override readonly cause: ConnectError;

  constructor(cause: ConnectError, details: ErrorDetails) {
    super(cause.rawMessage || Code[cause.code]);
    this.code = cause.code;
    this.details = details;
    this.cause = cause;
    const delay = details.retryInfo?.retryDelay;
    this.retryAfterMs = delay ? durationMs(delay) : undefined;
  }
}

/** UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED by a draining server, ABORTED without a reason (store
 * contention), or the network: nothing is known to have changed, the call may be sent again. */
export class ServiceUnavailable extends TurngateError {
  override name = "ServiceUnavailable";
}

/** A write that may have taken effect, or not: the service's store lost its reply (UNAVAILABLE
 * WRITE_OUTCOME_UNKNOWN), or an attempt passed its deadline while the service had it, and the
 * retries ran out before an answer came. Send the same request again (with `requestId`, where the
 * request has one) to learn what it did. Also a ServiceUnavailable, as before it existed. */
export class WriteOutcomeUnknown extends ServiceUnavailable {
  override name = "WriteOutcomeUnknown";
  /** The idempotency key to send again ("" for a request without one). */
  readonly requestId: string;

  constructor(cause: ConnectError, details: ErrorDetails, requestId = "") {
    super(cause, details);
    this.requestId = requestId;
  }
}

/** INVALID_ARGUMENT: the request broke the contract's input rules; nothing changed. */
export class InvalidRequest extends TurngateError {
  override name = "InvalidRequest";
  get violations(): FieldViolation[] {
    return (this.details.badRequest?.fieldViolations ?? []).map(({ field, description }) => ({
      field,
      description,
    }));
  }
}

/** NOT_FOUND: e.g. GetTurn of a turn that was never admitted nor queued. */
export class NotFound extends TurngateError {
  override name = "NotFound";
}

/** UNAUTHENTICATED: no bearer token, or one the service does not know. */
export class NotAuthenticated extends TurngateError {
  override name = "NotAuthenticated";
}

/** PERMISSION_DENIED: the token lacks the role the call needs, or may not act on the project. */
export class PermissionDenied extends TurngateError {
  override name = "PermissionDenied";
}

/** The service refused the request for one of the contract's reasons; nothing changed. `reason`
 * is UNSPECIFIED for a reason this client does not know (from a newer service): `reasonName`
 * is the name as sent. `admission` is set on AdmitTurn refusals. */
export class Refused extends TurngateError {
  override name = "Refused";
  readonly reason: ErrorReason;
  readonly reasonName: string;
  readonly admission: AdmissionFields | undefined;

  constructor(cause: ConnectError, details: ErrorDetails) {
    super(cause, details);
    this.reasonName = details.errorInfo?.reason ?? "";
    this.reason = reasonNamed(this.reasonName);
    this.admission = details.admissionRefusal && admissionFields(details.admissionRefusal);
  }

  /** ErrorInfo's metadata (e.g. `limit`, `activeTurnId`). */
  get metadata(): Record<string, string> {
    return this.details.errorInfo?.metadata ?? {};
  }
}

/** Admission refused: another turn holds the session (SESSION_TURN_IN_USE, or SESSION_STOPPING
 * while it winds down). Retry after `retryAfterMs` at the latest, or watch the session. */
export class SessionBusy extends Refused {
  override name = "SessionBusy";
  get stopping(): boolean {
    return this.reason === ErrorReason.SESSION_STOPPING;
  }
  /** The turn holding the session. */
  get activeTurnId(): string {
    return this.admission?.activeTurnId ?? this.metadata.activeTurnId ?? "";
  }
}

/** This turn was stopped before it started: never retry it. */
export class TurnCancelled extends Refused {
  override name = "TurnCancelled";
}

/** This turn already ran and settled: `outcome` is how it ended. */
export class TurnAlreadySettled extends Refused {
  override name = "TurnAlreadySettled";
  get outcome(): TurnOutcome {
    return this.admission?.settledOutcome ?? TurnOutcome.UNSPECIFIED;
  }
}

/** This turn is active under another runner id. */
export class TurnOwnedByOtherRunner extends Refused {
  override name = "TurnOwnedByOtherRunner";
}

/** PERMISSION_DENIED: the turn was admitted to another principal (on admission or on a write). */
export class TurnHeldByOtherPrincipal extends Refused {
  override name = "TurnHeldByOtherPrincipal";
}

/** A runner's write presented a lease that is no longer the active turn's: abandon the turn. */
export class TurnNotActive extends Refused {
  override name = "TurnNotActive";
}

/** ResolveInteraction: the interaction was already resolved, cancelled, or is unknown. */
export class InteractionNotPending extends Refused {
  override name = "InteractionNotPending";
}

/** REJECT admission refused: no turn is active but turns wait in a paused queue (no retry delay:
 * nothing changes until ResumeQueue). */
export class SessionQueuePaused extends Refused {
  override name = "SessionQueuePaused";
}

/** INTERRUPT admission refused: expected_active_turn_id is not the active turn; nothing changed. */
export class ActiveTurnMismatch extends Refused {
  override name = "ActiveTurnMismatch";
}

/** AcknowledgeSteer named no steer of the turn. */
export class SteerNotFound extends Refused {
  override name = "SteerNotFound";
}

/** MoveQueuedTurn: the queue changed since its expected version was read; read it again. */
export class QueueVersionMismatch extends Refused {
  override name = "QueueVersionMismatch";
}

/** MoveQueuedTurn named a turn that is not waiting in the queue. */
export class TurnNotQueued extends Refused {
  override name = "TurnNotQueued";
}

/** RESOURCE_EXHAUSTED: the limit named by `limit` was reached. */
export class LimitExceeded extends Refused {
  override name = "LimitExceeded";
  get limit(): string {
    return this.metadata.limit ?? "";
  }
}

/** ENQUEUE or INTERRUPT admission refused: the session's queue is full. */
export class SessionQueueFull extends LimitExceeded {
  override name = "SessionQueueFull";
  override get limit(): string {
    return MAX_QUEUE_DEPTH;
  }
}

type RefusedClass = new (cause: ConnectError, details: ErrorDetails) => Refused;

const REFUSALS: Partial<Record<ErrorReason, RefusedClass>> = {
  [ErrorReason.SESSION_TURN_IN_USE]: SessionBusy,
  [ErrorReason.SESSION_STOPPING]: SessionBusy,
  [ErrorReason.TURN_CANCELLED]: TurnCancelled,
  [ErrorReason.TURN_ALREADY_SETTLED]: TurnAlreadySettled,
  [ErrorReason.TURN_OWNED_BY_OTHER_RUNNER]: TurnOwnedByOtherRunner,
  [ErrorReason.TURN_NOT_ACTIVE]: TurnNotActive,
  [ErrorReason.INTERACTION_NOT_PENDING]: InteractionNotPending,
  [ErrorReason.LIMIT_EXCEEDED]: LimitExceeded,
  [ErrorReason.TURN_HELD_BY_OTHER_PRINCIPAL]: TurnHeldByOtherPrincipal,
  [ErrorReason.SESSION_QUEUE_FULL]: SessionQueueFull,
  [ErrorReason.SESSION_QUEUE_PAUSED]: SessionQueuePaused,
  [ErrorReason.ACTIVE_TURN_MISMATCH]: ActiveTurnMismatch,
  [ErrorReason.STEER_NOT_FOUND]: SteerNotFound,
  [ErrorReason.QUEUE_VERSION_MISMATCH]: QueueVersionMismatch,
  [ErrorReason.TURN_NOT_QUEUED]: TurnNotQueued,
};

const TRANSIENT = new Set([Code.Unavailable, Code.DeadlineExceeded, Code.Canceled]);

const BY_CODE: Partial<Record<Code, typeof TurngateError>> = {
  [Code.InvalidArgument]: InvalidRequest,
  [Code.NotFound]: NotFound,
  [Code.Unauthenticated]: NotAuthenticated,
  [Code.PermissionDenied]: PermissionDenied,
};

/** The typed error for anything a call threw (a ConnectError, or what the transport threw). */
export function toTurngateError(thrown: unknown): TurngateError {
  if (thrown instanceof TurngateError) {
    return thrown;
  }
  const error = ConnectError.from(thrown);
  const details = decodeDetails(error);
  const info = details.errorInfo?.domain === DOMAIN ? details.errorInfo : undefined;
  if (error.code === Code.Unavailable && info?.reason === WRITE_OUTCOME_UNKNOWN) {
    return new WriteOutcomeUnknown(error, details);
  }
  if (TRANSIENT.has(error.code) || (error.code === Code.Aborted && !info) || isNetworkFailure(error)) {
    return new ServiceUnavailable(error, details);
  }
  if (info) {
    const refused = REFUSALS[reasonNamed(info.reason)];
    if (refused) {
      return new refused(error, details);
    }
    // A reason added to the contract after this client was built; a PERMISSION_DENIED one stays
    // a PermissionDenied (below), as in the Python SDK.
    if (error.code !== Code.PermissionDenied) {
      return new Refused(error, details);
    }
  }
  return new (BY_CODE[error.code] ?? TurngateError)(error, details);
}

/** Whether a watch should reconnect from its cursor after this error: a blip, a restart or a
 * drain, or this watcher fell behind (LIMIT_EXCEEDED watch_buffer). The watch-stream limits (per
 * principal, per session) are refusals, reported. */
export function resumable(error: TurngateError): boolean {
  return (
    error instanceof ServiceUnavailable || (error instanceof LimitExceeded && error.limit === WATCH_BUFFER)
  );
}

/** Whether a call may be sent again as is. */
export function transient(error: TurngateError): boolean {
  return error instanceof ServiceUnavailable;
}

/** Whether a write that failed so may have taken effect: the service said so
 * (WRITE_OUTCOME_UNKNOWN), or the attempt's deadline passed while the service had it. */
export function mayHaveTakenEffect(error: TurngateError): boolean {
  return error instanceof WriteOutcomeUnknown || error.code === Code.DeadlineExceeded;
}

function decodeDetails(error: ConnectError): ErrorDetails {
  return {
    errorInfo: error.findDetails(ErrorInfoSchema)[0],
    retryInfo: error.findDetails(RetryInfoSchema)[0],
    badRequest: error.findDetails(BadRequestSchema)[0],
    admissionRefusal: error.findDetails(AdmissionRefusalSchema)[0],
  };
}

// fetch() rejects with a TypeError when the connection fails or drops; connect-web reports it as
// UNKNOWN with that TypeError as the cause (connect-node already says UNAVAILABLE).
function isNetworkFailure(error: ConnectError): boolean {
  return error.code === Code.Unknown && error.cause instanceof TypeError;
}

function reasonNamed(name: string): ErrorReason {
  const value = (ErrorReason as unknown as Record<string, ErrorReason | undefined>)[name];
  return typeof value === "number" ? value : ErrorReason.UNSPECIFIED;
}

function admissionFields(refusal: AdmissionRefusal): AdmissionFields {
  return {
    activeTurnId: refusal.activeTurnId,
    activePhase: refusal.activePhase,
    activeLeaseExpiresAt: refusal.activeLeaseExpiresAt && timestampDate(refusal.activeLeaseExpiresAt),
    retryAfterMs: refusal.retryAfter && durationMs(refusal.retryAfter),
    settledOutcome: refusal.settledOutcome,
  };
}
