// Where the console is: project, session and turn in the URL's fragment, so a reload or a link
// returns to the same view.

export function current() {
  const params = new URLSearchParams(location.hash.slice(1));
  return {
    project: params.get("project") || "",
    session: params.get("session") || "",
    turn: params.get("turn") || "",
  };
}

export function href({ project, session = "", turn = "" }) {
  const params = new URLSearchParams({ project });
  if (session) params.set("session", session);
  if (turn) params.set("turn", turn);
  return `#${params}`;
}
