// The Stop button: CancelTurn naming the turn the operator sees, and what the Stop did, in words.

import { cancelTurn } from "./api.js";
import { el, enumName, errorText, replace } from "./dom.js";
import { moment } from "./time.js";
import { refusedForToken } from "./token.js";

const outcome = (value) => enumName(value, "TURN_OUTCOME_") || "unknown";
const phase = (value) => enumName(value, "TURN_PHASE_");

// [data-outcome, words] for a CancelTurnResponse, as `turngate stop` says it.
export function describeStop(answer) {
  if (answer.cancelled) {
    const c = answer.cancelled;
    if (c.beforeStart || c.queued) {
      const fate = c.queued ? "left the queue and will not run" : "will be refused if it starts";
      return ["nothing-running-stopped", [`nothing running was stopped: ${(c.cancelledTurnIds || []).join(", ")} ${fate}`,
        c.activeTurnId ? `; ${c.activeTurnId} is still running` : ""]];
    }
    const what = c.settled ? `${(c.cancelledTurnIds || []).join(", ")} settled CANCELLED at once`
      : `${c.stoppingTurnId} is stopping`;
    return ["cancelled", [`cancelled: ${what}`, c.stopDeadline ? ["; settled CANCELLED by ", moment(c.stopDeadline),
      " unless its runner ends it first"] : "",
    (c.cancelledInteractionIds || []).length ? `; cancelled interactions: ${c.cancelledInteractionIds.join(", ")}` : ""]];
  }
  if (answer.mismatch) {
    const m = answer.mismatch;
    return ["mismatch", [`mismatch: ${m.expectedTurnId} already ended (${outcome(m.expectedOutcome)}) and `
      + `${m.currentTurnId} is ${phase(m.currentPhase)}; nothing changed`]];
  }
  const idle = answer.idle || {};
  return ["idle", ["idle: nothing is running; nothing changed",
    idle.lastTurnId ? ` (last turn ${idle.lastTurnId}: ${outcome(idle.lastOutcome)})` : ""]];
}

// A Stop button for `turnId` (disabled without one) and the line that reports what it did.
export function stopControl(project, session, tokenInput) {
  const button = el("button", { type: "button", id: "stop", disabled: true }, "Stop");
  const report = el("p", { id: "stop-outcome", role: "status" });
  let turnId = "";
  // The turn the last Stop left stopping: "…is stopping" holds only until it ends.
  let stopping = "";

  button.addEventListener("click", async () => {
    const expected = turnId;
    button.disabled = true;
    replace(report, `stopping ${expected}…`);
    try {
      const answer = await cancelTurn(project, session, expected);
      const [kind, words] = describeStop(answer);
      report.dataset.outcome = kind;
      replace(report, words);
      stopping = kind === "cancelled" && answer.cancelled.stoppingTurnId || "";
    } catch (error) {
      if (refusedForToken("Stop", error, report, tokenInput)) return;
      report.dataset.outcome = "error";
      replace(report, `Stop refused: ${errorText(error)}`);
    } finally {
      button.disabled = !turnId;
    }
  });

  return {
    nodes: [button, report],
    // The session's active turn as the operator sees it: a running one is what a click names
    // as expected_turn_id; a stopping one was stopped already.
    show(active) {
      if (stopping && (!active || active.turnId !== stopping)) {
        report.dataset.outcome = "ended";
        replace(report, `${stopping} has ended: its settlement is on the timeline`);
        stopping = "";
      }
      turnId = active && active.phase === "TURN_PHASE_RUNNING" ? active.turnId : "";
      button.disabled = !turnId;
      replace(button, turnId ? `Stop turn ${turnId}`
        : active ? `Stop (${active.turnId} is stopping)` : "Stop (no turn is running)");
    },
  };
}
