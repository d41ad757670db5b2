// The session's queue, head first, each waiting turn with "Move to head" (MoveQueuedTurn guarded by
// the queue's version as last read, so a queue that changed meanwhile is read again, never
// reordered unseen) and "Cancel" (a Stop naming it: only that turn leaves, Q6); and for the whole
// queue "Resume" while a turn's end holds it paused, and "Clear" (ClearQueue: the running turn
// runs on). The same calls, and the same authorization, as `turngate queue` and `turngate stop`.

import { cancelTurn, clearQueue, getSession, moveQueuedTurn, resumeQueue } from "./api.js";
import { errorReason } from "./connect.js";
import { el, errorText, replace } from "./dom.js";
import { href } from "./route.js";
import { refusedForToken } from "./token.js";

// onRead(queue, queueVersion) takes the queue a move answered, or a read after a refused one.
export function queueControl(where, tokenInput, onRead) {
  const { project, session } = where;
  const list = el("ol", { id: "queue", "aria-label": "Queued turns, head first" });
  const report = el("p", { id: "queue-outcome", role: "status" });
  const actions = el("div", { id: "queue-actions" });
  let state = null;
  let busy = false;
  let shown = "";

  function entry(queued, index) {
    const button = el("button", { type: "button", className: "move-to-head", disabled: index === 0 || busy },
      index === 0 ? "At the head" : `Move ${queued.turnId} to head`);
    button.addEventListener("click", () => move(queued.turnId));
    const cancel = el("button", { type: "button", className: "cancel-queued", disabled: busy }, `Cancel ${queued.turnId}`);
    cancel.addEventListener("click", () => act(`Cancelling ${queued.turnId}`, async () => {
      const answer = await cancelTurn(project, session, queued.turnId);
      return answer.cancelled && answer.cancelled.queued
        ? ["cancelled", `${queued.turnId} left the queue and will not run`]
        : ["not-queued", `${queued.turnId} was no longer waiting: nothing changed`];
    }));
    return el("li", { "data-turn": queued.turnId },
      el("a", { href: href({ ...where, turn: queued.turnId }) }, queued.turnId), ` · runner ${queued.runnerId} `,
      queued.steer ? ["· steer ", el("q", { className: "content" }, queued.steer), " "] : "", button, " ", cancel);
  }

  // Resume while paused, Clear while anything waits.
  function whole() {
    const waiting = state.queue.length > 0;
    const resume = el("button", { type: "button", id: "resume-queue", disabled: busy || !(state.queuePaused && waiting) },
      state.queuePaused && waiting ? "Resume queue" : "Resume queue (not paused)");
    resume.addEventListener("click", () => act("Resuming the queue", async () => {
      const answer = await resumeQueue(project, session);
      return ["resumed", answer.admittedTurnId ? `resumed: ${answer.admittedTurnId} was admitted`
        : "resumed: the next turn runs when the session is free"];
    }));
    const clear = el("button", { type: "button", id: "clear-queue", disabled: busy || !waiting }, "Clear queue");
    clear.addEventListener("click", () => act("Clearing the queue", async () => {
      const answer = await clearQueue(project, session);
      const cleared = answer.clearedTurnIds || [];
      return ["cleared", cleared.length ? `cleared: ${cleared.join(", ")} will not run` : "the queue was empty already"];
    }));
    const paused = state.queuePaused && waiting ? el("p", { id: "queue-paused" }, "Paused: nothing is admitted from it until Resume.") : "";
    return [paused, el("p", { className: "queue-actions" }, resume, " ", clear)];
  }

  // Rebuilt only when something changed, so keyboard focus on a button survives other events.
  function render() {
    const fingerprint = JSON.stringify([state.queue, state.queuePaused, busy]);
    if (fingerprint === shown) return;
    shown = fingerprint;
    if (state.queue.length) replace(list, state.queue.map(entry));
    else {
      replace(list, el("li", { className: "empty" }, "No turn is waiting. A turn a runner asks for with the "
        + "ENQUEUE mode while another runs waits here, in order, with Move to head and Cancel."));
    }
    replace(actions, whole());
  }

  // After QUEUE_VERSION_MISMATCH: the queue as it is now, and [data-outcome, words].
  async function reread() {
    try {
      const snapshot = await getSession(project, session);
      onRead(snapshot.queue, snapshot.queueVersion);
      return ["queue-changed", "the queue changed, reloaded: nothing was moved; check it and move again"];
    } catch (error) {
      return ["error", `the queue changed; reading it again failed: ${errorText(error)}`];
    }
  }

  function move(turnId) {
    return act(`Moving ${turnId} to the head`, async () => {
      const answer = await moveQueuedTurn(project, session, turnId, state.queueVersion);
      onRead(answer.queue, answer.queueVersion);
      return ["moved", `moved ${turnId} to the head`];
    }, async (error) => (errorReason(error) === "QUEUE_VERSION_MISMATCH" ? reread() : null));
  }

  // One queue action at a time: `call` answers [data-outcome, words]; a refusal is said as it is
  // (after `explain`, which may answer one of its own), or as the token it needs.
  async function act(what, call, explain = async () => null) {
    busy = true;
    render();
    replace(report, `${what}…`);
    try {
      const [kind, words] = await call();
      report.dataset.outcome = kind;
      replace(report, words);
    } catch (error) {
      if (refusedForToken(what, error, report, tokenInput)) return;
      const [kind, words] = (await explain(error)) || ["error", `${what} refused: ${errorText(error)}`];
      report.dataset.outcome = kind;
      replace(report, words);
    } finally {
      busy = false;
      render();
    }
  }

  return {
    nodes: [el("h3", {}, "Queue"), list, actions, report],
    show(current) {
      state = current;
      render();
    },
  };
}
