// radharmony viewer: every text goes through textContent, never innerHTML.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const state = { meta: null, split: null, label: "", view: "", offset: 0, limit: 50,
                items: [], total: 0, current: null };

function hue(text) {
  let h = 0;
  for (const ch of String(text)) h = (h * 31 + ch.codePointAt(0)) >>> 0;
  return h % 360;
}
const colour = (label, alpha = 1) => `hsla(${hue(label)}, 85%, 50%, ${alpha})`;

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

async function api(path, params = {}) {
  const clean = Object.fromEntries(Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined));
  const res = await fetch(`${path}?${new URLSearchParams(clean)}`);
  const body = await res.json();
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

function showError(msg) {
  const box = $("error");
  box.hidden = !msg;
  box.textContent = msg || "";
}

function splitMeta() {
  return state.meta.splits.find((s) => s.key === state.split) || state.meta.splits[0];
}

function fillSelect(select, values, current, anyText) {
  select.replaceChildren();
  if (anyText !== null) select.append(el("option", { value: "" }, anyText));
  for (const v of values) select.append(el("option", { value: v }, v));
  select.value = values.includes(current) ? current : "";
}

function fillFilters() {
  const m = splitMeta();
  fillSelect($("label"), m.labels, state.label, "any");
  fillSelect($("view"), m.views, state.view, "any");
  $("label").disabled = m.labels.length === 0;
  state.label = $("label").value;
  state.view = $("view").value;
}

function updateUrl() {
  const p = new URLSearchParams();
  if (state.current) p.set("id", state.current.sample_id);
  p.set("split", state.split);
  if (state.label) p.set("label", state.label);
  if (state.view) p.set("view", state.view);
  if (state.offset) p.set("offset", state.offset);
  history.replaceState(null, "", `?${p}`);
}

// long ids differ at the end: keep the key and the tail
function shortId(id, max = 30) {
  if (id.length <= max) return id;
  const cut = id.indexOf(":") + 1;
  return `${id.slice(0, cut)}\u2026${id.slice(id.length - (max - cut - 1))}`;
}

async function loadList() {
  const res = await api("api/samples", { split: state.split, label: state.label, view: state.view,
                                          offset: state.offset, limit: state.limit });
  state.items = res.items;
  state.total = res.total;
  const list = $("list");
  list.replaceChildren();
  list.dataset.total = res.total;
  for (const item of res.items) {
    const li = el("li", { "data-index": item.index, "data-sample-id": item.sample_id,
                          title: [item.sample_id, ...item.positives].join("\n") });
    li.append(el("span", { class: "index" }, item.index), el("span", {}, shortId(item.sample_id)),
              el("span", { class: "view" }, item.view_position));
    li.addEventListener("click", () => showSample({ split: state.split, index: item.index }));
    list.append(li);
  }
  const first = res.total ? state.offset + 1 : 0;
  const unit = splitMeta().row_unit === "volume" ? "volumes" : "images";
  $("status").textContent = `${first}\u2013${state.offset + res.items.length} of ${res.total} ${unit}`;
  $("prev-page").disabled = state.offset === 0;
  $("next-page").disabled = state.offset + res.items.length >= res.total;
  markActive();
}

function markActive() {
  for (const li of $("list").children) {
    li.classList.toggle("active", !!state.current && state.current.split === state.split
                        && Number(li.dataset.index) === state.current.index);
  }
}

