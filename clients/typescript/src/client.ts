/** One project's view of turngate: the generated clients of the three services, plus the watch
 * and Stop every client needs. */
import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { clearQueue, resolveInteraction, resumeQueue } from "./control.js";
import {
  AdmissionService,
  ControlService,
  SessionService,
  type ClearQueueResponse,
  type ResolveInteractionResponse,
  type ResumeQueueResponse,
} from "./gen/turngate/v1/turngate_pb.js";
import type { WriteOptions } from "./retry.js";
import type { SessionKey } from "./session.js";
import { stopTurn, type StopOptions, type StopResult } from "./stop.js";
import { watchSession, type SessionWatch, type WatchOptions } from "./watch.js";

export class Turngate {
  /** Runners: AdmitTurn, Heartbeat, RecordToolCall, RecordInteraction, CompleteTurn. */
  readonly admission: Client<typeof AdmissionService>;
  /** Gateways: CancelTurn (see `stop`), ResolveInteraction, ResumeQueue, ClearQueue (see their methods). */
  readonly control: Client<typeof ControlService>;
  /** Clients: WatchSession (see `watch`), GetSession, GetTurn, ListTurns, ListActiveSessions. */
  readonly sessions: Client<typeof SessionService>;

  constructor(
    transport: Transport,
    readonly projectId: string,
  ) {
    this.admission = createClient(AdmissionService, transport);
    this.control = createClient(ControlService, transport);
    this.sessions = createClient(SessionService, transport);
  }

  /** The session `sessionId` of this project. */
  session(sessionId: string): SessionKey {
    return { projectId: this.projectId, sessionId };
  }

  /** The session's events, resuming from its cursor after a disconnect (`SessionWatch`). */
  watch(sessionId: string, options?: WatchOptions): SessionWatch {
    return watchSession(this.sessions, this.session(sessionId), options);
  }

  /** Stops a turn of the session: what it did, as a `StopResult`. */
  stop(sessionId: string, options?: StopOptions): Promise<StopResult> {
    return stopTurn(this.control, this.session(sessionId), options);
  }

  /** Answers a pending interaction of the session's active turn (retried with one request id). */
  resolveInteraction(
    sessionId: string,
    interactionId: string,
    resolution: string,
    options?: WriteOptions,
  ): Promise<ResolveInteractionResponse> {
    return resolveInteraction(this.control, this.session(sessionId), interactionId, resolution, options);
  }

  /** Un-pauses the session's queue (retried with one request id). */
  resumeQueue(sessionId: string, options?: WriteOptions): Promise<ResumeQueueResponse> {
    return resumeQueue(this.control, this.session(sessionId), options);
  }

  /** Cancels every turn waiting in the session's queue, in one write (retried with one request id). */
  clearQueue(sessionId: string, reason?: string, options?: WriteOptions): Promise<ClearQueueResponse> {
    return clearQueue(this.control, this.session(sessionId), reason, options);
  }
}
