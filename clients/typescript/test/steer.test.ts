import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  ControlService,
  ErrorReason,
  MoveQueuedTurnResponseSchema,
  QueueVersionMismatch,
  SteerFallback,
  SteerTurnResponseSchema,
  steerResult,
  TurngateError,
  TurnNotQueued,
  TurnOutcome,
  TurnPhase,
  WriteOutcomeUnknown,
  type MoveQueuedTurnRequest,
  type SteerTurnRequest,
} from "../src/index.js";
import { answering, NO_WAIT, PROJECT, refusal, SESSION } from "./fakes.js";

/** A Turngate whose SteerTurn answers `answers` in turn, and the requests it received. */
const steerAnswering = (...answers: (MessageInitShape<typeof SteerTurnResponseSchema> | ConnectError)[]) =>
  answering<SteerTurnRequest, typeof SteerTurnResponseSchema>(
    SteerTurnResponseSchema,
    answers,
    (router, steerTurn) => router.service(ControlService, { steerTurn }),
  );

/** JSON of a result with its int64s (bigints) as strings, as a log or a page would print it. */
const json = (value: unknown): string =>
  JSON.stringify(value, (_, v: unknown) => (typeof v === "bigint" ? v.toString() : v));

describe("Steer's typed outcomes", () => {
  it("a steer of the running turn: steered, with the seq of its event as a bigint", async () => {
    const { turngate, requests } = steerAnswering({
      outcome: { case: "steered", value: { turnId: "t1", steerId: "s1", seq: 9_007_199_254_740_993n } },
    });
    const result = await turngate.steer(SESSION, "t1", "also check the tests", { steerId: "s1" });
    assert.deepEqual(result, {
      outcome: "steered",
      turnId: "t1",
      steerId: "s1",
      seq: 9_007_199_254_740_993n,
      replayed: false,
    });
    assert.equal(json(result).includes('"seq":"9007199254740993"'), true);
    const [request] = requests;
    assert.equal(request?.session?.projectId, PROJECT);
    assert.equal(request?.expectedTurnId, "t1");
    assert.equal(request?.content, "also check the tests");
    assert.equal(request?.contentType, "");
    assert.equal(request?.fallback, SteerFallback.UNSPECIFIED);
    assert.equal(request?.requeueUnconsumed, false);
    assert.match(request?.requestId ?? "", /^[0-9a-f]{32}$/);
  });

  it("a steer of a turn that is not running: mismatch, saying where each turn is", async () => {
    const mismatch = {
      expectedTurnId: "t1",
      reason: ErrorReason.ACTIVE_TURN_MISMATCH,
      currentTurnId: "t2",
      currentPhase: TurnPhase.RUNNING,
      expectedPhase: TurnPhase.SETTLED,
      expectedOutcome: TurnOutcome.COMPLETED,
    };
    const { turngate } = steerAnswering({ outcome: { case: "mismatch", value: mismatch } });
    assert.deepEqual(await turngate.steer(SESSION, "t1", "more"), { outcome: "mismatch", ...mismatch });
  });

  it("the ENQUEUE fallback: queued, the turn the steer became, admitted at once on an idle session", async () => {
    const { turngate, requests } = steerAnswering({
      outcome: {
        case: "queued",
        value: {
          turn: { turnId: "s1", runnerId: "r1", steer: { steerId: "s1", content: "next" } },
          queueDepth: 0,
          admitted: true,
        },
      },
    });
    const result = await turngate.steer(SESSION, "t1", "next", {
      steerId: "s1",
      contentType: "text/markdown",
      fallback: SteerFallback.ENQUEUE,
      requeueUnconsumed: true,
    });
    assert.ok(result.outcome === "queued", result.outcome);
    assert.equal(result.admitted, true);
    assert.equal(result.position, 0);
    assert.equal(result.turn?.turnId, "s1");
    assert.equal(result.turn?.steer?.content, "next");
    assert.equal(requests[0]?.fallback, SteerFallback.ENQUEUE);
    assert.equal(requests[0]?.requeueUnconsumed, true);
    assert.equal(requests[0]?.contentType, "text/markdown");
  });

  it("a steer whose outcome is unknown is sent again with the same steer id and request id", async () => {
    const { turngate, requests } = steerAnswering(refusal(Code.Unavailable, "WRITE_OUTCOME_UNKNOWN"), {
      outcome: { case: "steered", value: { turnId: "t1", steerId: "x", seq: 4n, replayed: true } },
    });
    const result = await turngate.steer(SESSION, "t1", "more", { backoff: NO_WAIT });
    assert.ok(result.outcome === "steered" && result.replayed, json(result));
    assert.equal(requests.length, 2);
    assert.match(requests[0]?.steerId ?? "", /^[0-9a-f]{32}$/);
    assert.equal(requests[0]?.steerId, requests[1]?.steerId);
    assert.equal(requests[0]?.requestId, requests[1]?.requestId);
  });

  it("retries that run out after an unknown outcome: WriteOutcomeUnknown naming the request id", async () => {
    const blip = () => refusal(Code.Unavailable, "WRITE_OUTCOME_UNKNOWN");
    const { turngate } = steerAnswering(blip(), blip(), blip());
    const error = await turngate
      .steer(SESSION, "t1", "more", { requestId: "steer-req-1", retryForMs: 0, backoff: NO_WAIT })
      .then(
        () => assert.fail("answered"),
        (thrown: unknown) => thrown,
      );
    assert.ok(error instanceof WriteOutcomeUnknown, String(error));
    assert.equal(error.requestId, "steer-req-1");
  });

  it("an answer without an outcome is not the contract: a TurngateError, INTERNAL", () => {
    assert.throws(
      () => steerResult(create(SteerTurnResponseSchema, {})),
      (error: unknown) => error instanceof TurngateError && error.code === Code.Internal,
    );
  });
});

