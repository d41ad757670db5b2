// The project's busy sessions, earliest deadline first as the service orders them (what
// `turngate sessions busy` shows), polled: one cheap call instead of a watch per session.

import { listActiveSessions } from "./api.js";
import { el, enumName, errorText, replace, table, time } from "./dom.js";
import { href } from "./route.js";

const POLL_MS = 2000;

function row(project, snapshot) {
  const session = snapshot.session.sessionId;
  const queue = snapshot.queue || [];
  const link = (turnId) => el("a", { href: href({ project, session, turn: turnId }) }, turnId);
  const paused = snapshot.queuePausedBy || "";
  const active = snapshot.active;
  if (!active) {  // busy by its queue alone: what waits at its head, and until when
    const head = queue[0] || {};
    return [
      el("a", { href: href({ project, session }) }, session),
      head.turnId ? ["waiting: ", link(head.turnId)] : "—",
      paused ? "QUEUE PAUSED" : "QUEUED",
      head.runnerId || "—",
      "—",
      head.expiresAt ? time(head.expiresAt) : "—",
      String(queue.length),
      paused || "—",
    ];
  }
  return [
    el("a", { href: href({ project, session }) }, session),
    link(active.turnId),
    enumName(active.phase, "TURN_PHASE_"),
    active.runnerId,
    time(active.admittedAt),
    time(active.stopDeadline || active.leaseExpiresAt),
    String(queue.length || "—"),
    paused || "—",
  ];
}

export function showBusy(root, { project }) {
  const controller = new AbortController();
  const status = el("p", { id: "busy-status", role: "status" }, "loading…");
  const slot = el("div", { id: "busy" });
  replace(root, el("h2", {}, `Busy sessions of ${project}`), status, slot);
  let shown = "";
  let timer = 0;

  async function poll() {
    try {
      const answer = await listActiveSessions(project, controller.signal);
      const sessions = answer.sessions || [];
      const fingerprint = JSON.stringify(sessions);
      // Rebuilt only when something changed, so keyboard focus on a link survives a poll.
      if (fingerprint !== shown) {
        shown = fingerprint;
        replace(slot, sessions.length
          ? table(`Sessions with an active turn or a waiting queue, earliest deadline first`,
            ["Session", "Turn", "Phase", "Runner", "Admitted", "Deadline", "Queued", "Queue paused by"],
            sessions.map((snapshot) => row(project, snapshot)))
          : el("p", {}, `No session of project ${project} has an active turn.`),
        answer.nextPageToken ? el("p", {}, "More sessions are busy than shown (the first 100).") : "");
      }
      replace(status, `Updated ${new Date().toISOString().slice(11, 19)} UTC, every ${POLL_MS / 1000} s`);
    } catch (error) {
      if (controller.signal.aborted) return;
      replace(status, `Could not list sessions: ${errorText(error)}`);
    }
    if (!controller.signal.aborted) timer = setTimeout(poll, POLL_MS);
  }

  poll();
  return () => {
    controller.abort();
    clearTimeout(timer);
  };
}
