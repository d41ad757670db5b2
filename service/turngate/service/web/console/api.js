// The contract's calls the console makes, with the operator's token.

import { serverStream, unary } from "./connect.js";
import { token } from "./token.js";

const ref = (project, session) => ({ projectId: project, sessionId: session });

// An idempotency key (and a steer's id): one per click, kept across nothing but that call.
export function newId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return "console-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function listActiveSessions(project, signal) {
  return unary("SessionService", "ListActiveSessions", { projectId: project, pageSize: 100 },
    { token: token(), signal });
}

export function listSessions(project, pageSize, pageToken, signal) {
  return unary("SessionService", "ListSessions", { projectId: project, pageSize, pageToken },
    { token: token(), signal });
}

export function listProjects(pageSize, pageToken, signal) {
  return unary("SessionService", "ListProjects", { pageSize, pageToken }, { token: token(), signal });
}

export async function getSession(project, session) {
  const answer = await unary("SessionService", "GetSession", { session: ref(project, session) }, { token: token() });
  return answer.snapshot;
}

export async function getTurn(project, session, turnId, signal) {
  const answer = await unary("SessionService", "GetTurn", { session: ref(project, session), turnId },
    { token: token(), signal });
  return answer.turn;
}

export function listTurns(project, session, pageSize, pageToken) {
  return unary("SessionService", "ListTurns", { session: ref(project, session), pageSize, pageToken },
    { token: token() });
}

export function cancelTurn(project, session, expectedTurnId) {
  return unary("ControlService", "CancelTurn", {
    session: ref(project, session),
    expectedTurnId,
    reason: "stopped from the operator console",
    requestId: newId(),
  }, { token: token() });
}

export function steerTurn(project, session, expectedTurnId, content) {
  const steerId = newId();
  return unary("ControlService", "SteerTurn", {
    session: ref(project, session),
    expectedTurnId,
    steerId,
    content,
    requestId: steerId,
  }, { token: token() });
}

export function resumeQueue(project, session) {
  return unary("ControlService", "ResumeQueue", { session: ref(project, session), requestId: newId() },
    { token: token() });
}

export function clearQueue(project, session) {
  return unary("ControlService", "ClearQueue", {
    session: ref(project, session),
    reason: "cleared from the operator console",
    requestId: newId(),
  }, { token: token() });
}

// expectedQueueVersion is the int64 as protobuf's JSON carries it (a string).
export function moveQueuedTurn(project, session, turnId, expectedQueueVersion) {
  return unary("ControlService", "MoveQueuedTurn", {
    session: ref(project, session),
    turnId,
    expectedQueueVersion,
    requestId: newId(),
  }, { token: token() });
}

// int64 travels as a string in protobuf's JSON.
export function watchSession(project, session, cursor, signal) {
  return serverStream("SessionService", "WatchSession", {
    session: ref(project, session),
    afterSeq: String(cursor.seq),
    epoch: String(cursor.epoch),
  }, { token: token(), signal });
}

export async function consoleConfig() {
  try {
    const response = await fetch("/console/config.json");
    return response.ok ? await response.json() : {};
  } catch {
    return {};
  }
}
