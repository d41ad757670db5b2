// One session, live: its state, a Stop button and the timeline of its events. Resumes after a
// reload from the history kept in sessionStorage, and after a lost connection with the cursor.

import { el, enumName, replace } from "./dom.js";
import { eventRow } from "./events.js";
import * as history from "./history.js";
import { href } from "./route.js";
import { apply, initial } from "./session-state.js";
import { stopControl } from "./stop.js";
import { follow } from "./watch.js";

function turnState(state, where) {
  const shown = state.active || state.lastSettled;
  const node = el("p", { id: "turn-state", "data-turn": shown ? shown.turnId : "",
    "data-phase": shown ? enumName(shown.phase, "TURN_PHASE_") : "IDLE" });
  if (!shown) return replace(node, "No turn yet: the session is idle.");
  const settled = shown.outcome ? [" · ", enumName(shown.outcome, "TURN_OUTCOME_"), " by ",
    enumName(shown.settledBy, "SETTLED_BY_")] : [];
  return replace(node, "Turn ", el("a", { href: href({ ...where, turn: shown.turnId }) }, shown.turnId), " ",
    el("strong", {}, enumName(shown.phase, "TURN_PHASE_")), settled, " · runner ", shown.runnerId,
    state.queued ? ` · ${state.queued} queued` : "");
}

export function showTimeline(root, where, tokenInput) {
  const { project, session } = where;
  const kept = history.load(project, session);
  let state = kept.state || initial();
  const status = el("p", { id: "watch-status", role: "status" }, "connecting");
  const stateSlot = el("div", {});
  const stop = stopControl(project, session, tokenInput);
  const timeline = el("ol", { id: "timeline", role: "log", "aria-live": "polite", "aria-label": "Session events" });

  replace(root,
    el("h2", {}, `Session ${session}`),
    el("p", {}, el("a", { href: href({ project }) }, `Busy sessions of ${project}`)),
    status,
    el("section", { "aria-label": "Current turn" }, stateSlot, stop.nodes),
    el("h3", {}, "Timeline"),
    timeline);

  const show = () => {
    replace(stateSlot, turnState(state, where));
    stop.show(state.active);
  };
  for (const event of kept.events) timeline.append(eventRow(event, where));
  show();

  return follow(project, session, kept.cursor, (event) => {
    state = apply(state, event);
    kept.events.push(event);
    kept.state = state;
    history.save(project, session, kept);
    timeline.append(eventRow(event, where));
    while (timeline.children.length > kept.events.length) timeline.firstElementChild.remove();
    show();
  }, (text, live) => {
    status.dataset.live = live ? "yes" : "no";
    replace(status, `Watch: ${text}`);
  });
}
