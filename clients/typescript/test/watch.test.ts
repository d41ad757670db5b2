import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  isResync,
  LimitExceeded,
  NotAuthenticated,
  SessionService,
  type SessionEvent,
  type WatchSessionRequest,
} from "../src/index.js";
import { event, NO_WAIT, refusal, SESSION, snapshot, toolCall, turngateWith } from "./fakes.js";

/** What one WatchSession call of the fake does: send `events`, then fail with `error`, end the
 * stream, or (hold) stay open until the client goes away. */
interface Call {
  events: SessionEvent[];
  then: ConnectError | "end" | "hold";
}

/** A Turngate whose WatchSession plays `calls` in turn, the requests it got, and whether each call
 * saw its client go away. */
function watching(...calls: Call[]) {
  const requests: WatchSessionRequest[] = [];
  const closed: boolean[] = [];
  const turngate = turngateWith((router) =>
    router.service(SessionService, {
      async *watchSession(request, context) {
        requests.push(request);
        const index = closed.push(false) - 1;
        context.signal.addEventListener("abort", () => (closed[index] = true));
        const call = calls.shift() ?? { events: [], then: "hold" };
        for (const sent of call.events) {
          yield { event: sent };
        }
        if (call.then instanceof ConnectError) {
          throw call.then;
        }
        if (call.then === "hold") {
          await new Promise((resolve) => context.signal.addEventListener("abort", resolve));
        }
      },
    }),
  );
  return { turngate, requests, closed };
}

/** The first `count` events of `watch`, then leaves the loop. */
async function take(watch: AsyncIterable<SessionEvent>, count: number): Promise<SessionEvent[]> {
  const seen: SessionEvent[] = [];
  for await (const received of watch) {
    seen.push(received);
    if (seen.length === count) {
      break;
    }
  }
  return seen;
}

const seqs = (events: SessionEvent[]): bigint[] => events.map((e) => e.seq);

