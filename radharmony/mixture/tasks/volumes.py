"""CT tasks: records on volume tables (``DatasetSpec.row_unit == "volume"``: CT-RATE,
RAD-ChestCT, RSNA PE, ...), one volume per record.

* **One volume per study.** Two reconstructions of a CT-RATE scan share one report and one
  label row: every task here writes one record per study, on the volume
  :func:`~radharmony.data.volume_choice.chosen_volumes` picks by a documented rule (the one
  ``one_per_study=True`` follows) (the thinnest slices, then the finest in-plane spacing, then the
  lowest reconstruction number, then the first ``sample_id``); the others are counted under
  ``other_reconstruction``. The record's ``sample_id`` is the chosen volume, its id's item the
  study.
* ``ct_report_findings`` / ``_impression`` / ``_findings_impression`` (and ``_indication``:
  the clinical information as the indication): the sections of the study's report, never a
  placeholder (as in 2-D, :mod:`.reports`: a study without the section is skipped).
* ``ct_classify_findings`` / ``ct_finding_question``: the labels in the canonical label space
  as multi-label text and as closed questions (the 2-D tasks' builds, :mod:`.labels`).

Questions on a volume's other labels (locations, exam labels, spine levels):
:mod:`.exams`.
"""

from __future__ import annotations

import numpy as np

from ...data.volume_choice import RULE_COLUMNS, chosen_volumes  # noqa: F401 (re-exported)
from ..records import fields_json_rows
from .base import Draft, Rendered, Task, register_capability, register_task
from .labels import _classify, _question
from .reports import both_target, section_fields

#: the table columns of a volume's report sections (CT-RATE's): section -> column
SECTION_COLUMNS = {"findings": "section_findings", "impression": "section_impression",
                   "indication": "section_clinical_information",
                   "technique": "section_technique"}

FINDINGS_PROMPTS = ("Describe the findings of this chest CT.",
                    "Write the findings section of the radiology report for this chest CT.",
                    "What are the findings in this CT volume?")
IMPRESSION_PROMPTS = ("Write the impression of the radiology report for this chest CT.",
                      "Summarise this chest CT in an impression.",
                      "What is the radiologist's impression of this CT volume?")
BOTH_PROMPTS = ("Write the findings and the impression of the radiology report for this chest "
                "CT.", "Report this chest CT: findings, then impression.",
                "Generate the radiology report (findings and impression) for this CT scan.")
INDICATION = "Clinical information: {indication}\n"
CLASSIFY_PROMPTS = ("List the findings present, absent and uncertain in this CT volume.",
                    "Which findings does this CT scan show, which are absent, and which are "
                    "uncertain?", "Classify this CT volume: present, absent and uncertain "
                                  "findings.")
QUESTION_PROMPTS = ("Is there {finding} in this CT volume? Answer yes, no or uncertain.",
                    "Does this CT scan show {finding}? Answer yes, no or uncertain.",
                    "{Finding}: yes, no or uncertain?")


def volume_level(spec) -> bool:
    """Whether ``spec``'s table is one row per volume."""
    return spec.row_unit == "volume"


def _has_sections(*names):
    return lambda spec, kw: volume_level(spec) and \
        all(SECTION_COLUMNS[n] in spec.columns for n in names)


register_capability("volumes", lambda spec, kw: volume_level(spec),
                    meaning="volumes (a volume table: one row per CT or MRI volume)")
for _sec in ("findings", "impression", "indication"):
    register_capability(f"volume_{_sec}", _has_sections(_sec),
                        meaning=f"a {_sec} section in a volume table's reports")
register_capability("volume_labels", lambda spec, kw: volume_level(spec) and
                    bool(spec.label_cols) and any(v for v in spec.label_map.values()),
                    meaning="a volume table's labels mapped to the canonical findings")


