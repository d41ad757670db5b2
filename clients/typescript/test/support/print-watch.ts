/** Watches one session with the client's SessionWatch and prints a JSON line per event
 * ({seq, epoch, kind, resync}) and per reconnection ({reconnect: cursor seq, error}), for the
 * Python suite's restart test (tests/typescript/test_watch_restart.py).
 *
 * Usage: tsx test/support/print-watch.ts SESSION_ID, with TURNGATE_TEST_HTTP_URL and
 * TURNGATE_TEST_PROJECT set. It runs until killed. */
import { createTurngateNodeTransport } from "../../src/node.js";
import { isResync, Turngate } from "../../src/index.js";

const [sessionId] = process.argv.slice(2);
const baseUrl = process.env.TURNGATE_TEST_HTTP_URL;
if (!sessionId || !baseUrl) {
  throw new Error("usage: TURNGATE_TEST_HTTP_URL=… print-watch.ts SESSION_ID");
}
const turngate = new Turngate(
  createTurngateNodeTransport({ baseUrl }),
  process.env.TURNGATE_TEST_PROJECT ?? "p-ts",
);
const print = (line: object): void => {
  process.stdout.write(`${JSON.stringify(line)}\n`);
};
const watch = turngate.watch(sessionId, {
  onReconnect: ({ error, cursor }) => print({ reconnect: Number(cursor.seq), error: error?.name ?? "" }),
});
for await (const event of watch) {
  print({
    seq: Number(event.seq),
    epoch: String(event.epoch),
    kind: event.kind.case,
    resync: isResync(event),
  });
}
