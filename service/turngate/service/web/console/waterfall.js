// A turn's tool calls and interactions on the turn's own time axis (a waterfall): each bar starts
// where its call opened and ends where it closed, relative to the turn's admission; a call still
// open runs to `now`, as does the axis of a turn still running. Offsets and widths are CSS custom
// properties (--from, --width) set through the CSSOM, which the page's CSP allows.

import { el } from "./dom.js";
import { badge, tone } from "./status.js";
import { duration } from "./time.js";

const at = (value) => (value ? Date.parse(value) : NaN);
const share = (part, whole) => `${((100 * part) / whole).toFixed(3)}%`;
const clamp = (value, low, high) => Math.min(Math.max(value, low), high);

// [{kind, id, label, status, prefix, opened, closed}] of a turn as GetTurn answers it, in the
// order they opened.
function spans(turn) {
  const calls = (turn.toolCalls || []).map((call) => ({ id: call.callId, label: call.name, status: call.status,
    prefix: "TOOL_CALL_STATUS_", opened: at(call.openedAt), closed: at(call.closedAt) }));
  const asked = (turn.interactions || []).map((item) => ({ id: item.interactionId, label: item.kind,
    status: item.status, prefix: "INTERACTION_STATUS_", opened: at(item.openedAt), closed: at(item.closedAt) }));
  return [...calls, ...asked].filter((span) => !Number.isNaN(span.opened)).sort((a, b) => a.opened - b.opened);
}

function row(span, start, total, end) {
  const open = Number.isNaN(span.closed);
  const from = clamp(span.opened - start, 0, total);
  const until = clamp((open ? end : span.closed) - start, from, total);
  const bar = el("span", { className: `bar ${tone(span.status, span.prefix)}` });
  bar.style.setProperty("--from", share(from, total));
  bar.style.setProperty("--width", share(until - from, total));
  return el("li", { "data-span": span.id },
    el("span", { className: "what" }, `${span.label} (${span.id}) `, badge(span.status, span.prefix)),
    el("span", { className: "track", "aria-hidden": "true" }, bar),
    el("span", { className: "took" }, open ? `${duration(until - from)} so far` : duration(span.closed - span.opened)));
}

// The waterfall of `turn` (a TurnRecord with its tool calls and interactions) as of `now` (ms),
// or "" when it never ran or recorded nothing.
export function waterfall(turn, now) {
  const start = at(turn.admittedAt);
  const shown = spans(turn);
  if (Number.isNaN(start) || !shown.length) return "";
  const settled = at(turn.settledAt);
  const end = Number.isNaN(settled) ? Math.max(now, start) : settled;
  const total = Math.max(end - start, 1);
  const running = Number.isNaN(settled) ? " so far" : "";
  return el("figure", { className: "waterfall", "data-turn": turn.turnId },
    el("figcaption", {}, `Tool calls and interactions over the turn's ${duration(end - start)}${running}`),
    el("ol", {}, shown.map((span) => row(span, start, total, end))));
}
