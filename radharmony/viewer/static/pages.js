// Helpers shared by the study and question pages (loaded before each page's own script).
"use strict";
const $ = (id) => document.getElementById(id);
function q(params) {
  return Object.entries(params).filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&");
}

function figure(src, caption) {
  const fig = document.createElement("figure");
  const img = document.createElement("img");
  img.src = src; img.alt = caption; img.width = 320;
  const cap = document.createElement("figcaption");
  cap.textContent = caption;
  fig.append(img, cap);
  return fig;
}

function row(table, name, text) {
  const tr = table.insertRow();
  const th = document.createElement("th");
  th.textContent = name;
  const td = tr.insertCell();
  td.textContent = text === null || text === undefined ? "-" : text;
  tr.prepend(th);
}

// The page's record at `api` for the current split and index (also sets `total`); null after
// showing the server's error.
async function load(api) {
  const res = await fetch(`${api}?${q({split, index})}`);
  const s = await res.json();
  $("error").hidden = res.ok;
  if (!res.ok) { $("error").textContent = s.error; return null; }
  total = s.total;
  return s;
}

// Paging: the page's own script defines `show()` and the globals split, index, total.
function step(d) { if (total) { index = (index + d + total) % total; show(); } }

async function start(prevId, nextId) {
  const meta = await (await fetch("api/meta")).json();
  for (const s of meta.splits) $("split").add(new Option(`${s.title}`, s.key));
  split = meta.splits[0].key;
  $("split").onchange = () => { split = $("split").value; index = 0; show(); };
  $(prevId).onclick = () => step(-1);
  $(nextId).onclick = () => step(1);
  document.addEventListener("keydown", (e) => {
    if (e.key === "ArrowLeft") step(-1);
    if (e.key === "ArrowRight") step(1);
  });
  show();
}
