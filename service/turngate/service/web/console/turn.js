// One turn's detail (GetTurn): its record, the waterfall of its tool calls and interactions, each
// with its end state, its error and trace.

import { getTurn } from "./api.js";
import { el, enumName, errorText, fields, replace, table } from "./dom.js";
import { href } from "./route.js";
import { badge } from "./status.js";
import { clock, live, moment } from "./time.js";
import { traceLink } from "./trace.js";
import { waterfall } from "./waterfall.js";

// The waterfall, growing every second while the turn is unsettled (until the next Refresh).
function timing(turn) {
  const slot = el("div", { className: "timing" });
  if (turn.settledAt) return replace(slot, waterfall(turn, Date.now()));
  live(slot, (now) => replace(slot, waterfall(turn, now)));
  return slot;
}

function detail(turn) {
  const calls = (turn.toolCalls || []).map((call) => [call.callId, call.name,
    badge(call.status, "TOOL_CALL_STATUS_"), clock(call.openedAt), clock(call.closedAt), call.error || ""]);
  const asked = (turn.interactions || []).map((item) => [item.interactionId, item.kind,
    badge(item.status, "INTERACTION_STATUS_"), clock(item.openedAt), clock(item.closedAt), item.resolution || ""]);
  return [
    fields([
      ["Phase", badge(turn.phase, "TURN_PHASE_")],
      ["Outcome", badge(turn.outcome, "TURN_OUTCOME_")],
      ["Settled by", enumName(turn.settledBy, "SETTLED_BY_")],
      ["Runner", turn.runnerId],
      ["Generation", turn.generation],
      ["Queued", moment(turn.queuedAt)],
      ["Admitted", moment(turn.admittedAt)],
      ["Lease expires", moment(turn.leaseExpiresAt)],
      ["Stop requested", turn.stopRequested ? "yes" : ""],
      ["Stop reason", turn.stopReason],
      ["Stop deadline", moment(turn.stopDeadline)],
      ["Settled", moment(turn.settledAt)],
      ["Error", turn.error ? el("span", { id: "turn-error" }, turn.error) : ""],
      ["Trace", turn.traceId ? traceLink(turn.traceId) : "none (its admission carried no trace context)"],
    ]),
    timing(turn),
    calls.length ? table("Tool calls", ["Call", "Name", "Status", "Opened", "Closed", "Error"], calls)
      : el("p", { className: "empty" }, "No tool calls: its runner recorded none."),
    asked.length ? table("Interactions", ["Interaction", "Kind", "Status", "Opened", "Closed", "Resolution"], asked)
      : el("p", { className: "empty" }, "No interactions: nothing in this turn waited for a person."),
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
