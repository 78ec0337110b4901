"""Temporal tasks: a study read beside the patient's earlier one.

* ``report_findings_with_prior`` -- the findings of a study from its images, the prior study's
  frontal image, the prior's findings and the days between them. The prior is the study
  layer's (:func:`radharmony.studies.priors.find_priors`): the latest study of the same
  patient strictly earlier, never another patient's or a later one. A study without one (or
  whose prior has no frontal image) is a record without prior inputs, counted in
  ``mixture.json``'s ``counted`` (``without_prior``), whose prompt is the plain findings
  prompt: only a record with a prior is asked to compare. With the spec's
  ``without_prior: skip`` such a study gives no record (skipped and counted, ``without_prior``).
* ``progression`` -- MS-CXR-T: per (image, finding) labelled, improving / stable / worsening,
  from the current image and the prior one.
* ``vqa_difference`` -- Medical-Diff-VQA's difference questions with both studies: the
  current study's image as the record's image, the reference (prior) study's in the prior
  fields.

Every record with a prior has the same ``fields``, the names the trainers' formats and
:class:`~radharmony.mixture.dataset.MixtureDataset` read: ``prior_study_id``,
``prior_image_paths``, ``prior_views``, ``prior_report`` and ``days`` (None when the dates are
an order or unknown).
"""

from __future__ import annotations

import warnings

import numpy as np

from ...errors import StudyWarning
from ..records import OMIT, fields_json
from .base import Draft, Rendered, Task, register_capability, register_task
from .reports import FINDINGS_PROMPTS, section_fields

#: the comparison a findings-with-prior prompt makes, only for a study with a prior
#: (slots ``{compared}`` and ``{compare}``; empty without one: the prompt never claims a prior)
COMPARED, COMPARE = ", compared with the prior study", " Compare with the prior study."
PRIOR_PROMPTS = tuple(p.replace("chest X-ray", "chest X-ray{compared}")
                      if "chest X-ray" in p else p + "{compare}" for p in FINDINGS_PROMPTS)
PROGRESSION_PROMPTS = ("Compared with the prior image, is the {finding} improving, stable or "
                       "worsening?",
                       "How has the {finding} changed since the prior chest X-ray: improving, "
                       "stable or worsening?",
                       "{Finding} progression between the two images (improving / stable / "
                       "worsening)?")
DIFF_PROMPTS = ("{question}", "Compare the current chest X-ray with the prior one. {question}",
                "{question}\nThe first image is the current study, the prior study is given "
                "too.")
PROGRESSION = ("improving", "stable", "worsening")
#: the canonical frontal views (the prior's image a record shows)
FRONTAL = ("PA", "AP")

register_capability("progression", lambda s, kw: s.row_unit == "image"
                    and "prior_image_path" in s.columns
                    and any(str(c).endswith("_progression") for c in s.columns),
                    meaning="a change label between an image and its prior (MS-CXR-T)")
register_capability("difference", lambda s, kw: s.row_unit == "question"
                    and "ref_image_paths" in s.columns,
                    meaning="questions comparing a study with a reference study (Diff-VQA)")


def prior_fields(study_id, paths: list, views: list, report, days) -> dict:
    """The prior inputs of a record (the names formats/ and MixtureDataset read)."""
    return {"prior_study_id": None if study_id is None else str(study_id),
            "prior_image_paths": list(paths), "prior_views": list(views),
            "prior_report": report,
            "days": None if days is None or days != days else int(days)}


def _frontal(paths: list, views: list) -> int | None:
    return next((k for k, v in enumerate(views) if v in FRONTAL), None)


