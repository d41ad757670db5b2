// Finding sessions: before a project is chosen, the projects this tab's token may see that have
// sessions (ListProjects); on a project's page, its sessions, busy or idle, the most recently
// active first (ListSessions). Each list is read a page at a time, "Load more" reading the next;
// a session opens as the busy list's do.

import { listProjects, listSessions } from "./api.js";
import { el, errorText, replace, table } from "./dom.js";
import { href } from "./route.js";
import { badge } from "./status.js";
import { moment } from "./time.js";

const PAGE = 20;

// A table filled a page at a time: read(token, signal) answers { items, nextPageToken }.
function pagedTable({ id, caption, headings, read, row, empty, what }) {
  const controller = new AbortController();
  const status = el("p", { id: `${id}-status`, role: "status" }, "loading…");
  const slot = el("div", { id });
  const more = el("button", { type: "button", id: `${id}-more`, hidden: true }, "Load more");
  let body = null;
  let token = "";

  async function load() {
    more.disabled = true;
    try {
      const page = await read(token, controller.signal);
      const items = page.items || [];
      if (!body && items.length) {
        const shown = table(caption, headings, []);
        body = shown.querySelector("tbody");
        replace(slot, shown);
      }
      if (body) body.append(...table(caption, headings, items.map(row)).querySelector("tbody").children);
      token = page.nextPageToken || "";
      more.hidden = !token;
      replace(status, body ? "" : empty);
    } catch (error) {
      if (controller.signal.aborted) return;
      replace(status, `Could not list ${what}: ${errorText(error)}`);
    } finally {
      more.disabled = false;
    }
  }

  more.addEventListener("click", load);
  load();
  return { nodes: [status, slot, more], leave: () => controller.abort() };
}

function projectRow(project) {
  return [
    el("a", { href: href({ project: project.projectId }) }, project.projectId),
    moment(project.lastActivityAt),
  ];
}

// The landing page: the projects to choose from (or one typed above).
export function showProjects(root) {
  const list = pagedTable({
    id: "projects",
    caption: "Projects with sessions, by name",
    headings: ["Project", "Last activity"],
    read: async (token, signal) => {
      const page = await listProjects(PAGE, token, signal);
      return { items: page.projects, nextPageToken: page.nextPageToken };
    },
    row: projectRow,
    empty: "No project this token may see has sessions yet: enter one above.",
    what: "projects",
  });
  replace(root,
    el("h2", {}, "Projects"),
    el("p", { className: "empty", id: "start" }, "Nothing is open yet. Type a project above (the id your runners "
      + "pass to turngate, such as the tour's demo) or choose one below to see its busy and recent sessions; "
      + "add a session (chat-1) to follow it live."),
    list.nodes);
  return list.leave;
}

function sessionRow(project, summary) {
  const snapshot = summary.snapshot || {};
  const session = snapshot.session.sessionId;
  const turn = (turnId) => turnId ? el("a", { href: href({ project, session, turn: turnId }) }, turnId) : "—";
  const last = snapshot.lastSettled;
  return [
    el("a", { href: href({ project, session }) }, session),
    moment(summary.lastActivityAt),
    badge(snapshot.phase, "SESSION_PHASE_") || "—",
    turn(snapshot.active && snapshot.active.turnId),
    String((snapshot.queue || []).length || "—"),
    turn(last && last.turnId),
    (last && badge(last.outcome, "TURN_OUTCOME_")) || "—",
  ];
}

// A project's sessions, the most recently active first, under its busy list.
export function showSessions(root, { project }) {
  const list = pagedTable({
    id: "sessions",
    caption: "Sessions, the most recently active first",
    headings: ["Session", "Last activity", "Phase", "Active turn", "Queued", "Last turn", "Outcome"],
    read: async (token, signal) => {
      const page = await listSessions(project, PAGE, token, signal);
      return { items: page.sessions, nextPageToken: page.nextPageToken };
    },
    row: (summary) => sessionRow(project, summary),
    empty: `No session of project ${project} has been recorded.`,
    what: "sessions",
  });
  replace(root, el("h2", {}, `Sessions of ${project}`), list.nodes);
  return list.leave;
}
