// The project's busy sessions, earliest deadline first as the service orders them (what
// `turngate sessions busy` shows), polled: one cheap call instead of a watch per session.

import { listActiveSessions } from "./api.js";
import { el, errorText, replace, table } from "./dom.js";
import { href } from "./route.js";
import { badge, toned } from "./status.js";
import { moment } from "./time.js";

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
      paused ? toned("QUEUE PAUSED", "phase-paused") : toned("QUEUED", "phase-waiting"),
      head.runnerId || "—",
      "—",
      head.expiresAt ? moment(head.expiresAt) : "—",
      String(queue.length),
      paused || "—",
    ];
  }
  return [
    el("a", { href: href({ project, session }) }, session),
    link(active.turnId),
    badge(active.phase, "TURN_PHASE_"),
    active.runnerId,
    moment(active.admittedAt),
    moment(active.stopDeadline || active.leaseExpiresAt),
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
      // Rebuilt only when something changed (a heartbeat moves a deadline), and the link that had
      // the keyboard's focus has it again.
      if (fingerprint !== shown) {
        shown = fingerprint;
        const focused = slot.contains(document.activeElement) ? document.activeElement.getAttribute("href") : null;
        replace(slot, sessions.length
          ? table(`Sessions with an active turn or a waiting queue, earliest deadline first`,
            ["Session", "Turn", "Phase", "Runner", "Admitted", "Deadline", "Queued", "Queue paused by"],
            sessions.map((snapshot) => row(project, snapshot)))
          : el("p", { className: "empty" }, `No session of project ${project} has an active turn or a waiting `
            + "queue. Sessions appear here within 2 s of a runner's admission. To look at one that is idle, "
            + "type its name in Session above; a mistyped project reads exactly like this."),
        answer.nextPageToken ? el("p", {}, "More sessions are busy than shown (the first 100).") : "");
        const again = focused && [...slot.querySelectorAll("a")].find((link) => link.getAttribute("href") === focused);
        if (again) again.focus();
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
