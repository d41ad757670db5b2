// The session's turns before the console opened it (ListTurns, then GetTurn for each one's tool
// calls, interactions and steers), oldest first above the live timeline, a page at a time:
// "Load earlier turns" reads the page before. Each turn's tool calls and interactions are its
// waterfall as read (the running turn's grows in the current turn's section).

import { getTurn, listTurns } from "./api.js";
import { el, enumName, errorText, replace } from "./dom.js";
import { href } from "./route.js";
import { badge } from "./status.js";
import { moment } from "./time.js";
import { waterfall } from "./waterfall.js";

const PAGE = 10;

function steers(turn) {
  const items = (turn.steers || []).map((steer) => el("li", {}, `steer ${steer.steerId} `, badge(steer.status, "STEER_STATUS_")));
  return items.length ? el("ul", { className: "steers" }, items) : "";
}

function row(where, turn, readAt) {
  const outcome = turn.outcome ? [badge(turn.outcome, "TURN_OUTCOME_"), ` by ${enumName(turn.settledBy, "SETTLED_BY_")}`]
    : badge(turn.phase, "TURN_PHASE_");
  return el("li", { "data-turn": turn.turnId },
    el("a", { href: href({ ...where, turn: turn.turnId }) }, turn.turnId), " · ", outcome, ` · runner ${turn.runnerId} · `,
    turn.admittedAt ? ["admitted ", moment(turn.admittedAt)] : "never ran",
    turn.settledAt ? [" · settled ", moment(turn.settledAt)] : "", waterfall(turn, readAt), steers(turn));
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
      const readAt = Date.now();
      list.prepend(...turns.reverse().map((turn) => row(where, turn, readAt)));
      token = page.nextPageToken || "";
      more.hidden = !token;
      replace(report, list.children.length ? "" : "No turn has run in this session yet. Each turn a runner "
        + "starts here is kept with its outcome and tool calls, and shows here when the session is opened again.");
      report.classList.toggle("empty", !list.children.length);
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
