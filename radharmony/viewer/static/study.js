// The study page: every view of one study side by side, its sections, the prior below.
"use strict";
let split = null, index = 0, total = 0;  // $, q, load, figure, row, start: pages.js

async function show() {
  const s = await load("api/study");
  if (!s) return;
  $("study-id").textContent = `${s.index + 1} / ${s.total}: ${s.study_id} (patient ${s.patient_id}, ` +
    `${s.n_images} images, sections from ${s.section_source})`;
  $("views").replaceChildren(...s.views.map((v, j) => figure(
    `study.png?${q({split, index, j})}`, `${v ?? "view unknown"}${j === s.key_image ? " (key image)" : ""}`)));
  const table = $("sections");
  table.replaceChildren();
  for (const [k, v] of Object.entries(s.sections)) row(table, k, v);
  if (s.prior) {
    $("prior-info").textContent = `${s.prior.study_id}, ${s.prior.days ?? "?"} days earlier. ` +
      `Findings: ${s.prior.findings ?? "-"} Impression: ${s.prior.impression ?? "-"}`;
    $("prior-views").replaceChildren(...s.prior.views.map((v, j) => figure(
      `study.png?${q({split, index, j, prior: 1})}`, v ?? "view unknown")));
  } else {
    $("prior-info").textContent = "none";
    $("prior-views").replaceChildren();
  }
}

start("prev-study", "next-study");