def _per_study(build):
    """``build`` run on the :func:`chosen_volumes` of each study (the other volumes counted
    under ``other_reconstruction``, every other count per study); the item ids name the
    study."""

    def per_study(ctx) -> Draft:
        from ..context import SourceContext

        pos, studies = chosen_volumes(ctx.table)
        sub = SourceContext(name=ctx.name, key=ctx.key, spec=ctx.spec,
                            table=ctx.table.iloc[pos], kwargs=ctx.kwargs, seed=ctx.seed,
                            valid_share=ctx.valid_share)
        d = build(sub)
        skipped = dict(d.skipped)
        if len(pos) < len(ctx.table):
            skipped["other_reconstruction"] = len(ctx.table) - len(pos)
        if callable(d.item):
            item = lambda j: [f"{s}|{i.split('|', 1)[1]}" for s, i in  # noqa: E731
                              zip(studies[d.pos[j]].tolist(), d.item(j))]
        else:
            item = studies[d.pos]
        return Draft(d.unit, pos[d.pos], d.render, item=item, skipped=skipped,
                     text_only=d.text_only)

    return per_study


def _report(want: tuple, *, indication: bool):
    def build(ctx) -> Draft:
        t = ctx.table
        sec = {k: np.array([v if isinstance(v, str) and v.strip() else None
                            for v in t[c].tolist()], dtype=object) if c in t.columns
               else np.full(len(t), None, dtype=object) for k, c in SECTION_COLUMNS.items()}
        has = {k: np.array([v is not None for v in s], bool) for k, s in sec.items()}
        keep = has["findings"] | has["impression"] if len(want) == 2 else has[want[0]]
        skipped = {"no_" + "_or_".join(want): int((~keep).sum())}
        if indication:
            skipped["no_indication"] = int((keep & ~has["indication"]).sum())
            keep = keep & has["indication"]
        pos = np.flatnonzero(keep)

        def render(j: np.ndarray) -> Rendered:
            p = pos[j]
            f, i = sec["findings"][p], sec["impression"][p]
            if len(want) == 2:
                targets = [both_target(a, b) for a, b in zip(f, i)]
                names = [[n for n, v in (("findings", a), ("impression", b)) if v is not None]
                         for a, b in zip(f, i)]
            else:
                targets, names = list(sec[want[0]][p]), [list(want)] * len(p)
            sections = [{"findings": a, "impression": b, "indication": c, "technique": d,
                         "history": None, "comparison": None}
                        for a, b, c, d in zip(f, i, sec["indication"][p], sec["technique"][p])]
            return Rendered(targets, {"indication": list(sec["indication"][p])},
                            fields_json_rows(section_fields(sections, names)))

        return Draft("image", pos, render, skipped={k: v for k, v in skipped.items() if v})

    return build


for _name, _want, _prompts in (("ct_report_findings", ("findings",), FINDINGS_PROMPTS),
                               ("ct_report_impression", ("impression",), IMPRESSION_PROMPTS),
                               ("ct_report_findings_impression", ("findings", "impression"),
                                BOTH_PROMPTS)):
    for _ind in (False, True):
        register_task(Task(
            name=_name + ("_indication" if _ind else ""), family="reports",
            needs=("volumes", *(f"volume_{w}" for w in _want))
            + (("volume_indication",) if _ind else ()),
            prompts=tuple(INDICATION + p for p in _prompts) if _ind else _prompts,
            build=_per_study(_report(_want, indication=_ind)),
            slots=("indication",) if _ind else (),
            description=f"{'+'.join(_want)} of a CT study's report, one volume per study"
                        + (", given the clinical information" if _ind else "")))

register_task(Task(name="ct_classify_findings", family="labels", needs=("volumes", "volume_labels"),
                   prompts=CLASSIFY_PROMPTS, build=_per_study(_classify),
                   description="present / absent / uncertain findings of a CT study, as text"))
register_task(Task(name="ct_finding_question", family="labels",
                   needs=("volumes", "volume_labels"), prompts=QUESTION_PROMPTS,
                   build=_per_study(_question), slots=("finding", "Finding"),
                   description="one finding of a CT study, yes / no / uncertain"))

__all__ = ["SECTION_COLUMNS", "chosen_volumes", "volume_level"]
