/** The gateway's other writes, ResolveInteraction, ResumeQueue, ClearQueue and MoveQueuedTurn, retried as Stop
 * is: with one request id, so that a retry answers what the first attempt did (the interaction
 * it resolved, the turn it admitted, the turns it cancelled). */
import type { Client } from "@connectrpc/connect";
import type {
  ClearQueueResponse,
  ControlService,
  MoveQueuedTurnResponse,
  ResolveInteractionResponse,
  ResumeQueueResponse,
} from "./gen/turngate/v1/turngate_pb.js";
import { newRequestId, retrying, type WriteOptions } from "./retry.js";
import type { SessionKey } from "./session.js";

/** `send` with one request id (the caller's, or a new one) however often it is retried. */
function withOneRequestId<T>(options: WriteOptions, send: (requestId: string) => Promise<T>): Promise<T> {
  const requestId = options.requestId ?? newRequestId();
  return retrying(() => send(requestId), { ...options, requestId });
}

/** Answers a pending interaction of the session's active turn; the first answer wins (a later one
 * is refused InteractionNotPending). */
export function resolveInteraction(
  control: Client<typeof ControlService>,
  session: SessionKey,
  interactionId: string,
  resolution: string,
  options: WriteOptions = {},
): Promise<ResolveInteractionResponse> {
  return withOneRequestId(options, (requestId) =>
    control.resolveInteraction({ session, interactionId, resolution, requestId }, { signal: options.signal }),
  );
}

/** Un-pauses the session's queue: its head is admitted at once if no turn is active. */
export function resumeQueue(
  control: Client<typeof ControlService>,
  session: SessionKey,
  options: WriteOptions = {},
): Promise<ResumeQueueResponse> {
  return withOneRequestId(options, (requestId) =>
    control.resumeQueue({ session, requestId }, { signal: options.signal }),
  );
}

/** Cancels every turn waiting in the session's queue in one write, leaving the active turn
 * running (it never stops a turn promoted meanwhile) and the queue un-paused. */
export function clearQueue(
  control: Client<typeof ControlService>,
  session: SessionKey,
  reason = "",
  options: WriteOptions = {},
): Promise<ClearQueueResponse> {
  return withOneRequestId(options, (requestId) =>
    control.clearQueue({ session, reason, requestId }, { signal: options.signal }),
  );
}

export interface MoveOptions extends WriteOptions {
  /** Right after this queued turn; unset: to the head. */
  afterTurnId?: string;
  /** The queue's version as read (SessionSnapshot.queueVersion): refused QueueVersionMismatch if
   * the queue changed since (Q8); unset: unguarded. */
  expectedQueueVersion?: bigint;
}

/** Moves a queued turn to the head, or after another queued turn: the queue after it, with its
 * version. Refused QueueVersionMismatch when the queue is no longer at `expectedQueueVersion`,
 * TurnNotQueued when the turn is not waiting. */
export function moveQueuedTurn(
  control: Client<typeof ControlService>,
  session: SessionKey,
  turnId: string,
  options: MoveOptions = {},
): Promise<MoveQueuedTurnResponse> {
  const { afterTurnId = "", expectedQueueVersion } = options;
  return withOneRequestId(options, (requestId) =>
    control.moveQueuedTurn(
      { session, turnId, afterTurnId, expectedQueueVersion, requestId },
      { signal: options.signal },
    ),
  );
}
