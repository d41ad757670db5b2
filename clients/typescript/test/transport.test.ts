import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { bearerToken, SessionService } from "../src/index.js";
import { SESSION, turngateWith } from "./fakes.js";

/** The Authorization header each GetSession call carried. */
async function authorizationSent(
  token: Parameters<typeof bearerToken>[0],
  calls = 1,
): Promise<(string | null)[]> {
  const seen: (string | null)[] = [];
  const turngate = turngateWith(
    (router) =>
      router.service(SessionService, {
        getSession(_request, context) {
          seen.push(context.requestHeader.get("authorization"));
          return {};
        },
      }),
    [bearerToken(token)],
  );
  for (let call = 0; call < calls; call++) {
    await turngate.sessions.getSession({ session: turngate.session(SESSION) });
  }
  return seen;
}

describe("the bearer token", () => {
  it("is sent as Authorization: Bearer on every call", async () => {
    assert.deepEqual(await authorizationSent("tok-1", 2), ["Bearer tok-1", "Bearer tok-1"]);
  });

  it("may come from a function, asked at every call (a token refreshed elsewhere)", async () => {
    let issued = 0;
    assert.deepEqual(await authorizationSent(async () => `tok-${++issued}`, 2), [
      "Bearer tok-1",
      "Bearer tok-2",
    ]);
  });
});
