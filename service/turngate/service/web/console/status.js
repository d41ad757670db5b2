// Phases and outcomes as badges: the enum's name as text (colour is never the only sign) and a
// tone class that gives it its colour from console.css's palette. Phases (still going) are
// outlined: phase-running, phase-stopping, phase-waiting, phase-paused, phase-idle; outcomes (ended)
// are filled: outcome-succeeded, outcome-failed, outcome-interrupted, outcome-lost, outcome-skipped.

import { el, enumName } from "./dom.js";

const TONES = {
  SESSION_PHASE_: { IDLE: "phase-idle", RUNNING: "phase-running", STOPPING: "phase-stopping" },
  TURN_PHASE_: { RUNNING: "phase-running", STOPPING: "phase-stopping", QUEUED: "phase-waiting", SETTLED: "phase-idle" },
  TURN_OUTCOME_: {
    COMPLETED: "outcome-succeeded",
    FAILED: "outcome-failed",
    CANCELLED: "outcome-interrupted",
    LOST: "outcome-lost",  // its lease ran out: the runner went silent
    EXPIRED: "outcome-skipped",  // waited in the queue too long: never ran
  },
  TOOL_CALL_STATUS_: {
    OPEN: "phase-running", SUCCEEDED: "outcome-succeeded", FAILED: "outcome-failed", INTERRUPTED: "outcome-interrupted",
  },
  INTERACTION_STATUS_: { PENDING: "phase-waiting", RESOLVED: "outcome-succeeded", CANCELLED: "outcome-interrupted" },
  STEER_STATUS_: {
    PENDING: "phase-waiting",
    CONSUMED: "outcome-succeeded",
    DECLINED: "outcome-skipped",
    UNCONSUMED: "outcome-skipped",
    EXPIRED: "outcome-skipped",
  },
};

// The tone class of an enum value ("TURN_OUTCOME_CANCELLED" or "CANCELLED") of the enum `prefix`.
export function tone(value, prefix) {
  return (TONES[prefix] || {})[enumName(value, prefix)] || "phase-idle";
}

// A badge for an enum value; "" for an absent (zero) one.
export function badge(value, prefix) {
  const name = enumName(value, prefix);
  return name ? toned(name, tone(name, prefix)) : "";
}

// A badge with words of its own ("QUEUE PAUSED") in a tone of the palette.
export function toned(words, toneClass) {
  return el("span", { className: `badge ${toneClass}`, "data-status": words }, words);
}
