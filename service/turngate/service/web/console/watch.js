// A watch that resumes: after a lost connection or a server restart it reconnects with the cursor
// (epoch and the last seq seen), so nothing is missed and nothing is shown twice.

import { watchSession } from "./api.js";
import { errorText } from "./dom.js";

const FIRST_RETRY_MS = 500;
const LAST_RETRY_MS = 5000;

// Calls onEvent(event) once per event in seq order, onStatus(text, live) as the connection
// changes; returns a function that ends the watch.
export function follow(project, session, cursor, onEvent, onStatus) {
  const controller = new AbortController();
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // A snapshot restarts the cursor (its seq is the head it reflects); any other event at or
  // below the cursor of the same epoch was shown already.
  function accept(event) {
    const seq = Number(event.seq || 0);
    const epoch = Number(event.epoch || 0);
    if (!event.snapshot && epoch === cursor.epoch && seq <= cursor.seq) return;
    cursor.seq = seq;
    cursor.epoch = epoch;
    onEvent(event);
  }

  async function run() {
    let retry = FIRST_RETRY_MS;
    while (!controller.signal.aborted) {
      try {
        // A resumed watch with nothing new may get no answer at all until the next event (the
        // HTTP response starts with its first message): say what it waits for.
        onStatus(cursor.seq ? `waiting for events after seq ${cursor.seq}` : "connecting", false);
        const stream = await watchSession(project, session, cursor, controller.signal);
        onStatus("live", true);
        for await (const message of stream) {
          retry = FIRST_RETRY_MS;
          accept(message.event);
        }
        throw new Error("the watch ended");
      } catch (error) {
        if (controller.signal.aborted) return;
        onStatus(`reconnecting in ${retry / 1000} s after seq ${cursor.seq} (${errorText(error)})`, false);
        await sleep(retry);
        retry = Math.min(retry * 2, LAST_RETRY_MS);
      }
    }
  }

  run();
  return () => controller.abort();
}
