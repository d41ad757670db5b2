// The operator console's entry: reads the view from the URL's fragment and shows it.

import { consoleConfig } from "./api.js";
import { el, replace } from "./dom.js";
import { showBusy } from "./busy.js";
import { current, href } from "./route.js";
import { showTimeline } from "./timeline.js";
import { setToken, token } from "./token.js";
import { setTraceTemplate } from "./trace.js";
import { showTurn } from "./turn.js";

const view = document.getElementById("view");
const where = document.getElementById("where");
const tokenForm = document.getElementById("token-form");
const tokenInput = document.getElementById("token");
const tokenStatus = document.getElementById("token-status");
let leave = () => {};

function render() {
  leave();
  const at = current();
  where.elements.project.value = at.project;
  where.elements.session.value = at.session;
  document.title = ["turngate console", at.project, at.session, at.turn].filter(Boolean).join(" · ");
  if (!at.project) {
    leave = () => {};
    replace(view, el("p", { className: "empty", id: "start" }, "Nothing is open yet. Type a project above "
      + "(the id your runners pass to turngate, such as the tour's demo) and press Open to see its busy sessions; "
      + "add a session (chat-1) to follow it live."));
  } else if (at.turn && at.session) {
    leave = showTurn(view, at);
  } else if (at.session) {
    leave = showTimeline(view, at, tokenInput);
  } else {
    leave = showBusy(view, at);
  }
}

function showTokenStatus() {
  replace(tokenStatus, token() ? "A token is set for this tab." : "No token: reads only where the server allows it.");
}

where.addEventListener("submit", (submitted) => {
  submitted.preventDefault();
  const project = where.elements.project.value.trim();
  const session = where.elements.session.value.trim();
  location.hash = href({ project, session });
});

tokenForm.addEventListener("submit", (submitted) => {
  submitted.preventDefault();
  setToken(tokenInput.value.trim());
  showTokenStatus();
  render();
});

document.getElementById("forget-token").addEventListener("click", () => {
  tokenInput.value = "";
  setToken("");
  showTokenStatus();
  render();
});

window.addEventListener("hashchange", () => {
  render();
  view.focus();
});

tokenInput.value = token();
showTokenStatus();
setTraceTemplate((await consoleConfig()).traceUrl);
render();
