// The gateway token the operator typed: kept for this tab only (sessionStorage), never in the URL.

const KEY = "turngate.console.token";

export function token() {
  return sessionStorage.getItem(KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}
