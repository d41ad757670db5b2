// Times as the console shows them: a moment in UTC with its date beside how far it is from now
// ("in 19 s", "3 min ago"), kept current by one timer for the whole page; a timeline row's time
// of day; and how long something took.

import { el, replace } from "./dom.js";

const TICK_MS = 1000;
// Each live node's redraw, forgotten with the node once the page drops it.
const redraws = new WeakMap();
let ticking = false;

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

function parsed(value) {
  const at = value ? new Date(value) : null;
  return at && !Number.isNaN(at.getTime()) ? at : null;
}

// "2026-12-05 14:03:07 UTC"; with `ms`, "2026-12-05 14:03:07.123 UTC".
export function utc(at, { ms = false } = {}) {
  const iso = at.toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, ms ? 23 : 19)} UTC`;
}

// How far `at` is from `now` (both in ms), in its largest whole unit: "in 19 s", "3 min ago",
// "2 h ago", "in 3 d"; "now" within a second.
export function relative(at, now) {
  const gap = at - now;
  const size = Math.abs(gap);
  if (size < SECOND) return "now";
  const words = size < MINUTE ? `${Math.floor(size / SECOND)} s`
    : size < HOUR ? `${Math.floor(size / MINUTE)} min`
      : size < 2 * DAY ? `${Math.floor(size / HOUR)} h` : `${Math.floor(size / DAY)} d`;
  return gap > 0 ? `in ${words}` : `${words} ago`;
}

// How long something took, in ms: "850 ms", "4.2 s", "19 s", "3 min 5 s", "2 h 3 min", "3 d 4 h".
export function duration(ms) {
  const size = Math.max(0, ms);
  if (size < 999.5) return `${Math.round(size)} ms`;
  if (size < 9950) return `${(size / SECOND).toFixed(1)} s`;
  const seconds = Math.round(size / SECOND);
  const pair = (big, bigUnit, small, smallUnit) => (small ? `${big} ${bigUnit} ${small} ${smallUnit}` : `${big} ${bigUnit}`);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return pair(minutes, "min", seconds % 60, "s");
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return pair(hours, "h", minutes % 60, "min");
  return pair(Math.floor(hours / 24), "d", hours % 24, "h");
}

// Calls redraw(now) at once, then every second while `node` is in the page; every live node
// shares one timer.
export function live(node, redraw) {
  redraws.set(node, redraw);
  node.dataset.live = "";
  redraw(Date.now());
  if (ticking) return;
  ticking = true;
  setInterval(() => {
    const now = Date.now();
    for (const shown of document.querySelectorAll("[data-live]")) redraws.get(shown)?.(now);
  }, TICK_MS);
}

// A moment: its date and time in UTC, and how far it is from now, kept current. The relative
// words are hidden from screen readers, which would otherwise hear them change every second.
export function moment(value) {
  const at = parsed(value);
  if (!at) return value ? el("span", {}, value) : "";
  const away = el("span", { className: "relative", "aria-hidden": "true" });
  live(away, (now) => replace(away, `(${relative(at.getTime(), now)})`));
  return el("span", { className: "moment" },
    el("time", { datetime: value, title: utc(at, { ms: true }) }, utc(at)), " ", away);
}

// A timeline row's time: the time of day to the millisecond, after its date (which the timeline
// shows on its first row and where the day changes); the whole moment in its title.
export function clock(value) {
  const at = parsed(value);
  if (!at) return value ? el("span", {}, value) : "";
  const iso = at.toISOString();
  return el("time", { datetime: value, title: utc(at, { ms: true }) },
    el("span", { className: "date" }, `${iso.slice(0, 10)} `), iso.slice(11, 23));
}

// The UTC day of an RFC 3339 time ("" without one), to tell where the timeline's day changes.
export function day(value) {
  const at = parsed(value);
  return at ? at.toISOString().slice(0, 10) : "";
}
