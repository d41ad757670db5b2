/** The gateway's other writes, ResolveInteraction and ResumeQueue, retried as Stop is: with one
 * request id, so that a retry answers what the first attempt did (the interaction it resolved,
 * the turn it admitted). */
import type { Client } from "@connectrpc/connect";
import type {
  ControlService,
  ResolveInteractionResponse,
  ResumeQueueResponse,
} from "./gen/turngate/v1/turngate_pb.js";
import { newRequestId, retrying, type WriteOptions } from "./retry.js";
import type { SessionKey } from "./session.js";

/** Answers a pending interaction of the session's active turn; the first answer wins (a later one
 * is refused InteractionNotPending). */
export function resolveInteraction(
  control: Client<typeof ControlService>,
  session: SessionKey,
  interactionId: string,
  resolution: string,
  options: WriteOptions = {},
): Promise<ResolveInteractionResponse> {
  const request = { session, interactionId, resolution, requestId: options.requestId ?? newRequestId() };
  return retrying(() => control.resolveInteraction(request, { signal: options.signal }), {
    ...options,
    requestId: request.requestId,
  });
}

/** Un-pauses the session's queue: its head is admitted at once if no turn is active. */
export function resumeQueue(
  control: Client<typeof ControlService>,
  session: SessionKey,
  options: WriteOptions = {},
): Promise<ResumeQueueResponse> {
  const request = { session, requestId: options.requestId ?? newRequestId() };
  return retrying(() => control.resumeQueue(request, { signal: options.signal }), {
    ...options,
    requestId: request.requestId,
  });
}