describe("the watch", () => {
  it("starts with a snapshot from after_seq 0, then the live events", async () => {
    const { turngate, requests } = watching({
      events: [snapshot(41n, 7n), toolCall(42n, 7n, "c1")],
      then: "hold",
    });
    const watch = turngate.watch(SESSION);
    const seen = await take(watch, 2);
    assert.deepEqual(
      seen.map((e) => e.kind.case),
      ["snapshot", "toolCall"],
    );
    assert.equal(requests[0]?.afterSeq, 0n);
    assert.equal(requests[0]?.session?.sessionId, SESSION);
    assert.deepEqual(watch.cursor, { seq: 42n, epoch: 7n });
  });

  it("resumes after a blip from the last seq and epoch seen, missing and repeating nothing", async () => {
    const { turngate, requests } = watching(
      {
        events: [snapshot(41n, 7n), toolCall(42n, 7n, "c1")],
        then: new ConnectError("restart", Code.Unavailable),
      },
      // The service replays from the cursor; an event it sends again is not yielded twice.
      { events: [toolCall(42n, 7n, "c1"), toolCall(43n, 7n, "c2"), toolCall(44n, 7n, "c3")], then: "hold" },
    );
    const reconnects: bigint[] = [];
    const watch = turngate.watch(SESSION, {
      backoff: NO_WAIT,
      onReconnect: ({ cursor }) => reconnects.push(cursor.seq),
    });
    assert.deepEqual(seqs(await take(watch, 4)), [41n, 42n, 43n, 44n]);
    assert.deepEqual(
      requests.map((r) => [r.afterSeq, r.epoch]),
      [
        [0n, 0n],
        [42n, 7n],
      ],
    );
    assert.deepEqual(reconnects, [42n]);
  });

  it("resumes when the server ends the stream (a drain)", async () => {
    const { turngate, requests } = watching(
      { events: [snapshot(5n, 1n)], then: "end" },
      { events: [toolCall(6n, 1n, "c1")], then: "hold" },
    );
    assert.deepEqual(seqs(await take(turngate.watch(SESSION, { backoff: NO_WAIT }), 2)), [5n, 6n]);
    assert.equal(requests[1]?.afterSeq, 5n);
  });

  it("resumes after being cut off for falling behind (LIMIT_EXCEEDED watch_buffer)", async () => {
    const { turngate, requests } = watching(
      {
        events: [snapshot(5n, 1n)],
        then: refusal(Code.ResourceExhausted, "LIMIT_EXCEEDED", { metadata: { limit: "watch_buffer" } }),
      },
      { events: [toolCall(6n, 1n, "c1")], then: "hold" },
    );
    assert.deepEqual(seqs(await take(turngate.watch(SESSION, { backoff: NO_WAIT }), 2)), [5n, 6n]);
    assert.equal(requests.length, 2);
  });

  it("yields a resync snapshot (even with a lower seq, in a new epoch) and takes its cursor", async () => {
    const { turngate, requests } = watching(
      { events: [toolCall(45n, 7n, "c4")], then: new ConnectError("blip", Code.Unavailable) },
      { events: [snapshot(3n, 8n, true), toolCall(4n, 8n, "c1")], then: "hold" },
    );
    const watch = turngate.watch(SESSION, { after: { seq: 44n, epoch: 7n }, backoff: NO_WAIT });
    const seen = await take(watch, 3);
    assert.deepEqual(seqs(seen), [45n, 3n, 4n]);
    assert.deepEqual(seen.map(isResync), [false, true, false]);
    assert.deepEqual(
      requests.map((r) => [r.afterSeq, r.epoch]),
      [
        [44n, 7n],
        [45n, 7n],
      ],
    );
    assert.deepEqual(watch.cursor, { seq: 4n, epoch: 8n });
  });

  it("yields an event of a kind it does not know and keeps its seq as the cursor", async () => {
    const { turngate } = watching({
      events: [snapshot(1n, 1n), event({ seq: 2n, epoch: 1n })],
      then: "hold",
    });
    const watch = turngate.watch(SESSION);
    const seen = await take(watch, 2);
    assert.equal(seen[1]?.kind.case, undefined);
    assert.deepEqual(watch.cursor, { seq: 2n, epoch: 1n });
  });

  it("passes the turn filter on every call", async () => {
    const { turngate, requests } = watching(
      { events: [snapshot(1n, 1n)], then: new ConnectError("blip", Code.Unavailable) },
      { events: [toolCall(2n, 1n, "c1")], then: "hold" },
    );
    await take(turngate.watch(SESSION, { turnId: "t1", backoff: NO_WAIT }), 2);
    assert.deepEqual(
      requests.map((r) => r.turnId),
      ["t1", "t1"],
    );
  });

  it("reports a refusal (the watch-stream limit per session) instead of reconnecting", async () => {
    const { turngate, requests } = watching({
      events: [],
      then: refusal(Code.ResourceExhausted, "LIMIT_EXCEEDED", {
        metadata: { limit: "watch_streams_per_session" },
      }),
    });
    await assert.rejects(take(turngate.watch(SESSION, { backoff: NO_WAIT }), 1), (error: unknown) => {
      assert.ok(error instanceof LimitExceeded);
      assert.equal(error.limit, "watch_streams_per_session");
      return true;
    });
    assert.equal(requests.length, 1);
  });

  it("reports UNAUTHENTICATED as a NotAuthenticated", async () => {
    const { turngate } = watching({ events: [], then: new ConnectError("no token", Code.Unauthenticated) });
    await assert.rejects(take(turngate.watch(SESSION), 1), NotAuthenticated);
  });

  it("leaving the loop closes the stream", async () => {
    const { turngate, closed } = watching({ events: [snapshot(1n, 1n)], then: "hold" });
    await take(turngate.watch(SESSION), 1);
    await waitUntil(() => closed[0] === true);
  });

  it("aborting its signal ends the iteration without an error and closes the stream", async () => {
    const { turngate, closed } = watching({ events: [snapshot(1n, 1n)], then: "hold" });
    const abort = new AbortController();
    const seen: SessionEvent[] = [];
    for await (const received of turngate.watch(SESSION, { signal: abort.signal })) {
      seen.push(received);
      abort.abort();
    }
    assert.deepEqual(seqs(seen), [1n]);
    await waitUntil(() => closed[0] === true);
  });
});

async function waitUntil(condition: () => boolean): Promise<void> {
  for (let tries = 0; !condition(); tries++) {
    assert.ok(tries < 200, "the condition never held");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
