// The running turn's tool calls and interactions as a waterfall that grows every second: read once
// with GetTurn when a turn becomes active (what it recorded before the page saw it), then kept
// current from the session's tool-call and interaction events.

import { getTurn } from "./api.js";
import { el, replace } from "./dom.js";
import { live } from "./time.js";
import { waterfall } from "./waterfall.js";

// A record replaces the one shown for its id unless it would reopen a closed one (a read
// answering after a later event).
function keep(known, id, record) {
  const shown = known.get(id);
  if (!shown || !shown.closedAt || record.closedAt) known.set(id, record);
}

export function runningTurn(project, session) {
  const slot = el("div", { id: "running-waterfall" });
  let turn = null;
  let controller = new AbortController();

  const draw = (now) => replace(slot, turn ? waterfall({ turnId: turn.turnId, admittedAt: turn.admittedAt,
    toolCalls: [...turn.calls.values()], interactions: [...turn.asked.values()] }, now) : "");

  async function read(current, signal) {
    try {
      const record = await getTurn(project, session, current.turnId, signal);
      current.admittedAt = record.admittedAt || "";
      for (const call of record.toolCalls || []) keep(current.calls, call.callId, call);
      for (const item of record.interactions || []) keep(current.asked, item.interactionId, item);
      draw(Date.now());
    } catch {
      // Not readable now: its events alone fill the waterfall once its admission time is known.
    }
  }

  live(slot, draw);
  return {
    nodes: [slot],
    // The active turn as the timeline's state has it (or null).
    show(active) {
      if (active && turn && turn.turnId === active.turnId) return;
      controller.abort();
      controller = new AbortController();
      turn = active ? { turnId: active.turnId, admittedAt: "", calls: new Map(), asked: new Map() } : null;
      if (turn) read(turn, controller.signal);
      draw(Date.now());
    },
    event(event) {
      const call = event.toolCall;
      const asked = event.interaction;
      if (call && turn && call.turnId === turn.turnId) keep(turn.calls, call.toolCall.callId, call.toolCall);
      if (asked && turn && asked.turnId === turn.turnId) keep(turn.asked, asked.interaction.interactionId, asked.interaction);
      if (call || asked) draw(Date.now());
    },
    leave: () => controller.abort(),
  };
}
