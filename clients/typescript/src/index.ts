export * from "./gen/turngate/v1/turngate_pb.js";
export type { BadRequest, ErrorInfo, RetryInfo } from "./gen/google/rpc/error_details_pb.js";
export { DEFAULT_BACKOFF, type Backoff } from "./backoff.js";
export { Turngate } from "./client.js";
export { clearQueue, moveQueuedTurn, resolveInteraction, resumeQueue, type MoveOptions } from "./control.js";
export * from "./errors.js";
export { retrying, type RetryOptions, type WriteOptions } from "./retry.js";
export type { SessionKey } from "./session.js";
export {
  steerResult,
  steerTurn,
  type SteerMismatch,
  type SteerOptions,
  type SteerQueued,
  type SteerResult,
  type Steered,
} from "./steer.js";
export {
  stopResult,
  stopTurn,
  type Cancelled,
  type Idle,
  type Mismatch,
  type StopOptions,
  type StopResult,
} from "./stop.js";
export {
  bearerToken,
  createTurngateTransport,
  type TokenSource,
  type TransportOptions,
} from "./transport.js";
export { isResync, SessionWatch, watchSession, type Cursor, type WatchOptions } from "./watch.js";
