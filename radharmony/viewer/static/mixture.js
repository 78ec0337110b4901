// The mixture page: records paged and filtered by task, source and split, searched by id; one
// record as an export format renders it, its images with the boxes, its prior study.
"use strict";
const SVG = "http://www.w3.org/2000/svg";
const COLOURS = {target: "#ff0000", fields: "#00c8ff"};
const DISPLAY = 448;  // long side of a shown image, CSS pixels
const state = {task: "", source: "", split: "", format: "llava", offset: 0, id: null};
let pageSize = 50;

function fromUrl() {
  const p = new URLSearchParams(location.search);
  for (const k of ["task", "source", "split", "format", "id"]) if (p.get(k)) state[k] = p.get(k);
  state.offset = parseInt(p.get("offset") || "0", 10) || 0;
}

function toUrl() {
  const params = {task: state.task || null, source: state.source || null,
                  split: state.split || null, format: state.format,
                  offset: state.offset || null, id: state.id};
  history.replaceState(null, "", `?${q(params)}`);
}

function showError(text) {
  $("error").hidden = !text;
  $("error").textContent = text || "";
}

async function getJson(url) {
  const res = await fetch(url);
  const body = await res.json();
  return [res.ok, body];
}

async function loadPage() {
  const [ok, page] = await getJson(`api/records?${q({task: state.task || null,
    source: state.source || null, split: state.split || null, offset: state.offset,
    limit: pageSize})}`);
  if (!ok) { showError(page.error); return; }
  const list = $("list");
  list.dataset.total = page.total;
  list.replaceChildren(...page.items.map((it) => {
    const li = document.createElement("li");
    li.dataset.recordId = it.record_id;
    li.dataset.task = it.task;
    li.textContent = `${it.record_id} ${it.task} · ${it.source} · ${it.split}`;
    li.title = it.sample_id;
    li.onclick = () => openRecord(it.record_id);
    if (it.record_id === state.id) li.classList.add("active");
    return li;
  }));
  const last = Math.min(page.offset + page.items.length, page.total);
  $("status").textContent = page.total ? `${page.offset + 1}\u2013${last} of ${page.total}` :
    "no record matches";
}

function imageBox(src, item, boxes) {
  const fig = document.createElement("figure");
  const k = DISPLAY / Math.max(item.width, item.height);
  const box = document.createElement("div");
  box.className = "image-box";
  box.style.cssText = `position:relative;width:${item.width * k}px;height:${item.height * k}px;background:#000`;
  const img = document.createElement("img");
  img.src = src; img.alt = item.path;
  img.style.cssText = "position:absolute;inset:0;width:100%;height:100%";
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${item.width} ${item.height}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.style.cssText = "position:absolute;inset:0;width:100%;height:100%";
  for (const b of boxes) {
    const r = document.createElementNS(SVG, "rect");
    const [x0, y0, x1, y1] = b.box;
    r.setAttribute("x", x0); r.setAttribute("y", y0);
    r.setAttribute("width", x1 - x0); r.setAttribute("height", y1 - y0);
    r.setAttribute("fill", "none");
    r.setAttribute("stroke", COLOURS[b.kind]);
    r.setAttribute("stroke-width", "2");
    r.setAttribute("vector-effect", "non-scaling-stroke");
    if (b.kind === "fields") r.setAttribute("stroke-dasharray", "4 3");
    r.dataset.kind = b.kind; r.dataset.label = b.label;
    svg.append(r);
  }
  box.append(img, svg);
  const cap = document.createElement("figcaption");
  cap.textContent = `${item.view ?? "view unknown"}: ${item.path}`;
  fig.append(box, cap);
  return fig;
}

