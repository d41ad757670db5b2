// Building the page from data: every string becomes a text node, never markup, so nothing a
// runner wrote (tool names, errors, reasons) can run or restyle the page.

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "className") node.className = value;
    else if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function replace(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

// "TURN_PHASE_RUNNING" -> "RUNNING"; protobuf's JSON omits zero values, so absent -> "".
export function enumName(value, prefix) {
  if (!value) return "";
  return value.startsWith(prefix) ? value.slice(prefix.length) : value;
}

// A definition list of the fields that have a value.
export function fields(rows) {
  const list = el("dl", { className: "fields" });
  for (const [label, value] of rows) {
    if (value === undefined || value === null || value === "" || value === false) continue;
    append(list, [el("dt", {}, label), el("dd", {}, value)]);
  }
  return list;
}

// Each cell carries its column's heading (data-label), which a narrow screen shows beside it when
// the rows become cards.
export function table(caption, headings, rows) {
  return el("table", {},
    el("caption", {}, caption),
    el("thead", {}, el("tr", {}, headings.map((heading) => el("th", { scope: "col" }, heading)))),
    el("tbody", {}, rows.map((cells) => el("tr", {},
      cells.map((cell, column) => el("td", { "data-label": headings[column] }, cell))))));
}

export function errorText(error) {
  return error && error.code ? `${error.code}: ${error.message}` : String(error && error.message || error);
}