def _with_prior(ctx) -> Draft:
    from ...studies.priors import find_priors  # pandas: only when a task runs

    u = ctx.units("study")
    firsts = np.array([r[0] for r in u.rows], np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        prior, days = find_priors(firsts, u.patients, u.ids, ctx.table, ctx.spec,
                                  owner=ctx.name)
    findings = np.array([s["findings"] for s in u.sections], dtype=object)
    keep = np.array([f is not None for f in findings], bool)
    front = [_frontal(p, v) if k >= 0 else None
             for k, p, v in ((prior[i], u.paths[max(prior[i], 0)], u.views[max(prior[i], 0)])
                             for i in range(len(u)))]
    has = np.array([f is not None for f in front], bool)
    skipped = {"no_findings": int((~keep).sum())} if (~keep).any() else {}
    counted = {"without_prior": int((keep & ~has).sum()), "with_prior": int((keep & has).sum())}
    if (getattr(ctx, "mixture", None) or {}).get("without_prior") == "skip":
        if counted["without_prior"]:
            skipped["without_prior"] = counted["without_prior"]
        keep &= has
    pos = np.flatnonzero(keep)
    draft = Draft("study", pos, lambda j: _render_prior(u, pos[j], prior, days, front,
                                                        findings), skipped=skipped)
    draft.counted = counted
    return draft


def _render_prior(u, p, prior, days, front, findings) -> Rendered:
    out, has = [], [front[i] is not None for i in p.tolist()]
    for i in p.tolist():
        k, fr = int(prior[i]), front[i]
        own = {n: v[0] for n, v in section_fields([u.sections[i]], [["findings"]]).items()
               if v[0] is not OMIT}
        if fr is None:
            out.append(fields_json({**own, "prior_study_id": None}))
            continue
        f = prior_fields(u.study_ids[k], [u.paths[k][fr]], [u.views[k][fr]],
                         u.sections[k]["findings"], days[i])
        out.append(fields_json({**own, **f}))
    return Rendered(list(findings[p]), {"compared": [COMPARED if h else "" for h in has],
                                        "compare": [COMPARE if h else "" for h in has]}, out)


def _progression(ctx) -> Draft:
    t = ctx.table
    cols = [c for c in t.columns if str(c).endswith("_progression")]
    values = np.stack([t[c].to_numpy(object) for c in cols], axis=1) if cols else \
        np.zeros((len(t), 0), object)
    known = np.isin(values, PROGRESSION)
    row, col = np.nonzero(known)
    names = [c[: -len("_progression")] for c in cols]
    shown = [n.replace("_", " ") for n in names]
    ids = ctx.units("image").ids
    prior_path = t["prior_image_path"].astype(str).to_numpy(object)
    prior_study = t["prior_study_id"].astype(str).to_numpy(object) \
        if "prior_study_id" in t.columns else np.full(len(t), None, object)

    def render(j):
        r, c = row[j], col[j]
        v = values[r, c]
        fields = [fields_json({"finding": names[x], "progression": y,
                               **prior_fields(prior_study[q], [prior_path[q]], [None], None,
                                              None)})
                  for q, x, y in zip(r.tolist(), c.tolist(), v.tolist())]
        return Rendered(list(v), {"finding": [shown[x] for x in c],
                                  "Finding": [shown[x].capitalize() for x in c]}, fields)

    unlabelled = len(t) - len(np.unique(row))
    return Draft("image", row.astype(np.int64), render,
                 item=lambda j: [f"{ids[r]}|{names[c]}" for r, c in zip(row[j], col[j])],
                 skipped={"no_progression": int(unlabelled)} if unlabelled else {})


def _difference(ctx) -> Draft:
    t = ctx.table
    kind = t["task"].astype(str).str.strip().str.lower().to_numpy(object) \
        if "task" in t.columns else np.full(len(t), "", object)
    ref = t["ref_image_paths"].to_numpy(object)
    keep = (kind == "difference") & np.array([isinstance(r, (list, np.ndarray)) and len(r) > 0
                                              for r in ref], bool)
    pos = np.flatnonzero(keep)
    q, a = t["question"].to_numpy(object), t["answer"].to_numpy(object)
    qid = t["question_id"].astype(str).to_numpy(object)
    ref_study = t["ref_study_id"].astype(str).to_numpy(object)
    study = t["study_id"].astype(str).to_numpy(object)
    dates = {}
    if "study_date" in t.columns:
        from ...studies.priors import parse_date

        for s, d in zip(study, t["study_date"].tolist()):
            if d is not None and d == d and s not in dates:
                dates[s] = parse_date(d)

    def days(k) -> int | None:
        cur, old = dates.get(study[k]), dates.get(ref_study[k])
        return None if cur is None or old is None else (cur - old).days

    def render(j):
        p = pos[j]
        fields = [fields_json({"question_id": qid[k], "answer": a[k], "task": "difference",
                               **prior_fields(ref_study[k], list(ref[k]), [None] * len(ref[k]),
                                              None, days(k))}) for k in p.tolist()]
        return Rendered(list(a[p]), {"question": list(q[p])}, fields)

    other = int((~keep).sum())
    return Draft("question", pos, render, skipped={"not_difference": other} if other else {})


register_task(Task(name="report_findings_with_prior", family="temporal",
                   needs=("study", "findings", "prior"), prompts=PRIOR_PROMPTS,
                   build=_with_prior, slots=("compared", "compare"),
                   description="a study's findings from its images, the prior's frontal image "
                               "and findings, and the days between"))
register_task(Task(name="progression", family="temporal", needs=("progression",),
                   prompts=PROGRESSION_PROMPTS, build=_progression,
                   slots=("finding", "Finding"),
                   description="improving / stable / worsening of a finding, current and "
                               "prior image (MS-CXR-T)"))
register_task(Task(name="vqa_difference", family="temporal", needs=("difference",),
                   prompts=DIFF_PROMPTS, build=_difference, slots=("question",),
                   description="a difference question over the current and the reference "
                               "study's images (Medical-Diff-VQA)"))

__all__ = ["PROGRESSION", "prior_fields"]
