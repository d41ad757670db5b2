// One session, live: its state, Stop and Steer for its running turn, its queue and the timeline
// of its events. Resumes after a reload from the history kept in sessionStorage, and after a lost
// connection with the cursor.

import { el, enumName, replace } from "./dom.js";
import { earlierTurns } from "./earlier.js";
import { eventRow } from "./events.js";
import * as history from "./history.js";
import { href } from "./route.js";
import { queueControl } from "./queue.js";
import { runningTurn } from "./running.js";
import { apply, initial, readQueue } from "./session-state.js";
import { badge } from "./status.js";
import { steerControl } from "./steer.js";
import { stopControl } from "./stop.js";
import { follow } from "./watch.js";

function turnState(state, where) {
  const shown = state.active || state.lastSettled;
  const node = el("p", { id: "turn-state", "data-turn": shown ? shown.turnId : "",
    "data-phase": shown ? enumName(shown.phase, "TURN_PHASE_") : "IDLE" });
  if (!shown && state.neverSeen) {
    return replace(node, `Never seen: no event of ${where.session} in project ${where.project} `
      + "(a mistyped session or project reads exactly like this).");
  }
  if (!shown) {
    return replace(node, "No turn yet: the session is idle. A runner's first turn shows here as it is admitted.");
  }
  const settled = shown.outcome ? [" · ", badge(shown.outcome, "TURN_OUTCOME_"), " by ",
    enumName(shown.settledBy, "SETTLED_BY_")] : [];
  return replace(node, "Turn ", el("a", { href: href({ ...where, turn: shown.turnId }) }, shown.turnId), " ",
    badge(shown.phase, "TURN_PHASE_"), settled, " · runner ", shown.runnerId,
    state.queue.length ? ` · ${state.queue.length} queued` : "");
}

export function showTimeline(root, where, tokenInput) {
  const { project, session } = where;
  const kept = history.load(project, session);
  let state = { ...initial(), ...kept.state };
  const status = el("p", { id: "watch-status", role: "status" }, "connecting");
  const stateSlot = el("div", {});
  const stop = stopControl(project, session, tokenInput);
  const steer = steerControl(project, session, tokenInput);
  const running = runningTurn(project, session);

  const show = () => {
    replace(stateSlot, turnState(state, where));
    running.show(state.active);
    stop.show(state.active);
    steer.show(state.active);
    queue.show(state);
  };
  const keep = (next) => {
    state = next;
    kept.state = state;
    history.save(project, session, kept);
    show();
  };
  const queue = queueControl(where, tokenInput, (read, version) => keep(readQueue(state, read, version)));
  const timeline = el("ol", { id: "timeline", role: "log", "aria-live": "polite", "aria-label": "Session events" });

  replace(root,
    el("h2", {}, `Session ${session}`),
    el("p", {}, el("a", { href: href({ project }) }, `Busy sessions of ${project}`)),
    status,
    el("section", { "aria-label": "Current turn" }, stateSlot, running.nodes, stop.nodes, steer.nodes),
    el("section", { "aria-label": "Queue" }, queue.nodes),
    el("section", { "aria-label": "Earlier turns" }, earlierTurns(where)),
    el("h3", {}, "Timeline"),
    timeline);

  // A row shows its date where the day changes (and on the first row, by console.css).
  const add = (event) => {
    const row = eventRow(event, where);
    const before = timeline.lastElementChild;
    if (before && before.dataset.day !== row.dataset.day) row.classList.add("new-day");
    timeline.append(row);
  };
  for (const event of kept.events) add(event);
  show();

  const unfollow = follow(project, session, kept.cursor, (event) => {
    kept.events.push(event);
    keep(apply(state, event));
    running.event(event);
    add(event);
    while (timeline.children.length > kept.events.length) timeline.firstElementChild.remove();
  }, (text, live) => {
    status.dataset.live = live ? "yes" : "no";
    replace(status, `Watch: ${text}`);
  });
  return () => {
    unfollow();
    running.leave();
  };
}
