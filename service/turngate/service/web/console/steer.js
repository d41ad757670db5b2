// The Steer box: SteerTurn naming the running turn the operator sees (so a turn that has just
// ended is never steered in its place), and what became of the steer, in words.

import { steerTurn } from "./api.js";
import { el, enumName, errorText, replace } from "./dom.js";
import { refusedForToken } from "./token.js";

const phase = (value) => enumName(value, "TURN_PHASE_");

// Where a mismatch says the named turn is: ended how, stopping, queued, or never seen.
function whereNamed(mismatch) {
  const outcome = enumName(mismatch.expectedOutcome, "TURN_OUTCOME_");
  if (outcome) return `it ended ${outcome}`;
  return mismatch.expectedPhase ? `it is ${phase(mismatch.expectedPhase)}` : "the session never saw it";
}

// [data-outcome, words] for a SteerTurnResponse.
export function describeSteer(answer) {
  if (answer.steered) {
    const s = answer.steered;
    return ["steered", `steered: ${s.steerId} reached ${s.turnId} as event #${s.seq}`
      + `${s.replayed ? " (sent before)" : ""}; its runner answers whether it took it`];
  }
  if (answer.mismatch) {
    const m = answer.mismatch;
    const holder = m.currentTurnId ? `${m.currentTurnId} is ${phase(m.currentPhase)}` : "no turn is active";
    return ["mismatch", `mismatch (${enumName(m.reason, "ERROR_REASON_")}): ${m.expectedTurnId} is not running `
      + `(${whereNamed(m)}) and ${holder}; nothing changed`];
  }
  const q = answer.queued || {};
  const turnId = q.turn ? q.turn.turnId : "";
  return ["queued", `queued: the steer became turn ${turnId}, `
    + (q.admitted ? "admitted at once" : `at position ${q.position} of ${q.queueDepth}`)];
}

// A text box and Send for the running turn (disabled without one), and the line that reports
// what became of each steer.
export function steerControl(project, session, tokenInput) {
  const field = el("textarea", { id: "steer-content", rows: 2, disabled: true });
  const label = el("label", { for: "steer-content" }, "Steer");
  const send = el("button", { type: "submit", id: "steer-send", disabled: true }, "Send");
  const form = el("form", { id: "steer-form", "aria-label": "Steer the running turn" }, label, field, send);
  const report = el("p", { id: "steer-outcome", role: "status" });
  let turnId = "";
  let sending = false;

  const enable = () => {
    field.disabled = !turnId;
    send.disabled = !turnId || sending;
  };

  form.addEventListener("submit", async (submitted) => {
    submitted.preventDefault();
    const content = field.value.trim();
    if (!content) {
      report.dataset.outcome = "empty";
      replace(report, "Type what the running turn should take into account, then Send.");
      field.focus();
      return;
    }
    const expected = turnId;
    sending = true;
    enable();
    replace(report, `steering ${expected}…`);
    try {
      const [kind, words] = describeSteer(await steerTurn(project, session, expected, content));
      report.dataset.outcome = kind;
      replace(report, words);
      if (kind !== "mismatch") field.value = "";
    } catch (error) {
      if (refusedForToken("Steer", error, report, tokenInput)) return;
      report.dataset.outcome = "error";
      replace(report, `Steer refused: ${errorText(error)}`);
    } finally {
      sending = false;
      enable();
    }
  });

  return {
    nodes: [form, report],
    // The session's active turn as the operator sees it: only a running one takes a steer.
    show(active) {
      turnId = active && active.phase === "TURN_PHASE_RUNNING" ? active.turnId : "";
      enable();
      replace(label, turnId ? `Steer turn ${turnId}`
        : active ? `Steer (${active.turnId} is stopping)` : "Steer (no turn is running)");
    },
  };
}