describe("moving a queued turn", () => {
  const moveAnswering = (
    ...answers: (MessageInitShape<typeof MoveQueuedTurnResponseSchema> | ConnectError)[]
  ) =>
    answering<MoveQueuedTurnRequest, typeof MoveQueuedTurnResponseSchema>(
      MoveQueuedTurnResponseSchema,
      answers,
      (router, moveQueuedTurn) => router.service(ControlService, { moveQueuedTurn }),
    );

  it("to the head, guarded by the queue's version: the queue after it and its new version", async () => {
    const { turngate, requests } = moveAnswering(refusal(Code.Unavailable, "WRITE_OUTCOME_UNKNOWN"), {
      queue: [
        { turnId: "t3", position: 1 },
        { turnId: "t2", position: 2 },
      ],
      queueVersion: 5n,
    });
    const answer = await turngate.moveQueuedTurn(SESSION, "t3", {
      expectedQueueVersion: 4n,
      backoff: NO_WAIT,
    });
    assert.deepEqual(
      answer.queue.map((turn) => turn.turnId),
      ["t3", "t2"],
    );
    assert.equal(answer.queueVersion, 5n);
    assert.equal(requests.length, 2);
    assert.equal(requests[0]?.turnId, "t3");
    assert.equal(requests[0]?.afterTurnId, "");
    assert.equal(requests[0]?.expectedQueueVersion, 4n);
    assert.match(requests[0]?.requestId ?? "", /^[0-9a-f]{32}$/);
    assert.equal(requests[0]?.requestId, requests[1]?.requestId);
  });

  it("unguarded, after another turn: no expected version is sent", async () => {
    const { turngate, requests } = moveAnswering({ queueVersion: 2n });
    await turngate.moveQueuedTurn(SESSION, "t2", { afterTurnId: "t3" });
    assert.equal(requests[0]?.afterTurnId, "t3");
    assert.equal(requests[0]?.expectedQueueVersion, undefined);
  });

  it("a queue changed meanwhile is a QueueVersionMismatch, not retried", async () => {
    const { turngate, requests } = moveAnswering(refusal(Code.Aborted, "QUEUE_VERSION_MISMATCH"));
    const error = await turngate
      .moveQueuedTurn(SESSION, "t3", { expectedQueueVersion: 1n, backoff: NO_WAIT })
      .then(
        () => assert.fail("moved"),
        (thrown: unknown) => thrown,
      );
    assert.ok(error instanceof QueueVersionMismatch, String(error));
    assert.equal(requests.length, 1);
  });

  it("a turn that is not waiting is a TurnNotQueued", async () => {
    const { turngate } = moveAnswering(refusal(Code.FailedPrecondition, "TURN_NOT_QUEUED"));
    const error = await turngate.moveQueuedTurn(SESSION, "t9").then(
      () => assert.fail("moved"),
      (thrown: unknown) => thrown,
    );
    assert.ok(error instanceof TurnNotQueued, String(error));
  });
});
