import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { durationFromMs, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, ErrorInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";
import {
  ActiveTurnMismatch,
  AdmissionRefusalSchema,
  AdmissionService,
  ErrorReason,
  InteractionNotPending,
  InvalidRequest,
  LimitExceeded,
  NotAuthenticated,
  NotFound,
  PermissionDenied,
  QueueVersionMismatch,
  Refused,
  resumable,
  ServiceUnavailable,
  SessionBusy,
  SessionQueueFull,
  SessionQueuePaused,
  SteerNotFound,
  TurnAlreadySettled,
  TurnCancelled,
  TurnHeldByOtherPrincipal,
  TurnNotActive,
  TurnNotQueued,
  TurnOutcome,
  TurnOwnedByOtherRunner,
  TurnPhase,
  TurngateError,
  toTurngateError,
} from "../src/index.js";
import { refusal, SESSION, turngateWith } from "./fakes.js";

/** The typed error an AdmitTurn call fails with when the server throws `error`: the details go
 * through the Connect protocol's encoding, as from the real listener. */
async function typedFrom(error: ConnectError): Promise<TurngateError> {
  const turngate = turngateWith((router) =>
    router.service(AdmissionService, {
      admitTurn() {
        throw error;
      },
    }),
  );
  try {
    await turngate.admission.admitTurn({ session: turngate.session(SESSION), turnId: "t2", runnerId: "r" });
  } catch (thrown) {
    return toTurngateError(thrown);
  }
  assert.fail("the call should have failed");
}

describe("typed errors from google.rpc details", () => {
  it("SESSION_TURN_IN_USE is a SessionBusy with its retry delay and the AdmissionRefusal's fields", async () => {
    const error = refusal(Code.Aborted, "SESSION_TURN_IN_USE", {
      metadata: { activeTurnId: "t1" },
      retryMs: 1500,
    });
    error.details.push({
      desc: AdmissionRefusalSchema,
      value: {
        reason: ErrorReason.SESSION_TURN_IN_USE,
        activeTurnId: "t1",
        activePhase: TurnPhase.RUNNING,
        activeLeaseExpiresAt: timestampFromMs(1_700_000_000_000),
        retryAfter: durationFromMs(1500),
      },
    });
    const typed = await typedFrom(error);
    assert.ok(typed instanceof SessionBusy);
    assert.equal(typed.name, "SessionBusy");
    assert.equal(typed.code, Code.Aborted);
    assert.equal(typed.reason, ErrorReason.SESSION_TURN_IN_USE);
    assert.equal(typed.retryAfterMs, 1500);
    assert.equal(typed.activeTurnId, "t1");
    assert.equal(typed.stopping, false);
    assert.deepEqual(typed.admission, {
      activeTurnId: "t1",
      activePhase: TurnPhase.RUNNING,
      activeLeaseExpiresAt: new Date(1_700_000_000_000),
      retryAfterMs: 1500,
      settledOutcome: TurnOutcome.UNSPECIFIED,
    });
    assert.equal(typed.message, "refused: SESSION_TURN_IN_USE");
  });

  it("SESSION_STOPPING is a SessionBusy that is stopping", async () => {
    const typed = await typedFrom(refusal(Code.Aborted, "SESSION_STOPPING", { retryMs: 200 }));
    assert.ok(typed instanceof SessionBusy);
    assert.equal(typed.stopping, true);
    assert.equal(typed.retryAfterMs, 200);
  });

  const byReason: [string, Code, new (...args: never[]) => Refused][] = [
    ["TURN_CANCELLED", Code.FailedPrecondition, TurnCancelled],
    ["TURN_ALREADY_SETTLED", Code.FailedPrecondition, TurnAlreadySettled],
    ["TURN_OWNED_BY_OTHER_RUNNER", Code.FailedPrecondition, TurnOwnedByOtherRunner],
    ["TURN_NOT_ACTIVE", Code.FailedPrecondition, TurnNotActive],
    ["INTERACTION_NOT_PENDING", Code.FailedPrecondition, InteractionNotPending],
    ["LIMIT_EXCEEDED", Code.ResourceExhausted, LimitExceeded],
    ["TURN_HELD_BY_OTHER_PRINCIPAL", Code.PermissionDenied, TurnHeldByOtherPrincipal],
    ["SESSION_QUEUE_FULL", Code.ResourceExhausted, SessionQueueFull],
    ["SESSION_QUEUE_PAUSED", Code.Aborted, SessionQueuePaused],
    ["ACTIVE_TURN_MISMATCH", Code.FailedPrecondition, ActiveTurnMismatch],
    ["STEER_NOT_FOUND", Code.FailedPrecondition, SteerNotFound],
    ["QUEUE_VERSION_MISMATCH", Code.Aborted, QueueVersionMismatch],
    ["TURN_NOT_QUEUED", Code.FailedPrecondition, TurnNotQueued],
  ];
  for (const [reason, code, kind] of byReason) {
    it(`${reason} is a ${kind.name}`, async () => {
      const typed = await typedFrom(refusal(code, reason));
      assert.ok(typed instanceof kind, `${typed.name} for ${reason}`);
      assert.equal((typed as Refused).reasonName, reason);
      assert.equal(ErrorReason[(typed as Refused).reason], reason);
    });
  }

  it("TURN_ALREADY_SETTLED says how the turn ended", async () => {
    const error = refusal(Code.FailedPrecondition, "TURN_ALREADY_SETTLED");
    error.details.push({
      desc: AdmissionRefusalSchema,
      value: { reason: ErrorReason.TURN_ALREADY_SETTLED, settledOutcome: TurnOutcome.COMPLETED },
    });
    const typed = await typedFrom(error);
    assert.ok(typed instanceof TurnAlreadySettled);
    assert.equal(typed.outcome, TurnOutcome.COMPLETED);
  });

  it("LIMIT_EXCEEDED names its limit; watch_buffer is resumable, the others are not", async () => {
    const buffer = await typedFrom(
      refusal(Code.ResourceExhausted, "LIMIT_EXCEEDED", { metadata: { limit: "watch_buffer" } }),
    );
    assert.ok(buffer instanceof LimitExceeded);
    assert.equal(buffer.limit, "watch_buffer");
    assert.equal(resumable(buffer), true);
    const streams = await typedFrom(
      refusal(Code.ResourceExhausted, "LIMIT_EXCEEDED", { metadata: { limit: "watch_streams_per_session" } }),
    );
    assert.equal(resumable(streams), false);
  });

  it("SESSION_QUEUE_FULL is a LimitExceeded over max_queue_depth", async () => {
    const typed = await typedFrom(refusal(Code.ResourceExhausted, "SESSION_QUEUE_FULL"));
    assert.ok(typed instanceof SessionQueueFull && typed instanceof LimitExceeded);
    assert.equal(typed.limit, "max_queue_depth");
  });

  it("INVALID_ARGUMENT is an InvalidRequest naming each field violation", async () => {
    const error = new ConnectError("invalid request", Code.InvalidArgument, undefined, [
      {
        desc: BadRequestSchema,
        value: {
          fieldViolations: [
            { field: "turn_id", description: "is required" },
            { field: "session.project_id", description: "must match the identifier syntax" },
          ],
        },
      },
    ]);
    const typed = await typedFrom(error);
    assert.ok(typed instanceof InvalidRequest);
    assert.deepEqual(typed.violations, [
      { field: "turn_id", description: "is required" },
      { field: "session.project_id", description: "must match the identifier syntax" },
    ]);
  });

  it("a reason newer than this client is a Refused with the name as sent", async () => {
    const typed = await typedFrom(refusal(Code.FailedPrecondition, "SOMETHING_NEW"));
    assert.equal(typed.constructor, Refused);
    assert.equal((typed as Refused).reason, ErrorReason.UNSPECIFIED);
    assert.equal((typed as Refused).reasonName, "SOMETHING_NEW");
  });

  it("a newer reason with PERMISSION_DENIED stays a PermissionDenied", async () => {
    const typed = await typedFrom(refusal(Code.PermissionDenied, "SOMETHING_NEW"));
    assert.equal(typed.constructor, PermissionDenied);
  });

  it("an ErrorInfo of another domain is not a refusal", async () => {
    const error = new ConnectError("proxy says no", Code.FailedPrecondition, undefined, [
      { desc: ErrorInfoSchema, value: { reason: "SESSION_TURN_IN_USE", domain: "proxy.example" } },
    ]);
    const typed = await typedFrom(error);
    assert.equal(typed.constructor, TurngateError);
    assert.equal(typed.details.errorInfo?.domain, "proxy.example");
  });

  it("UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED and ABORTED without a reason are ServiceUnavailable", async () => {
    for (const code of [Code.Unavailable, Code.DeadlineExceeded, Code.Canceled, Code.Aborted]) {
      const typed = await typedFrom(new ConnectError("blip", code));
      assert.ok(typed instanceof ServiceUnavailable, Code[code]);
      assert.equal(resumable(typed), true);
    }
  });

  it("UNAUTHENTICATED, PERMISSION_DENIED and NOT_FOUND have their classes", async () => {
    assert.ok((await typedFrom(new ConnectError("who?", Code.Unauthenticated))) instanceof NotAuthenticated);
    assert.ok((await typedFrom(new ConnectError("no", Code.PermissionDenied))) instanceof PermissionDenied);
    assert.ok((await typedFrom(new ConnectError("none", Code.NotFound))) instanceof NotFound);
  });

  it("a failed fetch (connect-web's UNKNOWN caused by a TypeError) is ServiceUnavailable", () => {
    const typed = toTurngateError(new TypeError("fetch failed"));
    assert.ok(typed instanceof ServiceUnavailable);
    assert.equal(typed.cause.code, Code.Unknown);
  });

  it("a typed error is returned as it is", () => {
    const typed = toTurngateError(new ConnectError("blip", Code.Unavailable));
    assert.equal(toTurngateError(typed), typed);
  });
});
