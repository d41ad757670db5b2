import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  CancelTurnResponseSchema,
  ControlService,
  QueueAction,
  ServiceUnavailable,
  stopResult,
  TurngateError,
  TurnOutcome,
  TurnPhase,
  WriteOutcomeUnknown,
  type CancelTurnRequest,
} from "../src/index.js";
import { answering, NO_WAIT, PROJECT, refusal, SESSION } from "./fakes.js";

/** A Turngate whose CancelTurn answers `answers` in turn, and the requests it received. */
const controlAnswering = (...answers: (MessageInitShape<typeof CancelTurnResponseSchema> | ConnectError)[]) =>
  answering<CancelTurnRequest, typeof CancelTurnResponseSchema>(
    CancelTurnResponseSchema,
    answers,
    (router, cancelTurn) => router.service(ControlService, { cancelTurn }),
  );

describe("Stop's typed outcomes", () => {
  it("a running turn asked to stop: cancelled, stoppedRunningTurn, with its deadline", async () => {
    const { turngate, requests } = controlAnswering({
      outcome: {
        case: "cancelled",
        value: {
          cancelledTurnIds: ["t1"],
          stoppingTurnId: "t1",
          cancelledInteractionIds: ["i1"],
          stopDeadline: timestampFromMs(1_700_000_005_000),
        },
      },
    });
    const result = await turngate.stop(SESSION, { expectedTurnId: "t1", reason: "user pressed Stop" });
    assert.deepEqual(result, {
      outcome: "cancelled",
      cancelledTurnIds: ["t1"],
      stoppingTurnId: "t1",
      settled: false,
      beforeStart: false,
      queued: false,
      clearedTurnIds: [],
      cancelledInteractionIds: ["i1"],
      stopDeadline: new Date(1_700_000_005_000),
      activeTurnId: "",
      stoppedRunningTurn: true,
    });
    const [request] = requests;
    assert.equal(request?.session?.projectId, PROJECT);
    assert.equal(request?.expectedTurnId, "t1");
    assert.equal(request?.reason, "user pressed Stop");
    assert.equal(request?.force, false);
    assert.match(request?.requestId ?? "", /^[0-9a-f]{32}$/);
  });

  it("a forced Stop settles at once: stoppedRunningTurn without a stopping turn", async () => {
    const { turngate, requests } = controlAnswering({
      outcome: { case: "cancelled", value: { cancelledTurnIds: ["t1"], settled: true } },
    });
    const result = await turngate.stop(SESSION, {
      expectedTurnId: "t1",
      force: true,
      queue: QueueAction.CLEAR,
    });
    assert.equal(result.outcome, "cancelled");
    assert.equal(result.outcome === "cancelled" && result.stoppedRunningTurn, true);
    assert.equal(requests[0]?.force, true);
    assert.equal(requests[0]?.queue, QueueAction.CLEAR);
  });

  it("a turn cancelled before it started while another runs: nothing running was stopped", async () => {
    const { turngate } = controlAnswering({
      outcome: {
        case: "cancelled",
        value: { cancelledTurnIds: ["t-next"], beforeStart: true, activeTurnId: "t1" },
      },
    });
    const result = await turngate.stop(SESSION, { expectedTurnId: "t-next" });
    assert.ok(result.outcome === "cancelled");
    assert.equal(result.beforeStart, true);
    assert.equal(result.stoppedRunningTurn, false);
    assert.equal(result.activeTurnId, "t1");
  });

  it("a queued turn removed from the queue: nothing running was stopped", async () => {
    const { turngate } = controlAnswering({
      outcome: { case: "cancelled", value: { cancelledTurnIds: ["t3"], queued: true, activeTurnId: "t1" } },
    });
    const result = await turngate.stop(SESSION, { expectedTurnId: "t3" });
    assert.ok(result.outcome === "cancelled");
    assert.equal(result.queued, true);
    assert.equal(result.stoppedRunningTurn, false);
  });

  it("the expected turn already ended and another runs: mismatch", async () => {
    const { turngate } = controlAnswering({
      outcome: {
        case: "mismatch",
        value: {
          expectedTurnId: "t0",
          currentTurnId: "t1",
          currentPhase: TurnPhase.RUNNING,
          expectedOutcome: TurnOutcome.COMPLETED,
        },
      },
    });
    assert.deepEqual(await turngate.stop(SESSION, { expectedTurnId: "t0" }), {
      outcome: "mismatch",
      expectedTurnId: "t0",
      currentTurnId: "t1",
      currentPhase: TurnPhase.RUNNING,
      expectedOutcome: TurnOutcome.COMPLETED,
    });
  });

  it("nothing is active: idle, with the last turn", async () => {
    const { turngate } = controlAnswering({
      outcome: {
        case: "idle",
        value: {
          expectedTurnId: "t1",
          expectedOutcome: TurnOutcome.CANCELLED,
          lastTurnId: "t1",
          lastOutcome: TurnOutcome.CANCELLED,
        },
      },
    });
    assert.deepEqual(await turngate.stop(SESSION, { expectedTurnId: "t1" }), {
      outcome: "idle",
      expectedTurnId: "t1",
      expectedOutcome: TurnOutcome.CANCELLED,
      lastTurnId: "t1",
      lastOutcome: TurnOutcome.CANCELLED,
    });
  });

  it("a blip is retried with the same request id", async () => {
    const { turngate, requests } = controlAnswering(new ConnectError("restarting", Code.Unavailable), {
      outcome: { case: "idle", value: {} },
    });
    const result = await turngate.stop(SESSION, { backoff: NO_WAIT });
    assert.equal(result.outcome, "idle");
    assert.equal(requests.length, 2);
    assert.equal(requests[0]?.requestId, requests[1]?.requestId);
  });

  it("a caller's request id is sent as given", async () => {
    const { turngate, requests } = controlAnswering({ outcome: { case: "idle", value: {} } });
    await turngate.stop(SESSION, { requestId: "stop-42" });
    assert.equal(requests[0]?.requestId, "stop-42");
  });

  it("blips past the retry budget end with ServiceUnavailable", async () => {
    const { turngate } = controlAnswering(
      new ConnectError("down", Code.Unavailable),
      new ConnectError("down", Code.Unavailable),
    );
    await assert.rejects(turngate.stop(SESSION, { retryForMs: 0 }), ServiceUnavailable);
  });

  it("a Stop whose outcome is unknown is sent again with its request id and answers what it did", async () => {
    const { turngate, requests } = controlAnswering(refusal(Code.Unavailable, "WRITE_OUTCOME_UNKNOWN"), {
      outcome: { case: "cancelled", value: { cancelledTurnIds: ["t1"], stoppingTurnId: "t1" } },
    });
    const result = await turngate.stop(SESSION, { expectedTurnId: "t1", backoff: NO_WAIT });
    assert.ok(result.outcome === "cancelled");
    assert.equal(result.stoppingTurnId, "t1");
    assert.equal(requests.length, 2);
    assert.equal(requests[0]?.requestId, requests[1]?.requestId);
  });

  it("retries that run out after an unknown outcome end with WriteOutcomeUnknown naming the request id", async () => {
    const { turngate } = controlAnswering(
      refusal(Code.Unavailable, "WRITE_OUTCOME_UNKNOWN"),
      new ConnectError("down", Code.Unavailable),
      new ConnectError("down", Code.Unavailable),
      new ConnectError("down", Code.Unavailable),
    );
    await assert.rejects(
      turngate.stop(SESSION, { requestId: "stop-7", backoff: { initialMs: 20, maxMs: 20 }, retryForMs: 50 }),
      (error: unknown) => {
        assert.ok(error instanceof WriteOutcomeUnknown);
        assert.ok(
          error instanceof ServiceUnavailable,
          "what code written before it catches still catches it",
        );
        assert.equal(error.requestId, "stop-7");
        return true;
      },
    );
  });

  it("retries that run out without an unknown outcome stay ServiceUnavailable", async () => {
    const { turngate } = controlAnswering(new ConnectError("down", Code.Unavailable));
    await assert.rejects(turngate.stop(SESSION, { retryForMs: 0 }), (error: unknown) => {
      assert.ok(error instanceof ServiceUnavailable);
      assert.ok(!(error instanceof WriteOutcomeUnknown));
      return true;
    });
  });

  it("a refusal is not retried", async () => {
    const { turngate, requests } = controlAnswering(new ConnectError("no role", Code.PermissionDenied));
    await assert.rejects(turngate.stop(SESSION, { backoff: NO_WAIT }), (error: unknown) => {
      assert.ok(error instanceof TurngateError);
      assert.equal(error.code, Code.PermissionDenied);
      return true;
    });
    assert.equal(requests.length, 1);
  });

  it("an answer without an outcome is an error, not a silent success", () => {
    assert.throws(
      () => stopResult(create(CancelTurnResponseSchema)),
      (error: unknown) => {
        assert.ok(error instanceof TurngateError);
        assert.equal(error.code, Code.Internal);
        return true;
      },
    );
  });
});
