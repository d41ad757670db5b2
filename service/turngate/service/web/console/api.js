// The contract's calls the console makes, with the operator's token.

import { serverStream, unary } from "./connect.js";
import { token } from "./token.js";

const ref = (project, session) => ({ projectId: project, sessionId: session });

export function listActiveSessions(project, signal) {
  return unary("SessionService", "ListActiveSessions", { projectId: project, pageSize: 100 },
    { token: token(), signal });
}

export async function getTurn(project, session, turnId, signal) {
  const answer = await unary("SessionService", "GetTurn", { session: ref(project, session), turnId },
    { token: token(), signal });
  return answer.turn;
}

export function cancelTurn(project, session, expectedTurnId, requestId) {
  return unary("ControlService", "CancelTurn", {
    session: ref(project, session),
    expectedTurnId,
    reason: "stopped from the operator console",
    requestId,
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
