// The gateway token the operator typed: kept for this tab only (sessionStorage), never in the URL.

import { replace } from "./dom.js";

const KEY = "turngate.console.token";

export function token() {
  return sessionStorage.getItem(KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}

// Whether a write (`what`: "Stop", "Steer", ...) was refused for want of a token the server
// accepts: then `report` says what it needs and the token field takes the focus. A write is sent
// with whatever token there is (none on a server without authentication), and only the server's
// refusal says a token is needed.
export function refusedForToken(what, error, report, tokenInput) {
  if (!error || error.code !== "unauthenticated") return false;
  report.dataset.outcome = "needs-token";
  replace(report, token() ? `${what} was refused: the server does not accept this token; check “Gateway token” above.`
    : `${what} needs a gateway token: enter it in “Gateway token” above.`);
  tokenInput.focus();
  return true;
}
