// Trace ids as links through the operator's template (TURNGATE_CONSOLE_TRACE_URL, `{trace_id}`).

import { el } from "./dom.js";

let template = "";

export function setTraceTemplate(value) {
  template = typeof value === "string" ? value : "";
}

// The link for a trace id, or the id as text when no (http or https) template is set.
export function traceLink(traceId) {
  if (!template.includes("{trace_id}")) return el("code", {}, traceId);
  try {
    const url = new URL(template.replaceAll("{trace_id}", encodeURIComponent(traceId)), location.href);
    if (url.protocol === "http:" || url.protocol === "https:") {
      return el("a", { href: url.href, className: "trace", target: "_blank", rel: "noopener noreferrer" }, traceId);
    }
  } catch {
    // Not a URL: show the id alone.
  }
  return el("code", {}, traceId);
}
