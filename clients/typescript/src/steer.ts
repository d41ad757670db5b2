/** Steer (ControlService.SteerTurn, docs/design.md §9) with its outcome as a discriminated union,
 * as Stop's: retried on blips with one steer id (and request id) so a retry answers what the
 * first attempt did. */
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { toTurngateError } from "./errors.js";
import {
  SteerFallback,
  type ControlService,
  type ErrorReason,
  type QueuedTurn,
  type SteerTurnResponse,
  type TurnOutcome,
  type TurnPhase,
} from "./gen/turngate/v1/turngate_pb.js";
import { newRequestId, retrying, type WriteOptions } from "./retry.js";
import type { SessionKey } from "./session.js";

/** The steer reached the running turn: its runner sees it as the event at `seq`. */
export interface Steered {
  outcome: "steered";
  turnId: string;
  steerId: string;
  /** The seq of its `turnSteered` event (int64: a bigint, as every seq). */
  seq: bigint;
  /** An earlier call sent it (S3). */
  replayed: boolean;
}

/** The expected turn is not running: nothing changed (S1). */
export interface SteerMismatch {
  outcome: "mismatch";
  expectedTurnId: string;
  /** ACTIVE_TURN_MISMATCH (another turn holds the session) or TURN_NOT_ACTIVE. */
  reason: ErrorReason;
  /** The turn that holds the session ("" if none), and its phase. */
  currentTurnId: string;
  currentPhase: TurnPhase;
  /** Where the expected turn is: STOPPING, QUEUED, SETTLED, or UNSPECIFIED for one never seen. */
  expectedPhase: TurnPhase;
  /** How the expected turn ended, if it did. */
  expectedOutcome: TurnOutcome;
}

/** The ENQUEUE fallback made the steer a turn of its own (turn id = steer id, S7). */
export interface SteerQueued {
  outcome: "queued";
  turn: QueuedTurn | undefined;
  /** Its 1-based place in the queue; 0 when admitted. */
  position: number;
  queueDepth: number;
  /** The session was idle: the turn was admitted at once. */
  admitted: boolean;
  /** An earlier call queued it (S3). */
  replayed: boolean;
}

/** What a steer did: switch on `outcome`. */
export type SteerResult = Steered | SteerMismatch | SteerQueued;

export interface SteerOptions extends WriteOptions {
  /** Names the steer (and the turn it becomes, S6, S7); one is made when unset. */
  steerId?: string;
  /** What kind of content; text/plain when unset. */
  contentType?: string;
  /** What happens when the expected turn is not running: REJECT (unset) or ENQUEUE. */
  fallback?: SteerFallback;
  /** Unconsumed when its turn ends: join the queue as a turn of its own (S6). */
  requeueUnconsumed?: boolean;
}

/** Sends `content` to `expectedTurnId` of `session`, which it reaches only while that turn runs.
 * Transient failures are retried with the same steer id and request id; the answer, or the typed
 * error, is the first attempt's to get through (a WriteOutcomeUnknown naming the request id). */
export async function steerTurn(
  control: Client<typeof ControlService>,
  session: SessionKey,
  expectedTurnId: string,
  content: string,
  options: SteerOptions = {},
): Promise<SteerResult> {
  const request = {
    session,
    expectedTurnId,
    steerId: options.steerId ?? newRequestId(),
    content,
    contentType: options.contentType ?? "",
    requestId: options.requestId ?? newRequestId(),
    fallback: options.fallback ?? SteerFallback.UNSPECIFIED,
    requeueUnconsumed: options.requeueUnconsumed ?? false,
  };
  const { signal } = options;
  const answer = await retrying(() => control.steerTurn(request, { signal }), {
    ...options,
    requestId: request.requestId,
  });
  return steerResult(answer);
}

/** The SteerResult of a SteerTurn answer. */
export function steerResult(response: SteerTurnResponse): SteerResult {
  const { outcome } = response;
  switch (outcome.case) {
    case "steered": {
      const { turnId, steerId, seq, replayed } = outcome.value;
      return { outcome: "steered", turnId, steerId, seq, replayed };
    }
    case "mismatch": {
      const m = outcome.value;
      return {
        outcome: "mismatch",
        expectedTurnId: m.expectedTurnId,
        reason: m.reason,
        currentTurnId: m.currentTurnId,
        currentPhase: m.currentPhase,
        expectedPhase: m.expectedPhase,
        expectedOutcome: m.expectedOutcome,
      };
    }
    case "queued": {
      const { turn, position, queueDepth, admitted, replayed } = outcome.value;
      return { outcome: "queued", turn, position, queueDepth, admitted, replayed };
    }
    case undefined:
      throw toTurngateError(
        new ConnectError("SteerTurn answered without an outcome (not the contract)", Code.Internal),
      );
  }
}
