// The question page: a VQA question, its options (the correct one marked), its images.
"use strict";
let split = null, index = 0, total = 0;  // $, q, load, figure, row, start: pages.js

async function show() {
  const s = await load("api/question");
  if (!s) return;
  $("question-id").textContent = `${s.index + 1} / ${s.total}: ${s.question_id} ` +
    `(study ${s.study_id}, patient ${s.patient_id})`;
  $("question").textContent = s.question;
  const correct = (s.answer_letter || "").split(",");
  $("options").replaceChildren(...(s.options || []).map((o) => {
    const li = document.createElement("li");
    li.textContent = o.slice(3) + (correct.includes(o[0]) ? "  \u2713 correct" : "");
    if (correct.includes(o[0])) li.style.fontWeight = "bold";
    return li;
  }));
  const table = $("fields");
  table.replaceChildren();
  for (const k of ["answer", "answer_format", "answer_letter", "explanation", "task",
                   "category", "subcategory", "split", "ref_study_id"]) {
    if (k in s) row(table, k, s[k]);
  }
  $("views").replaceChildren(...s.views.map((v, j) => figure(
    `question.png?${q({split, index, j})}`, `${v ?? "view unknown"}${j === s.key_image ? " (key image)" : ""}`)));
  $("ref-title").hidden = !s.n_ref_images;
  $("ref-views").replaceChildren(...Array.from({length: s.n_ref_images}, (_, j) => figure(
    `question.png?${q({split, index, j, ref: 1})}`, `reference ${j + 1}`)));
}

start("prev-question", "next-question");
