// One timeline row per session event: its seq, time, kind and essentials, in words.

import { el, enumName } from "./dom.js";
import { href } from "./route.js";
import { badge, tone } from "./status.js";
import { clock, day, moment } from "./time.js";
import { traceLink } from "./trace.js";

const outcome = (value) => enumName(value, "TURN_OUTCOME_");
const list = (ids) => (ids && ids.length ? ids.join(", ") : "");
const detail = (label, value) => (value ? [` · ${label} `, value] : []);
// A steer's content as text, quoted; its type only when it is not plain text.
const content = (steer) => [el("q", { className: "content" }, steer.content || ""),
  steer.contentType && steer.contentType !== "text/plain" ? ` (${steer.contentType})` : ""];
const steerDetail = (steer) => (steer ? [` · from steer ${steer.steerId}: `, content(steer)] : []);

function describe(event, where) {
  const turn = (turnId) => el("a", { href: href({ ...where, turn: turnId }) }, turnId);
  if (event.snapshot) {
    const s = event.snapshot;
    return ["snapshot", [
      `session ${enumName(s.phase, "SESSION_PHASE_") || "IDLE"}`,
      ...detail("active", s.active && turn(s.active.turnId)),
      ...detail("last settled", s.lastSettled && turn(s.lastSettled.turnId)),
      ...detail("queued", (s.queue || []).length || ""),
      ...detail("queue paused by", s.queuePausedBy),
      s.resync ? " · resync: the events between the last one seen and this snapshot were not kept" : "",
    ]];
  }
  if (event.turnAdmitted) {
    const a = event.turnAdmitted;
    return ["turn admitted", [turn(a.turn.turnId), ...detail("runner", a.turn.runnerId),
      ...detail("generation", a.turn.generation), ...detail("from the queue after", a.fromQueue && (a.waited || "0s")),
      ...steerDetail(a.steer)]];
  }
  if (event.stopRequested) {
    const s = event.stopRequested;
    return ["stop requested", [turn(s.turnId), ...detail("reason", s.reason), ...detail("deadline", moment(s.deadline)),
      s.force ? " · forced" : "", s.beforeStart ? " · before it started" : ""]];
  }
  if (event.toolCall) {
    const c = event.toolCall.toolCall;
    return ["tool call", [el("span", { className: "name" }, c.name), ` (${c.callId}) `,
      badge(c.status, "TOOL_CALL_STATUS_"), " · turn ",
      turn(event.toolCall.turnId), ...detail("error", c.error)]];
  }
  if (event.interaction) {
    const i = event.interaction.interaction;
    return ["interaction", [el("span", { className: "name" }, i.kind), ` (${i.interactionId}) `,
      badge(i.status, "INTERACTION_STATUS_"), " · turn ",
      turn(event.interaction.turnId), ...detail("resolution", i.resolution)]];
  }
  if (event.turnSettled) {
    const s = event.turnSettled;
    return ["turn settled", [turn(s.turn.turnId), " ", badge(s.turn.outcome, "TURN_OUTCOME_"),
      " by ", enumName(s.turn.settledBy, "SETTLED_BY_"), ...detail("error", s.turn.error),
      ...detail("interrupted tool calls", list(s.interruptedToolCallIds)),
      ...detail("cancelled interactions", list(s.cancelledInteractionIds)),
      ...detail("trace", s.traceId && traceLink(s.traceId))]];
  }
  if (event.turnQueued) {
    const q = event.turnQueued;
    return ["turn queued", [turn(q.turn.turnId), ...detail("runner", q.turn.runnerId),
      ...detail("position", q.position), ...detail("expires", moment(q.turn.expiresAt)), ...steerDetail(q.turn.steer)]];
  }
  if (event.turnDequeued) {
    const d = event.turnDequeued;
    return ["turn left the queue", [d.turnId, " ", badge(d.outcome, "TURN_OUTCOME_"), ...detail("runner", d.runnerId),
      d.cleared ? " · cleared" : "", ...detail("reason", d.reason)]];
  }
  if (event.queuePaused) {
    return ["queue paused", ["by ", turn(event.queuePaused.turnId), ` (${outcome(event.queuePaused.outcome)})`]];
  }
  if (event.queueResumed) return ["queue resumed", ["paused by ", turn(event.queueResumed.turnId)]];
  if (event.turnSteered) {
    const s = event.turnSteered;
    return ["turn steered", [turn(s.turnId), ` · steer ${s.steer.steerId}: `, content(s.steer),
      ...detail("expires", moment(s.expiresAt))]];
  }
  if (event.steerEnded) {
    const e = event.steerEnded;
    return ["steer ended", [`steer ${e.steerId} `, badge(e.status, "STEER_STATUS_"),
      " · turn ", turn(e.turnId), e.requeued ? " · requeued as a turn of its own" : ""]];
  }
  if (event.queueReordered) {
    const r = event.queueReordered;
    return ["queue reordered", [`${r.movedTurnId} moved`, ...detail("queue now", list(r.turnIds))]];
  }
  return ["event", ["of a kind this console does not know"]];
}

const KINDS = ["snapshot", "turnAdmitted", "stopRequested", "toolCall", "interaction", "turnSettled",
  "turnQueued", "turnDequeued", "queuePaused", "queueResumed", "turnSteered", "steerEnded", "queueReordered"];

// The tone of the row's edge: the outcome or status it reports, or the phase it starts.
function rowTone(event) {
  if (event.turnSettled) return tone(event.turnSettled.turn.outcome, "TURN_OUTCOME_");
  if (event.turnDequeued) return tone(event.turnDequeued.outcome, "TURN_OUTCOME_");
  if (event.toolCall) return tone(event.toolCall.toolCall.status, "TOOL_CALL_STATUS_");
  if (event.interaction) return tone(event.interaction.interaction.status, "INTERACTION_STATUS_");
  if (event.steerEnded) return tone(event.steerEnded.status, "STEER_STATUS_");
  if (event.turnAdmitted) return "phase-running";
  if (event.stopRequested) return "phase-stopping";
  if (event.queuePaused) return "phase-paused";
  if (event.turnQueued || event.turnSteered) return "phase-waiting";
  return undefined;
}

// data-day is the event's UTC day: the timeline shows the date where it changes.
export function eventRow(event, where) {
  const [title, summary] = describe(event, where);
  const kind = KINDS.find((name) => name in event) || "unknown";
  return el("li", { "data-seq": event.seq || "0", "data-kind": kind, "data-day": day(event.time), className: rowTone(event) },
    el("span", { className: "seq" }, `#${event.seq || 0}`), " ", clock(event.time), " ",
    el("strong", {}, title), " ", summary);
}
