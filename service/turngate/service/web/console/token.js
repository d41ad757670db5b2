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

// Whether a write (`what`: "Stop", "Steer", ...) may be sent: without a token, `report` says so and
// the token field takes the focus, and nothing is sent (the service would refuse it).
export function tokenReady(what, report, tokenInput) {
  if (token()) return true;
  report.dataset.outcome = "needs-token";
  replace(report, `${what} needs a gateway token: enter it in “Gateway token” above.`);
  tokenInput.focus();
  return false;
}
