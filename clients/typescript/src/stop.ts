/** Stop (ControlService.CancelTurn) with its outcome as a discriminated union, retried on blips
 * with one idempotency key so a retry changes nothing the first attempt did. */
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { toTurngateError } from "./errors.js";
import {
  QueueAction,
  type CancelTurnResponse,
  type ControlService,
  type TurnOutcome,
  type TurnPhase,
} from "./gen/turngate/v1/turngate_pb.js";
import { newRequestId, retrying, type WriteOptions } from "./retry.js";
import type { SessionKey } from "./session.js";

/** The Stop cancelled the expected turn (or, unguarded, the active one; or with QueueAction.CLEAR
 * on an idle session, the queued turns). */
export interface Cancelled {
  outcome: "cancelled";
  cancelledTurnIds: string[];
  /** The turn now STOPPING ("" when it settled at once or had not started). */
  stoppingTurnId: string;
  /** The turn settled CANCELLED at once (force). */
  settled: boolean;
  /** The turn was never admitted: it is refused TURN_CANCELLED when it arrives. */
  beforeStart: boolean;
  /** The turn was waiting in the queue: it left it CANCELLED. */
  queued: boolean;
  /** The queued turns cancelled by QueueAction.CLEAR. */
  clearedTurnIds: string[];
  cancelledInteractionIds: string[];
  /** When the service settles the stopping turn CANCELLED if its runner has not. */
  stopDeadline: Date | undefined;
  /** With beforeStart or queued: the turn that is active and runs on, untouched ("" if none). */
  activeTurnId: string;
  /** Whether a running turn was stopped (now stopping, or settled at once). False when the Stop
   * cancelled a turn that had not started or was queued: nothing running was stopped, and
   * `activeTurnId` (if any) goes on. Show "stopped" to a user only when this is true. */
  stoppedRunningTurn: boolean;
}

/** The expected turn already ended and another turn is active: nothing changed. */
export interface Mismatch {
  outcome: "mismatch";
  expectedTurnId: string;
  currentTurnId: string;
  currentPhase: TurnPhase;
  /** How the expected turn ended. */
  expectedOutcome: TurnOutcome;
}

/** Nothing is active: nothing changed. */
export interface Idle {
  outcome: "idle";
  expectedTurnId: string;
  /** How the expected turn ended, when known. */
  expectedOutcome: TurnOutcome;
  /** The session's last settled turn, when known. */
  lastTurnId: string;
  lastOutcome: TurnOutcome;
}

/** What a Stop did: switch on `outcome`. */
export type StopResult = Cancelled | Mismatch | Idle;

export interface StopOptions extends WriteOptions {
  /** The turn the user meant to stop; empty: whatever is active (unguarded). */
  expectedTurnId?: string;
  /** Shown to the runner and to watchers. */
  reason?: string;
  /** Settle the turn CANCELLED now instead of asking the runner to stop. */
  force?: boolean;
  /** What the session's queue does after the Stop; unset means PAUSE. */
  queue?: QueueAction;
}

/** Stops a turn of `session` (see StopOptions). Transient failures are retried with the same
 * request id; the answer, or the typed error, is the first attempt's to get through (a
 * WriteOutcomeUnknown when the retries ran out after one that may have taken effect). */
export async function stopTurn(
  control: Client<typeof ControlService>,
  session: SessionKey,
  options: StopOptions = {},
): Promise<StopResult> {
  const request = {
    session,
    expectedTurnId: options.expectedTurnId ?? "",
    reason: options.reason ?? "",
    force: options.force ?? false,
    requestId: options.requestId ?? newRequestId(),
    queue: options.queue ?? QueueAction.UNSPECIFIED,
  };
  const { signal } = options;
  const answer = await retrying(() => control.cancelTurn(request, { signal }), {
    ...options,
    requestId: request.requestId,
  });
  return stopResult(answer);
}

/** The StopResult of a CancelTurn answer. */
export function stopResult(response: CancelTurnResponse): StopResult {
  const { outcome } = response;
  switch (outcome.case) {
    case "cancelled": {
      const c = outcome.value;
      return {
        outcome: "cancelled",
        cancelledTurnIds: c.cancelledTurnIds,
        stoppingTurnId: c.stoppingTurnId,
        settled: c.settled,
        beforeStart: c.beforeStart,
        queued: c.queued,
        clearedTurnIds: c.clearedTurnIds,
        cancelledInteractionIds: c.cancelledInteractionIds,
        stopDeadline: c.stopDeadline && timestampDate(c.stopDeadline),
        activeTurnId: c.activeTurnId,
        stoppedRunningTurn: c.stoppingTurnId !== "" || c.settled,
      };
    }
    case "mismatch": {
      const { expectedTurnId, currentTurnId, currentPhase, expectedOutcome } = outcome.value;
      return { outcome: "mismatch", expectedTurnId, currentTurnId, currentPhase, expectedOutcome };
    }
    case "idle": {
      const { expectedTurnId, expectedOutcome, lastTurnId, lastOutcome } = outcome.value;
      return { outcome: "idle", expectedTurnId, expectedOutcome, lastTurnId, lastOutcome };
    }
    case undefined:
      throw toTurngateError(
        new ConnectError("CancelTurn answered without an outcome (not the contract)", Code.Internal),
      );
  }
}
