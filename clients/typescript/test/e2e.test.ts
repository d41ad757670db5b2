/** admit → watch → stop → settled against a real turngate HTTP listener, over each transport.
 *
 * TURNGATE_TEST_HTTP_URL: the listener (e.g. http://127.0.0.1:8080); unset, the test is skipped.
 * TURNGATE_TEST_TOKEN: a bearer token with the runner, gateway and watcher roles on
 * TURNGATE_TEST_PROJECT (default "p-ts"); unset for a server without a tokens file.
 * tests/typescript/test_node_client.py starts a server and runs this file against it. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, type Transport } from "@connectrpc/connect";
import {
  AdmissionMode,
  createTurngateTransport,
  Directive,
  InvalidRequest,
  NotAuthenticated,
  PermissionDenied,
  QueueVersionMismatch,
  SessionBusy,
  SessionPhase,
  SettledBy,
  SteerStatus,
  toTurngateError,
  Turngate,
  TurnOutcome,
  TurnPhase,
  type SessionEvent,
} from "../src/index.js";
import { createTurngateNodeTransport } from "../src/node.js";

const baseUrl = process.env.TURNGATE_TEST_HTTP_URL;
const token = process.env.TURNGATE_TEST_TOKEN || undefined;
const project = process.env.TURNGATE_TEST_PROJECT || "p-ts";
// Only to fail rather than hang when an awaited event never comes.
const EVENT_TIMEOUT_MS = 10_000;

const transports: [string, (url: string) => Transport][] = [
  ["fetch, Connect JSON", (url) => createTurngateTransport({ baseUrl: url, token })],
  ["fetch, gRPC-Web", (url) => createTurngateTransport({ baseUrl: url, token, protocol: "grpc-web" })],
  [
    "node HTTP/1.1, Connect binary",
    (url) => createTurngateNodeTransport({ baseUrl: url, token, binary: true }),
  ],
  [
    "node HTTP/2, Connect binary",
    (url) => createTurngateNodeTransport({ baseUrl: url, token, binary: true, httpVersion: "2" }),
  ],
];

/** The next event of `events` that `wanted` accepts (earlier ones are passed over). */
async function nextWhere(
  events: AsyncIterator<SessionEvent>,
  wanted: (event: SessionEvent) => boolean,
): Promise<SessionEvent> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("the awaited event never came")), EVENT_TIMEOUT_MS);
  });
  try {
    for (;;) {
      const next = await Promise.race([events.next(), timeout]);
      assert.ok(!next.done, "the watch ended");
      if (wanted(next.value)) {
        return next.value;
      }
    }
  } finally {
    clearTimeout(timer);
  }
}

const notSet = "TURNGATE_TEST_HTTP_URL is not set (tests/typescript/test_node_client.py sets it)";