function drawBoxes(s) {
  const svg = $("overlay");
  svg.replaceChildren();
  const ann = $("annotators");
  ann.replaceChildren();
  const legend = $("box-legend");
  legend.replaceChildren();
  if (!s.width) return;
  svg.setAttribute("viewBox", `0 0 ${s.width} ${s.height}`);
  const font = Math.max(6, Math.round(s.width / 40));
  for (const b of s.boxes) {
    const g = document.createElementNS(SVG, "g");
    g.setAttribute("data-annotator", b.annotator ?? "");
    const r = document.createElementNS(SVG, "rect");
    r.setAttribute("x", b.x_min);
    r.setAttribute("y", b.y_min);
    r.setAttribute("width", Math.max(0, b.x_max - b.x_min));
    r.setAttribute("height", Math.max(0, b.y_max - b.y_min));
    r.setAttribute("stroke", colour(b.label));
    r.setAttribute("data-label", b.label);
    r.setAttribute("data-annotator", b.annotator ?? "");
    const t = document.createElementNS(SVG, "title");
    t.textContent = b.annotator ? `${b.label} (${b.annotator})` : b.label;
    r.append(t);
    const text = document.createElementNS(SVG, "text");
    text.setAttribute("x", b.x_min + 1);
    text.setAttribute("y", Math.max(font, b.y_min - 2));
    text.setAttribute("font-size", font);
    text.setAttribute("fill", colour(b.label));
    text.textContent = b.annotator ? `${b.label} \u00b7 ${b.annotator}` : b.label;
    g.append(r, text);
    svg.append(g);
  }
  for (const label of [...new Set(s.boxes.map((b) => b.label))]) {
    const chip = el("span", {}, label);
    chip.style.borderColor = colour(label);
    legend.append(chip);
  }
  const annotators = [...new Set(s.boxes.map((b) => b.annotator ?? ""))];
  if (annotators.length > 1 || (annotators.length === 1 && annotators[0] !== "")) {
    for (const a of annotators) {
      const box = el("input", { type: "checkbox", "data-annotator": a });
      box.checked = true;
      box.addEventListener("change", () => {
        for (const g of svg.querySelectorAll("g")) {
          if (g.getAttribute("data-annotator") === a) g.style.display = box.checked ? "" : "none";
        }
      });
      const label = el("label", { class: "annotator" });
      label.append(box, document.createTextNode(` ${a || "(no annotator)"}`));
      ann.append(label);
    }
  }
}

function drawLabels(s) {
  const box = $("labels");
  box.replaceChildren();
  const kinds = { 1: "positive", "-1": "uncertain", 0: "negative" };
  let missing = 0;
  for (const { name, value } of s.labels) {
    if (value === null) { missing += 1; continue; }
    const kind = kinds[value] || "other";
    box.append(el("span", { class: `chip ${kind}`, "data-label": name, title: kind },
                  `${name}${value === -1 ? " ?" : value === 0 ? " \u2013" : ""}`));
  }
  if (!s.labels.length) box.append(el("span", { class: "muted" }, "this dataset has no labels"));
  else if (missing) box.append(el("span", { class: "muted" }, ` ${missing} not mentioned`));
}

function drawReportLabels(s) {
  // each report label with its deciding sentence: the mention and the cue highlighted
  const box = $("report-labels");
  box.replaceChildren();
  const kinds = { 1: "positive", "-1": "uncertain", 0: "negative" };
  if (!s.report_labels || !s.report_labels.length) {
    box.append(el("span", { class: "muted" }, s.report ? "nothing labelled" : "no report"));
    return;
  }
  for (const lab of s.report_labels) {
    const row = el("div", { class: "evidence", "data-label": lab.name });
    row.append(el("span", { class: `chip ${kinds[lab.value] || "other"}` }, lab.name), " ");
    const marks = [lab.mention && { ...lab.mention, cls: "mention" },
                   lab.cue && { ...lab.cue, cls: "cue" }].filter(Boolean)
      .sort((a, b) => a.start - b.start);
    if (marks.length) {
      const from = Math.max(0, s.report.lastIndexOf(lab.sentence || "", marks[0].start));
      const to = Math.max(marks[marks.length - 1].end, from + (lab.sentence || "").length);
      let pos = from;
      for (const m of marks) {
        if (m.start < pos) continue;
        row.append(document.createTextNode(s.report.slice(pos, m.start)));
        row.append(el("mark", { class: m.cls, title: m.cls === "cue" ? lab.cue_kind : lab.rule },
                      s.report.slice(m.start, m.end)));
        pos = m.end;
      }
      row.append(document.createTextNode(s.report.slice(pos, to)));
    } else {
      row.append(el("span", { class: "muted" }, "derived"));
    }
    box.append(row);
  }
}

function drawFields(s) {
  const dl = $("fields");
  dl.replaceChildren();
  const rows = { split: s.split, index: s.index, "view position": s.view_position,
                 patient: s.patient_id, study: s.study_id, ...s.fields };
  for (const [k, v] of Object.entries(rows)) {
    dl.append(el("dt", {}, k), el("dd", {}, v === null ? "\u2014" : v));
  }
}

function textWithSpans(text, from, to, spans) {
  const p = el("p", { class: "body" });
  let pos = from;
  for (const sp of spans) {
    const start = Math.max(sp.start, pos), end = Math.min(sp.end, to);
    if (end <= start) continue;
    if (start > pos) p.append(document.createTextNode(text.slice(pos, start)));
    const mark = el("mark", { class: "span", "data-label": sp.label, title: sp.label },
                    text.slice(start, end));
    mark.style.background = colour(sp.label, 0.3);
    mark.style.borderBottom = `2px solid ${colour(sp.label)}`;
    p.append(mark);
    pos = end;
  }
  if (pos < to) p.append(document.createTextNode(text.slice(pos, to)));
  return p;
}

