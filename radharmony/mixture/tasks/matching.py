"""Image-text matching: a study's images with a report that is its own or another patient's;
the target says which (``yes`` / ``no``).

Whether a study gets its own report or a negative is a seeded hash of its id (about half
each). A negative report is drawn from a study of **another patient** in the same mixture
split that is not held out (so no held-out or validation report text reaches a training
record); a study with no such study available gets its own report. The report text is the
findings section, else the impression; studies with neither are skipped (``no_report``).
"""

from __future__ import annotations

import numpy as np
import xxhash

from ..records import fields_json
from .base import Draft, Rendered, Task, register_task

MATCH_PROMPTS = ("Does this report describe this chest X-ray? Answer yes or no.\n"
                 "Report: {report}",
                 "Report: {report}\nIs this the report of this chest X-ray?",
                 "Do the image and the following report belong to the same study? {report}")


def _hash(seed: int, what: str, ids) -> np.ndarray:
    prefix = f"{int(seed)}\x1f{what}\x1f"
    return np.fromiter((xxhash.xxh3_64_intdigest((prefix + str(s)).encode()) for s in ids),
                       np.uint64, len(ids))


def _texts(sections: list) -> np.ndarray:
    return np.array([s["findings"] if s["findings"] is not None else s["impression"]
                     for s in sections], dtype=object)


def negatives(patients: np.ndarray, allowed: np.ndarray, groups: np.ndarray,
              draw: np.ndarray) -> np.ndarray:
    """For each unit, a unit of another patient, of the same group (split), among
    ``allowed``; -1 where there is none. ``draw`` (uint64) picks among the candidates."""
    out = np.full(len(patients), -1, np.int64)
    for g in np.unique(groups):
        cand = np.flatnonzero(allowed & (groups == g))
        mine = np.flatnonzero(groups == g)
        if not len(cand):
            continue
        start = (draw[mine] % np.uint64(len(cand))).astype(np.int64)
        for step in range(min(len(cand), 64)):  # walk on past the unit's own patient
            pick = cand[(start + step) % len(cand)]
            ok = (out[mine] < 0) & (patients[pick] != patients[mine])
            out[mine[ok]] = pick[ok]
            if (out[mine] >= 0).all():
                break
    return out


def _matching(ctx) -> Draft:
    u = ctx.units("study")
    text = _texts(u.sections)
    has = np.array([t is not None for t in text], bool)
    pos = np.flatnonzero(has)
    negative = (_hash(ctx.seed, "match", u.ids) & np.uint64(1)).astype(bool)
    other = negatives(u.patients, has & (u.held == 0), u.valid,
                      _hash(ctx.seed, "negative", u.ids))
    negative &= other >= 0

    def render(j: np.ndarray) -> Rendered:
        p = pos[j]
        src = np.where(negative[p], other[p], p)
        fields = [fields_json({"match": not n, "report_study_id": str(u.ids[s])})
                  for n, s in zip(negative[p], src)]
        return Rendered(["no" if n else "yes" for n in negative[p]],
                        {"report": list(text[src])}, fields)

    missing = int((~has).sum())
    return Draft("study", pos, render, skipped={"no_report": missing} if missing else {})


register_task(Task(name="image_text_matching", family="matching",
                   needs=("study", "report"), prompts=MATCH_PROMPTS, build=_matching,
                   slots=("report",),
                   description="does a report (own, or another patient's) match the images"))

__all__ = ["negatives"]
