"""Report generation (per study) and findings -> impression summarisation (text only).

Targets never hold a placeholder for an absent section: a task needing a section skips the
studies without it (counted under ``no_findings``, ``no_impression``, ``no_indication``);
findings + impression drops an absent one of the two (its target is then the present section
alone, ``fields["sections"]`` says which) and skips a study with neither.

A report record's ``fields`` hold ``sections`` (those of the target) and the study's other
sections as text or None (:func:`section_fields`: ``indication``, ``history``, ``technique``,
``comparison``, and ``findings`` / ``impression`` when not in the target), the inputs the
trainers' formats fill (LLaVA-Rad's ``reason`` / ``indication`` / ``impression``, MAIRA-2's
``indication`` / ``technique`` / ``comparison``).
"""

from __future__ import annotations

import numpy as np

from ..records import OMIT, fields_json_rows
from .base import Draft, Rendered, Task, register_task

FINDINGS_PROMPTS = ("Describe the findings of the chest X-ray.",
                    "Write the findings section of the radiology report for this chest X-ray.",
                    "What are the findings in this chest radiograph?")
IMPRESSION_PROMPTS = ("Write the impression of the radiology report for this chest X-ray.",
                      "Summarise this chest X-ray in an impression.",
                      "What is the radiologist's impression of this chest radiograph?")
BOTH_PROMPTS = ("Write the findings and the impression of the radiology report for this chest "
                "X-ray.",
                "Report this chest X-ray: findings, then impression.",
                "Generate the radiology report (findings and impression) for this study.")
INDICATION = "Indication: {indication}\n"
SUMMARY_PROMPTS = ("Summarise these chest X-ray findings in an impression.\nFindings: {findings}",
                   "Findings: {findings}\nWrite the impression.",
                   "Given the findings below, write the radiologist's impression.\n"
                   "{findings}")


def _section(sections: list, name: str) -> np.ndarray:
    return np.array([s[name] for s in sections], dtype=object)


def section_fields(sections: list, target: list) -> dict:
    """``fields`` columns of report records (``sections[k]``: study ``k``'s six sections;
    ``target[k]``: the sections its target holds): ``sections`` and every other section's
    text or None."""
    from ...studies.sections import SECTION_KEYS  # pandas: only when a task runs

    cols = {"sections": target}
    for name in SECTION_KEYS:
        cols[name] = [s[name] if name not in t else OMIT for s, t in zip(sections, target)]
    return cols


def _present(values: np.ndarray) -> np.ndarray:
    return np.array([v is not None for v in values], bool)


def both_target(findings, impression) -> str:
    """The findings + impression target, an absent section dropped (never ``None``)."""
    parts = [f"{head}: {text}" for head, text in (("Findings", findings),
                                                 ("Impression", impression)) if text is not None]
    return "\n".join(parts)


def _report_task(name: str, want: tuple, prompts: tuple, *, indication: bool):
    """A report-generation task: ``want`` the sections of its target."""

    def build(ctx) -> Draft:
        u = ctx.units("study")
        sec = {k: _section(u.sections, k) for k in ("findings", "impression", "indication")}
        has = {k: _present(v) for k, v in sec.items()}
        keep = np.ones(len(u), bool)
        skipped = {}
        if want == ("findings", "impression"):
            none = ~(has["findings"] | has["impression"])
            skipped["no_findings_or_impression"] = int(none.sum())
            keep &= ~none
        else:
            for k in want:
                skipped[f"no_{k}"] = int((keep & ~has[k]).sum())
                keep &= has[k]
        if indication:
            skipped["no_indication"] = int((keep & ~has["indication"]).sum())
            keep &= has["indication"]
        pos = np.flatnonzero(keep)

        def render(j: np.ndarray) -> Rendered:
            p = pos[j]
            f, i, ind = sec["findings"][p], sec["impression"][p], sec["indication"][p]
            if want == ("findings", "impression"):
                targets = [both_target(a, b) for a, b in zip(f, i)]
                names = [[n for n, v in (("findings", a), ("impression", b)) if v is not None]
                         for a, b in zip(f, i)]
            else:
                targets = list(sec[want[0]][p])
                names = [list(want)] * len(p)
            fields = fields_json_rows(section_fields([u.sections[k] for k in p.tolist()],
                                                     names))
            return Rendered(targets, {"indication": list(ind)}, fields)

        return Draft("study", pos, render, skipped={k: v for k, v in skipped.items() if v})

    stem = "+".join(want)
    return Task(name=name, family="reports", needs=("study", *want) + (("indication",)
                                                                         if indication else ()),
                prompts=tuple(INDICATION + p for p in prompts) if indication else prompts,
                build=build, slots=("indication",) if indication else (),
                description=f"{stem} of a study's report from its images"
                            + (", given the indication" if indication else ""))


for _name, _want, _prompts in (("report_findings", ("findings",), FINDINGS_PROMPTS),
                               ("report_impression", ("impression",), IMPRESSION_PROMPTS),
                               ("report_findings_impression", ("findings", "impression"),
                                BOTH_PROMPTS)):
    register_task(_report_task(_name, _want, _prompts, indication=False))
    register_task(_report_task(_name + "_indication", _want, _prompts, indication=True))


def _summarise(ctx) -> Draft:
    u = ctx.units("study")
    f, i = _section(u.sections, "findings"), _section(u.sections, "impression")
    hf, hi = _present(f), _present(i)
    pos = np.flatnonzero(hf & hi)
    skipped = {"no_findings": int((~hf).sum()), "no_impression": int((hf & ~hi).sum())}

    def render(j: np.ndarray) -> Rendered:
        p = pos[j]
        return Rendered(list(i[p]), {"findings": list(f[p])}, fields_json_rows(
            {"sections": [["findings", "impression"]] * len(p)}))

    return Draft("study", pos, render, skipped={k: v for k, v in skipped.items() if v},
                 text_only=True)


register_task(Task(name="summarize_impression", family="text", needs=("findings", "impression"),
                   prompts=SUMMARY_PROMPTS, build=_summarise, slots=("findings",),
                   description="a report's impression from its findings (text only)"))

__all__ = ["both_target", "section_fields"]
