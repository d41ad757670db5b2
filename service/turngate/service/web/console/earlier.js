// The session's turns before the console opened it (ListTurns, then GetTurn for each one's tool
// calls, interactions and steers), oldest first above the live timeline, a page at a time:
// "Load earlier turns" reads the page before.

import { getTurn, listTurns } from "./api.js";
import { el, enumName, errorText, replace, time } from "./dom.js";
import { href } from "./route.js";

const PAGE = 10;

function calls(turn) {
  const items = [
    ...(turn.toolCalls || []).map((call) => `${call.name} (${call.callId}) ${enumName(call.status, "TOOL_CALL_STATUS_")}`),
    ...(turn.interactions || []).map((item) => `${item.kind} (${item.interactionId}) ${enumName(item.status, "INTERACTION_STATUS_")}`),
    ...(turn.steers || []).map((steer) => `steer ${steer.steerId} ${enumName(steer.status, "STEER_STATUS_")}`),
  ];
  return items.length ? el("ul", { className: "calls" }, items.map((text) => el("li", {}, text))) : "";
}

function row(where, turn) {
  const outcome = turn.outcome ? `${enumName(turn.outcome, "TURN_OUTCOME_")} by ${enumName(turn.settledBy, "SETTLED_BY_")}`
    : enumName(turn.phase, "TURN_PHASE_");
  return el("li", { "data-turn": turn.turnId },
    el("a", { href: href({ ...where, turn: turn.turnId }) }, turn.turnId), ` · ${outcome} · runner ${turn.runnerId} · `,
    turn.admittedAt ? ["admitted ", time(turn.admittedAt)] : "never ran",
    turn.settledAt ? [" · settled ", time(turn.settledAt)] : "", calls(turn));
}

export function earlierTurns(where) {
  const { project, session } = where;
  const list = el("ol", { id: "earlier", "aria-label": "Earlier turns, oldest first" });
  const more = el("button", { type: "button", id: "load-earlier", hidden: true }, "Load earlier turns");
  const report = el("p", { id: "earlier-status", role: "status" }, "reading the session's history…");
  let token = "";

  // A page of turns, newest first as ListTurns answers, each read whole, shown oldest first
  // above those already shown.
  async function load() {
    more.disabled = true;
    try {
      const page = await listTurns(project, session, PAGE, token);
      const turns = await Promise.all((page.turns || []).map((turn) => getTurn(project, session, turn.turnId)));
      list.prepend(...turns.reverse().map((turn) => row(where, turn)));
      token = page.nextPageToken || "";
      more.hidden = !token;
      replace(report, list.children.length ? "" : "No turn has run in this session yet.");
    } catch (error) {
      replace(report, `Could not read the session's history: ${errorText(error)}`);
    } finally {
      more.disabled = false;
    }
  }
  more.addEventListener("click", load);
  load();
  return [el("h3", {}, "Earlier turns"), more, list, report];
}
