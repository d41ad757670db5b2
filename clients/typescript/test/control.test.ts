import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import {
  ClearQueueResponseSchema,
  ControlService,
  InteractionStatus,
  ResolveInteractionResponseSchema,
  ResumeQueueResponseSchema,
  type ClearQueueRequest,
  type ResolveInteractionRequest,
  type ResumeQueueRequest,
} from "../src/index.js";
import { NO_WAIT, refusal, SESSION, turngateWith } from "./fakes.js";

describe("the gateway's other writes", () => {
  it("a resolution whose outcome is unknown is sent again with its request id", async () => {
    const requests: ResolveInteractionRequest[] = [];
    const turngate = turngateWith((router) =>
      router.service(ControlService, {
        resolveInteraction(request) {
          requests.push(request);
          if (requests.length === 1) {
            throw refusal(Code.Unavailable, "WRITE_OUTCOME_UNKNOWN");
          }
          return create(ResolveInteractionResponseSchema, {
            turnId: "t1",
            interaction: { interactionId: request.interactionId, status: InteractionStatus.RESOLVED },
          });
        },
      }),
    );
    const answer = await turngate.resolveInteraction(SESSION, "i1", "yes", { backoff: NO_WAIT });
    assert.equal(answer.interaction?.status, InteractionStatus.RESOLVED);
    assert.equal(requests.length, 2);
    assert.match(requests[0]?.requestId ?? "", /^[0-9a-f]{32}$/);
    assert.equal(requests[0]?.requestId, requests[1]?.requestId);
    assert.equal(requests[1]?.resolution, "yes");
  });

  it("a resume is sent with the caller's request id, again after a blip", async () => {
    const requests: ResumeQueueRequest[] = [];
    const turngate = turngateWith((router) =>
      router.service(ControlService, {
        resumeQueue(request) {
          requests.push(request);
          if (requests.length === 1) {
            throw refusal(Code.Unavailable, "WRITE_OUTCOME_UNKNOWN");
          }
          return create(ResumeQueueResponseSchema, { admittedTurnId: "t2" });
        },
      }),
    );
    const answer = await turngate.resumeQueue(SESSION, { requestId: "resume-1", backoff: NO_WAIT });
    assert.equal(answer.admittedTurnId, "t2");
    assert.deepEqual(
      requests.map((r) => r.requestId),
      ["resume-1", "resume-1"],
    );
  });

  it("a clear whose outcome is unknown is sent again with its request id and reason", async () => {
    const requests: ClearQueueRequest[] = [];
    const turngate = turngateWith((router) =>
      router.service(ControlService, {
        clearQueue(request) {
          requests.push(request);
          if (requests.length === 1) {
            throw refusal(Code.Unavailable, "WRITE_OUTCOME_UNKNOWN");
          }
          return create(ClearQueueResponseSchema, { clearedTurnIds: ["t2", "t3"], activeTurnId: "t1" });
        },
      }),
    );
    const answer = await turngate.clearQueue(SESSION, "start over", { backoff: NO_WAIT });
    assert.deepEqual(answer.clearedTurnIds, ["t2", "t3"]);
    assert.equal(answer.activeTurnId, "t1");
    assert.equal(requests.length, 2);
    assert.match(requests[0]?.requestId ?? "", /^[0-9a-f]{32}$/);
    assert.equal(requests[0]?.requestId, requests[1]?.requestId);
    assert.equal(requests[1]?.reason, "start over");
  });
});