function drawReport(s) {
  const box = $("report");
  box.replaceChildren();
  const legend = $("span-legend");
  legend.replaceChildren();
  if (!s.report) { box.append(el("p", { class: "muted" }, "no report")); return; }
  for (const label of [...new Set(s.report_spans.map((sp) => sp.label))]) {
    const chip = el("span", {}, label);
    chip.style.borderColor = colour(label);
    chip.style.background = colour(label, 0.3);
    legend.append(chip);
  }
  for (const sec of s.sections) {
    const div = el("div", { class: "section" });
    if (sec.title) div.append(el("h3", {}, sec.title));
    div.append(textWithSpans(s.report, sec.start, sec.end, s.report_spans));
    box.append(div);
  }
}

async function showSample(where) {
  let s;
  try {
    s = await api("api/sample", { split: where.split, index: where.index, id: where.id });
  } catch (err) {
    showError(String(err.message || err));
    return;
  }
  state.current = s;
  if (s.split !== state.split) {  // addressed by sample_id in another split
    state.split = s.split;
    $("split").value = s.split;
    fillFilters();
    state.offset = 0;
    await loadList();
  }
  $("sample-id").textContent = `${s.sample_id}  (${s.index + 1} of ${s.total} in ${s.split})`;
  showError(s.image_error);
  const img = $("image");
  $("image-box").hidden = !!s.volume;
  $("volume-box").hidden = !s.volume;
  if (s.volume) {  // a volume: its three planes (static/planes.js)
    img.removeAttribute("src");
    state.planes = window.RadPlanes.mount($("volume-box"), s.volume, { split: s.split, index: s.index });
  } else if (s.image_error) img.removeAttribute("src");
  else img.src = `image.png?${new URLSearchParams({ split: s.split, index: s.index })}`;
  drawBoxes(s);
  drawLabels(s);
  drawReportLabels(s);
  drawFields(s);
  drawReport(s);
  markActive();
  updateUrl();
}

function step(delta) {
  if (!state.items.length) return;
  const pos = state.items.findIndex((it) => state.current && it.index === state.current.index
                                              && state.current.split === state.split);
  const next = state.items[Math.min(state.items.length - 1, Math.max(0, pos + delta))];
  if (next) showSample({ split: state.split, index: next.index });
}

async function refilter() {
  state.offset = 0;
  await loadList();
  updateUrl();
}

async function init() {
  state.meta = await api("api/meta");
  state.limit = state.meta.page_size;
  const q = new URLSearchParams(location.search);
  const keys = state.meta.splits.map((s) => s.key);
  state.split = keys.includes(q.get("split")) ? q.get("split") : keys[0];
  state.label = q.get("label") || "";
  state.view = q.get("view") || "";
  state.offset = Math.max(0, parseInt(q.get("offset") || "0", 10) || 0);
  fillSelect($("split"), keys, state.split, null);
  fillFilters();
  $("split").addEventListener("change", async () => {
    state.split = $("split").value;
    fillFilters();
    await refilter();
  });
  $("label").addEventListener("change", async () => { state.label = $("label").value; await refilter(); });
  $("view").addEventListener("change", async () => { state.view = $("view").value; await refilter(); });
  $("prev-page").addEventListener("click", async () => {
    state.offset = Math.max(0, state.offset - state.limit); await loadList(); updateUrl();
  });
  $("next-page").addEventListener("click", async () => {
    state.offset += state.limit; await loadList(); updateUrl();
  });
  $("prev-sample").addEventListener("click", () => step(-1));
  $("next-sample").addEventListener("click", () => step(1));
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "SELECT" || e.target.tagName === "INPUT") return;
    if (e.key === "ArrowLeft") step(-1);
    if (e.key === "ArrowRight") step(1);
  });
  try {
    await loadList();
  } catch (err) {
    showError(String(err.message || err));
    return;
  }
  if (q.get("id")) await showSample({ id: q.get("id"), split: q.get("split") });
  else if (q.get("index")) await showSample({ split: state.split, index: q.get("index") });
  else if (state.items.length) await showSample({ split: state.split, index: state.items[0].index });
  document.body.dataset.ready = "1";
}

init().catch((err) => showError(String(err.message || err)));
