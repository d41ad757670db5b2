// One turn's detail (GetTurn): its record, tool calls with their end states, interactions, error
// and trace.

import { getTurn } from "./api.js";
import { el, enumName, errorText, fields, replace, table, time } from "./dom.js";
import { href } from "./route.js";
import { traceLink } from "./trace.js";

function detail(turn) {
  const calls = (turn.toolCalls || []).map((call) => [call.callId, call.name,
    enumName(call.status, "TOOL_CALL_STATUS_"), time(call.openedAt), time(call.closedAt), call.error || ""]);
  const asked = (turn.interactions || []).map((item) => [item.interactionId, item.kind,
    enumName(item.status, "INTERACTION_STATUS_"), time(item.openedAt), time(item.closedAt), item.resolution || ""]);
  return [
    fields([
      ["Phase", enumName(turn.phase, "TURN_PHASE_")],
      ["Outcome", enumName(turn.outcome, "TURN_OUTCOME_")],
      ["Settled by", enumName(turn.settledBy, "SETTLED_BY_")],
      ["Runner", turn.runnerId],
      ["Generation", turn.generation],
      ["Queued", time(turn.queuedAt)],
      ["Admitted", time(turn.admittedAt)],
      ["Lease expires", time(turn.leaseExpiresAt)],
      ["Stop requested", turn.stopRequested ? "yes" : ""],
      ["Stop reason", turn.stopReason],
      ["Stop deadline", time(turn.stopDeadline)],
      ["Settled", time(turn.settledAt)],
      ["Error", turn.error ? el("span", { id: "turn-error" }, turn.error) : ""],
      ["Trace", turn.traceId ? traceLink(turn.traceId) : "none (its admission carried no trace context)"],
    ]),
    calls.length ? table("Tool calls", ["Call", "Name", "Status", "Opened", "Closed", "Error"], calls)
      : el("p", {}, "No tool calls."),
    asked.length ? table("Interactions", ["Interaction", "Kind", "Status", "Opened", "Closed", "Resolution"], asked)
      : el("p", {}, "No interactions."),
  ];
}

export function showTurn(root, { project, session, turn: turnId }) {
  const controller = new AbortController();
  const body = el("div", { id: "turn-detail" }, "loading…");
  const refresh = el("button", { type: "button" }, "Refresh");
  replace(root,
    el("h2", {}, `Turn ${turnId}`),
    el("p", {}, el("a", { href: href({ project, session }) }, `Timeline of session ${session}`), " · ",
      el("a", { href: href({ project }) }, `Busy sessions of ${project}`)),
    refresh, body);

  async function load() {
    try {
      replace(body, detail(await getTurn(project, session, turnId, controller.signal)));
    } catch (error) {
      if (!controller.signal.aborted) replace(body, el("p", { role: "alert" }, `Could not read the turn: ${errorText(error)}`));
    }
  }
  refresh.addEventListener("click", load);
  load();
  return () => controller.abort();
}
