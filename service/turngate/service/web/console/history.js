// What the console has seen of one session, kept in sessionStorage so a reload shows it again
// and resumes the watch after it: the cursor (epoch, seq) and the last events.

const KEPT_EVENTS = 500;

function key(project, session) {
  return `turngate.console.history:${project}/${session}`;
}

export function load(project, session) {
  try {
    const saved = JSON.parse(sessionStorage.getItem(key(project, session)));
    if (saved && saved.cursor && Array.isArray(saved.events)) return saved;
  } catch {
    // A damaged entry: start again from a snapshot.
  }
  return { cursor: { epoch: 0, seq: 0 }, events: [] };
}

export function save(project, session, history) {
  history.events = history.events.slice(-KEPT_EVENTS);
  try {
    sessionStorage.setItem(key(project, session), JSON.stringify(history));
  } catch {
    // Storage full: the live view goes on; a reload starts from a snapshot.
  }
}