function figures(rec, items, prior) {
  return items.map((it) => {
    if (it.error) {
      const p = document.createElement("p");
      p.className = "image-error"; p.textContent = it.error;
      return p;
    }
    if (it.volume) {  // a volume: its three planes (static/planes.js)
      const fig = document.createElement("figure");
      const box = document.createElement("div");
      box.className = "volume-box";
      window.RadPlanes.mount(box, it.volume, { id: rec.record_id, j: it.j, prior: prior ? 1 : 0 },
                             { slice: "record_volume.png", mask: null, legend: null });
      const cap = document.createElement("figcaption");
      cap.textContent = `volume: ${it.path}` + (it.volume.boxes_note ? ` (${it.volume.boxes_note})` : "");
      fig.append(box, cap);
      return fig;
    }
    return imageBox(`record.png?${q({id: rec.record_id, j: it.j, prior: prior ? 1 : 0})}`,
                    it, !prior && it.j === 0 ? rec.boxes : []);
  });
}

function dl(target, entries) {
  target.replaceChildren();
  for (const [k, v] of entries) {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd");
    if (v instanceof Node) dd.append(v); else dd.textContent = v ?? "-";
    target.append(dt, dd);
  }
}

async function openRecord(id) {
  state.id = id;
  toUrl();
  const [ok, rec] = await getJson(`api/record?${q({id, format: state.format})}`);
  document.body.dataset.ready = "1";
  for (const li of $("list").children) li.classList.toggle("active", li.dataset.recordId === id);
  if (!ok) {
    $("record").hidden = true;
    $("record-id").textContent = `record ${id}`;
    showError(rec.error);
    return;
  }
  showError(null);
  $("record").hidden = false;
  $("record").dataset.recordId = rec.record_id;
  $("record-id").textContent = `${rec.record_id}: ${rec.task} (${rec.family}) · ${rec.source} · ${rec.split}`;
  $("images").replaceChildren(...figures(rec, rec.images, false));
  $("prior").hidden = !rec.prior;
  if (rec.prior) {
    $("prior-info").textContent = `${rec.prior.study_id ?? "?"}, ${rec.prior.days ?? "?"} days earlier`;
    $("prior-images").replaceChildren(...figures(rec, rec.prior.images, true));
    $("prior-report").textContent = rec.prior.report ?? "";
  }
  $("format-name").textContent = state.format;
  $("rendering").textContent = JSON.stringify(rec.rendered, null, 2);
  $("prompt").textContent = rec.prompt;
  $("target").textContent = rec.target;
  $("record-fields").textContent = JSON.stringify(rec.fields, null, 2);
  const s = rec.source_row;
  let link = `start \`${s.viewer_command}\` and open its address with ?id=${s.sample_id}`;
  if (s.viewer_link) {
    link = document.createElement("a");
    link.href = s.viewer_link; link.textContent = s.sample_id; link.id = "source-link";
    link.rel = "noreferrer";
  }
  dl($("source-row"), [["dataset", s.dataset], ["source", s.source],
    ["source split", s.source_split], ["sample", s.sample_id], ["study", s.study_id],
    ["patient", s.patient_id], ["in the dataset viewer", link]]);
}

async function startMixture() {
  fromUrl();
  const meta = await (await fetch("api/meta")).json();
  pageSize = meta.page_size;
  $("title").textContent = `${meta.name ?? "mixture"}: ${meta.records} records`;
  for (const k of ["task", "source", "split"]) {
    for (const v of meta.choices[k]) $(k).add(new Option(v, v));
    $(k).value = state[k];
    $(k).onchange = () => { state[k] = $(k).value; state.offset = 0; toUrl(); loadPage(); };
  }
  for (const [k, title] of Object.entries(meta.formats)) $("format").add(new Option(title, k));
  $("format").value = state.format;
  $("format").onchange = () => { state.format = $("format").value; if (state.id) openRecord(state.id); };
  $("prev-page").onclick = () => { state.offset = Math.max(0, state.offset - pageSize); toUrl(); loadPage(); };
  $("next-page").onclick = () => {
    if (state.offset + pageSize < +$("list").dataset.total) { state.offset += pageSize; toUrl(); loadPage(); }
  };
  $("search-form").onsubmit = (e) => { e.preventDefault(); openRecord($("search").value.trim()); };
  await loadPage();
  if (state.id) await openRecord(state.id);
  else document.body.dataset.ready = "1";
}

startMixture();
