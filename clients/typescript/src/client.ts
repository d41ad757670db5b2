/** One project's view of turngate: the generated clients of the three services, plus the watch,
 * Stop and Steer every client needs. */
import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { clearQueue, moveQueuedTurn, resolveInteraction, resumeQueue, type MoveOptions } from "./control.js";
import {
  AdmissionService,
  ControlService,
  SessionService,
  type ClearQueueResponse,
  type MoveQueuedTurnResponse,
  type ResolveInteractionResponse,
  type ResumeQueueResponse,
} from "./gen/turngate/v1/turngate_pb.js";
import type { WriteOptions } from "./retry.js";
import type { SessionKey } from "./session.js";
import { steerTurn, type SteerOptions, type SteerResult } from "./steer.js";
import { stopTurn, type StopOptions, type StopResult } from "./stop.js";
import { watchSession, type SessionWatch, type WatchOptions } from "./watch.js";

export class Turngate {
  /** Runners: AdmitTurn, Heartbeat, RecordToolCall, RecordInteraction, AcknowledgeSteer, CompleteTurn. */
  readonly admission: Client<typeof AdmissionService>;
  /** Gateways: CancelTurn (see `stop`), SteerTurn (see `steer`), ResolveInteraction, ResumeQueue,
   * ClearQueue, MoveQueuedTurn (see their methods). */
  readonly control: Client<typeof ControlService>;
  /** Clients: WatchSession (see `watch`), GetSession, GetTurn, ListTurns, ListActiveSessions,
   * ListSessions (the project's sessions, the most recently active first), ListProjects. */
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

  /** Sends input to the session's running turn `expectedTurnId`: what became of it, as a
   * `SteerResult` (steered, mismatch, or queued by the ENQUEUE fallback). */
  steer(
    sessionId: string,
    expectedTurnId: string,
    content: string,
    options?: SteerOptions,
  ): Promise<SteerResult> {
    return steerTurn(this.control, this.session(sessionId), expectedTurnId, content, options);
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

  /** Moves a queued turn to the head (or after `options.afterTurnId`), guarded by the queue's
   * version when `options.expectedQueueVersion` is set (retried with one request id). */
  moveQueuedTurn(sessionId: string, turnId: string, options?: MoveOptions): Promise<MoveQueuedTurnResponse> {
    return moveQueuedTurn(this.control, this.session(sessionId), turnId, options);
  }
}
