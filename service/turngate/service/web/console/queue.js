// The session's queue, head first, each waiting turn with "Move to head": MoveQueuedTurn guarded
// by the queue's version as last read, so a queue that changed meanwhile is read again, never
// reordered unseen.

import { getSession, moveQueuedTurn } from "./api.js";
import { errorReason } from "./connect.js";
import { el, errorText, replace } from "./dom.js";
import { href } from "./route.js";
import { refusedForToken } from "./token.js";

// onRead(queue, queueVersion) takes the queue a move answered, or a read after a refused one.
export function queueControl(where, tokenInput, onRead) {
  const { project, session } = where;
  const list = el("ol", { id: "queue", "aria-label": "Queued turns, head first" });
  const report = el("p", { id: "queue-outcome", role: "status" });
  let state = null;
  let moving = false;
  let shown = "";

  function entry(queued, index) {
    const button = el("button", { type: "button", className: "move-to-head", disabled: index === 0 || moving },
      index === 0 ? "At the head" : `Move ${queued.turnId} to head`);
    button.addEventListener("click", () => move(queued.turnId));
    return el("li", { "data-turn": queued.turnId },
      el("a", { href: href({ ...where, turn: queued.turnId }) }, queued.turnId), ` · runner ${queued.runnerId} `,
      queued.steer ? ["· steer ", el("q", { className: "content" }, queued.steer), " "] : "", button);
  }

  // Rebuilt only when something changed, so keyboard focus on a button survives other events.
  function render() {
    const fingerprint = JSON.stringify([state.queue, moving]);
    if (fingerprint === shown) return;
    shown = fingerprint;
    if (state.queue.length) replace(list, state.queue.map(entry));
    else replace(list, el("li", { className: "empty" }, "No turn is waiting."));
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

  async function move(turnId) {
    moving = true;
    render();
    replace(report, `moving ${turnId} to the head…`);
    try {
      const answer = await moveQueuedTurn(project, session, turnId, state.queueVersion);
      onRead(answer.queue, answer.queueVersion);
      report.dataset.outcome = "moved";
      replace(report, `moved ${turnId} to the head`);
    } catch (error) {
      if (refusedForToken("Moving a queued turn", error, report, tokenInput)) return;
      const [kind, words] = errorReason(error) === "QUEUE_VERSION_MISMATCH" ? await reread()
        : ["error", `Move refused: ${errorText(error)}`];
      report.dataset.outcome = kind;
      replace(report, words);
    } finally {
      moving = false;
      render();
    }
  }

  return {
    nodes: [el("h3", {}, "Queue"), list, report],
    show(current) {
      state = current;
      render();
    },
  };
}