describe("against a real server over HTTP", { skip: baseUrl ? false : notSet }, () => {
  for (const [label, transportFor] of transports) {
    it(`admit → watch → stop → settled (${label})`, async () => {
      const turngate = new Turngate(transportFor(baseUrl!), project);
      const sessionId = `ts-${label.replace(/[^A-Za-z0-9]+/g, "-")}-${Date.now()}`;
      const session = turngate.session(sessionId);

      const admitted = await turngate.admission.admitTurn({ session, turnId: "t1", runnerId: "r1" });
      const lease = admitted.lease!;
      assert.ok(lease.generation > 0n);

      const abort = new AbortController();
      const events = turngate.watch(sessionId, { signal: abort.signal })[Symbol.asyncIterator]();
      try {
        const first = await nextWhere(events, () => true);
        assert.equal(first.kind.case, "snapshot");
        assert.ok(first.kind.case === "snapshot");
        assert.equal(first.kind.value.phase, SessionPhase.RUNNING);
        assert.equal(first.kind.value.active?.turnId, "t1");

        // A second turn is refused with the typed error, its retry delay and the turn in the way.
        const busy = await turngate.admission
          .admitTurn({ session, turnId: "t2", runnerId: "r2" })
          .then(() => assert.fail("t2 was admitted while t1 runs"), toTurngateError);
        assert.ok(busy instanceof SessionBusy, busy.name);
        assert.equal(busy.code, Code.Aborted);
        assert.equal(busy.activeTurnId, "t1");
        assert.ok((busy.retryAfterMs ?? 0) > 0);

        // A Stop of a turn that never started while t1 runs: cancelled, but nothing running stopped.
        const early = await turngate.stop(sessionId, { expectedTurnId: "t-later" });
        assert.ok(early.outcome === "cancelled", early.outcome);
        assert.equal(early.beforeStart, true);
        assert.equal(early.stoppedRunningTurn, false);
        assert.equal(early.activeTurnId, "t1");

        const stopped = await turngate.stop(sessionId, { expectedTurnId: "t1", reason: "user pressed Stop" });
        assert.ok(stopped.outcome === "cancelled", stopped.outcome);
        assert.equal(stopped.stoppingTurnId, "t1");
        assert.equal(stopped.stoppedRunningTurn, true);
        assert.ok(stopped.stopDeadline instanceof Date);

        const stopRequested = await nextWhere(
          events,
          (e) => e.kind.case === "stopRequested" && e.kind.value.turnId === "t1",
        );
        assert.ok(stopRequested.kind.case === "stopRequested");
        assert.equal(stopRequested.kind.value.reason, "user pressed Stop");

        const beat = await turngate.admission.heartbeat({ lease });
        assert.equal(beat.directive, Directive.STOP);
        await turngate.admission.completeTurn({ lease, outcome: TurnOutcome.CANCELLED });

        const settled = await nextWhere(events, (e) => e.kind.case === "turnSettled");
        assert.ok(settled.kind.case === "turnSettled");
        assert.equal(settled.kind.value.turn?.turnId, "t1");
        assert.equal(settled.kind.value.turn?.outcome, TurnOutcome.CANCELLED);
        assert.equal(settled.kind.value.turn?.settledBy, SettledBy.RUNNER);

        const again = await turngate.stop(sessionId, { expectedTurnId: "t1" });
        assert.deepEqual(again, {
          outcome: "idle",
          expectedTurnId: "t1",
          expectedOutcome: TurnOutcome.CANCELLED,
          lastTurnId: "t1",
          lastOutcome: TurnOutcome.CANCELLED,
        });

        // Bad input: INVALID_ARGUMENT with the field named.
        const invalid = await turngate.admission
          .admitTurn({ session, turnId: "", runnerId: "r1" })
          .then(() => assert.fail("an empty turn id was admitted"), toTurngateError);
        assert.ok(invalid instanceof InvalidRequest, invalid.name);
        assert.ok(
          invalid.violations.some((v) => v.field === "turn_id"),
          JSON.stringify(invalid.violations),
        );
      } finally {
        abort.abort();
        await events.return?.();
      }
    });
  }

  it("steer → turn_steered → acknowledged → steer_ended; a queued turn moved to the head", async () => {
    const turngate = new Turngate(createTurngateNodeTransport({ baseUrl: baseUrl!, token }), project);
    const sessionId = `ts-steer-${Date.now()}`;
    const session = turngate.session(sessionId);
    const { lease } = await turngate.admission.admitTurn({ session, turnId: "t1", runnerId: "r1" });
    for (const turnId of ["t2", "t3"]) {
      await turngate.admission.admitTurn({ session, turnId, runnerId: "r1", mode: AdmissionMode.ENQUEUE });
    }
    const events = turngate.watch(sessionId)[Symbol.asyncIterator]();
    try {
      const first = await nextWhere(events, () => true);
      assert.ok(first.kind.case === "snapshot");
      const { queueVersion } = first.kind.value;

      const steered = await turngate.steer(sessionId, "t1", "also run the linter", { steerId: "s1" });
      assert.ok(steered.outcome === "steered", steered.outcome);
      assert.equal(steered.turnId, "t1");
      const sent = await nextWhere(events, (e) => e.kind.case === "turnSteered");
      assert.ok(sent.kind.case === "turnSteered");
      assert.equal(sent.seq, steered.seq);
      assert.equal(sent.kind.value.steer?.content, "also run the linter");
      assert.equal(sent.kind.value.steer?.contentType, "text/plain");
      assert.ok(sent.kind.value.expiresAt, "a steer expires unless acknowledged");

      const acknowledged = await turngate.admission.acknowledgeSteer({
        lease,
        steerId: "s1",
        status: SteerStatus.CONSUMED,
      });
      assert.equal(acknowledged.recorded, true);
      const ended = await nextWhere(events, (e) => e.kind.case === "steerEnded");
      assert.ok(ended.kind.case === "steerEnded");
      assert.equal(ended.kind.value.steerId, "s1");
      assert.equal(ended.kind.value.status, SteerStatus.CONSUMED);

      // A queued turn is not running: mismatch, nothing changed.
      const mismatch = await turngate.steer(sessionId, "t2", "too early");
      assert.ok(mismatch.outcome === "mismatch", mismatch.outcome);
      assert.equal(mismatch.currentTurnId, "t1");
      assert.equal(mismatch.expectedPhase, TurnPhase.QUEUED);

      const moved = await turngate.moveQueuedTurn(sessionId, "t3", { expectedQueueVersion: queueVersion });
      assert.deepEqual(
        moved.queue.map((turn) => turn.turnId),
        ["t3", "t2"],
      );
      assert.ok(moved.queueVersion > queueVersion);
      const reordered = await nextWhere(events, (e) => e.kind.case === "queueReordered");
      assert.ok(reordered.kind.case === "queueReordered");
      assert.deepEqual(reordered.kind.value.turnIds, ["t3", "t2"]);

      // The version read before the move is no longer the queue's: refused, typed.
      const stale = await turngate
        .moveQueuedTurn(sessionId, "t2", { expectedQueueVersion: queueVersion })
        .then(() => assert.fail("a stale version moved the queue"), toTurngateError);
      assert.ok(stale instanceof QueueVersionMismatch, stale.name);
    } finally {
      await events.return?.();
    }
  });

  it("lists the project's sessions, the most recently active first, a page at a time, and the project", async () => {
    const turngate = new Turngate(createTurngateNodeTransport({ baseUrl: baseUrl!, token }), project);
    const prefix = `ts-list-${Date.now()}`;
    for (const name of ["a", "b", "c"]) {
      const { lease } = await turngate.admission.admitTurn({
        session: turngate.session(`${prefix}-${name}`),
        turnId: "t1",
        runnerId: "r1",
      });
      await turngate.admission.completeTurn({ lease, outcome: TurnOutcome.COMPLETED });
    }
    const first = await turngate.sessions.listSessions({ projectId: project, pageSize: 2 });
    const second = await turngate.sessions.listSessions({
      projectId: project,
      pageSize: 2,
      pageToken: first.nextPageToken,
    });
    assert.deepEqual(
      [...first.sessions, ...second.sessions].slice(0, 3).map((s) => s.snapshot?.session?.sessionId),
      [`${prefix}-c`, `${prefix}-b`, `${prefix}-a`],
    );
    const newest = first.sessions[0];
    assert.ok(newest, "a first page");
    assert.equal(newest.snapshot?.phase, SessionPhase.IDLE);
    assert.equal(newest.snapshot?.lastSettled?.outcome, TurnOutcome.COMPLETED);
    assert.ok(newest.lastActivityAt, "each session says when it was last active");
    const projects = await turngate.sessions.listProjects({});
    assert.ok(projects.projects.some((p) => p.projectId === project));
  });

  const noToken = "TURNGATE_TEST_TOKEN is not set: the server needs none";
  it(
    "a session token minted by a gateway watches and stops its one session, and no other",
    { skip: token ? false : noToken },
    async () => {
      const gateway = new Turngate(createTurngateNodeTransport({ baseUrl: baseUrl!, token }), project);
      const sessionId = `ts-session-token-${Date.now()}`;
      const session = gateway.session(sessionId);
      const { lease } = await gateway.admission.admitTurn({ session, turnId: "t1", runnerId: "r1" });
      const minted = await gateway.control.mintSessionToken({ session, allowStop: true });
      // What a page holds: the minted token only, asked for at each call (a page would refresh it).
      const page = new Turngate(
        createTurngateTransport({ baseUrl: baseUrl!, token: () => minted.token }),
        project,
      );
      const events = page.watch(sessionId)[Symbol.asyncIterator]();
      try {
        const first = await nextWhere(events, () => true);
        assert.ok(first.kind.case === "snapshot" && first.kind.value.active?.turnId === "t1");
        const stopped = await page.stop(sessionId, { expectedTurnId: "t1" });
        assert.ok(stopped.outcome === "cancelled" && stopped.stoppedRunningTurn, JSON.stringify(stopped));
        await gateway.admission.completeTurn({ lease, outcome: TurnOutcome.CANCELLED });
        const settled = await nextWhere(events, (e) => e.kind.case === "turnSettled");
        assert.ok(settled.kind.case === "turnSettled" && settled.kind.value.turn?.turnId === "t1");

        const elsewhere = await page.sessions
          .getSession({ session: page.session(`${sessionId}-other`) })
          .then(() => assert.fail("a session token read another session"), toTurngateError);
        assert.ok(elsewhere instanceof PermissionDenied, elsewhere.name);
      } finally {
        await events.return?.();
      }
    },
  );

  it("without the token the service answers UNAUTHENTICATED", { skip: token ? false : noToken }, async () => {
    const turngate = new Turngate(createTurngateTransport({ baseUrl: baseUrl! }), project);
    const refused = await turngate.sessions
      .getSession({ session: turngate.session("any") })
      .then(() => assert.fail("read without a token"), toTurngateError);
    assert.ok(refused instanceof NotAuthenticated, refused.name);
  });
});
