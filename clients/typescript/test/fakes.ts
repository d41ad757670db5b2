/** A Turngate over an in-memory router (connect's createRouterTransport): the real Connect
 * protocol encoding, with handlers the test writes. */
import { create, type DescMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import {
  Code,
  ConnectError,
  createRouterTransport,
  type ConnectRouter,
  type Interceptor,
} from "@connectrpc/connect";
import { ErrorInfoSchema, RetryInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";
import {
  SessionEventSchema,
  SessionRefSchema,
  type SessionEvent,
} from "../src/gen/turngate/v1/turngate_pb.js";
import { DOMAIN, Turngate } from "../src/index.js";

export const PROJECT = "p-ts";
export const SESSION = "s-1";

/** Backoff without waiting, so reconnections are not slowed down in unit tests. */
export const NO_WAIT = { initialMs: 0, maxMs: 0 };

export function turngateWith(
  routes: (router: ConnectRouter) => void,
  interceptors: Interceptor[] = [],
): Turngate {
  return new Turngate(createRouterTransport(routes, { transport: { interceptors } }), PROJECT);
}

/** A refusal as the service sends it: ErrorInfo with the contract's domain, and RetryInfo. */
export function refusal(
  code: Code,
  reason: string,
  options: { metadata?: Record<string, string>; retryMs?: number } = {},
): ConnectError {
  const details: ConstructorParameters<typeof ConnectError>[3] = [
    { desc: ErrorInfoSchema, value: { reason, domain: DOMAIN, metadata: options.metadata ?? {} } },
  ];
  if (options.retryMs !== undefined) {
    details.push({ desc: RetryInfoSchema, value: { retryDelay: durationFromMs(options.retryMs) } });
  }
  return new ConnectError(`refused: ${reason}`, code, undefined, details);
}

export function event(init: MessageInitShape<typeof SessionEventSchema>): SessionEvent {
  const made = create(SessionEventSchema, init);
  made.session = create(SessionRefSchema, { projectId: PROJECT, sessionId: SESSION });
  return made;
}

export function snapshot(seq: bigint, epoch: bigint, resync = false): SessionEvent {
  return event({ seq, epoch, kind: { case: "snapshot", value: { seq, epoch, resync } } });
}

export function toolCall(seq: bigint, epoch: bigint, callId: string): SessionEvent {
  return event({
    seq,
    epoch,
    kind: { case: "toolCall", value: { turnId: "t1", toolCall: { callId, name: "search" } } },
  });
}

/** A Turngate whose one method (`route` puts `handle` where it belongs) answers `answers` in turn
 * (a ConnectError is thrown), and the requests it received. */
export function answering<Request, Response extends DescMessage>(
  schema: Response,
  answers: (MessageInitShape<Response> | ConnectError)[],
  route: (router: ConnectRouter, handle: (request: Request) => MessageShape<Response>) => void,
): { turngate: Turngate; requests: Request[] } {
  const requests: Request[] = [];
  const turngate = turngateWith((router) =>
    route(router, (request) => {
      requests.push(request);
      const answer = answers.shift();
      if (answer instanceof ConnectError) {
        throw answer;
      }
      return create(schema, answer);
    }),
  );
  return { turngate, requests };
}
