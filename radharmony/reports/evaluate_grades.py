"""How well :func:`radharmony.reports.report_grades` reads grades and sides.

* :func:`taix_agreement`: on reports written from known TAIX-Ray grades
  (:func:`radharmony.fake.taix_ray.taix_style_reports`): per finding, the share of reports
  whose grade (0-4) and side the labeler reads exactly as written.
* :func:`openi_agreement`: on OpenI's real reports against the side and severity words of
  their manual MeSH codes (``Pleural Effusion/left/small``, ``Pulmonary Atelectasis/base/
  bilateral``): per finding, over the reports whose code gives a side (a severity), how often
  the labeler's side (grade) is the coded one, and how often it gives none.

    python -m benchmarks.report_grades
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..spec import grade_column, side_column
from .grading import report_grades

#: TAIX-Ray label -> (canonical finding, its columns in the card)
TAIX = {"HeartSize": ("cardiomegaly", ("HeartSize",)),
        "PulmonaryCongestion": ("pulmonary_congestion", ("PulmonaryCongestion",)),
        "PleuralEffusion": ("pleural_effusion", ("PleuralEffusion_Right", "PleuralEffusion_Left")),
        "PulmonaryOpacities": ("lung_opacity", ("PulmonaryOpacities_Right",
                                                "PulmonaryOpacities_Left")),
        "Atelectasis": ("atelectasis", ("Atelectasis_Right", "Atelectasis_Left"))}
#: MeSH modifier -> side / grade
MESH_SIDES = {"left": "left", "right": "right", "bilateral": "both"}
MESH_GRADES = {"mild": 2, "small": 2, "minimal": 2, "moderate": 3, "severe": 4, "large": 4}
#: OpenI's findings with sides in MeSH, and the headings coding them
OPENI_LATERAL = {"pleural_effusion": ("Pleural Effusion",),
                 "atelectasis": ("Pulmonary Atelectasis",),
                 "lung_opacity": ("Opacity", "Airspace Disease", "Consolidation", "Infiltrate"),
                 "pneumothorax": ("Pneumothorax",)}
COLUMNS = ("finding", "kind", "n", "agree", "none_said", "agreement")


def taix_agreement(texts, grades: pd.DataFrame) -> pd.DataFrame:
    """Per finding and kind (``grade``, ``side``): reports, exact agreements, reports where the
    labeler said nothing, and the agreement rate."""
    from ..annotations.grades import side_of

    got = report_grades(texts, findings=[f for f, _ in TAIX.values()])
    rows = []
    for finding, cols in TAIX.values():
        truth = grades[list(cols)].max(axis=1).to_numpy(float)
        read = got[grade_column(finding)].to_numpy(float)
        rows.append(_row(finding, "grade", truth, read))
        if len(cols) == 2:
            want = np.array([side_of(left=l, right=r) for r, l in
                             grades[list(cols)].itertuples(index=False)], object)
            said = got[side_column(finding)].to_numpy(object)
            keep = want != None  # noqa: E711 (elementwise)
            rows.append((finding, "side", int(keep.sum()), int((said[keep] == want[keep]).sum()),
                         int(pd.isna(said[keep]).sum()),
                         float((said[keep] == want[keep]).mean()) if keep.any() else np.nan))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _row(finding: str, kind: str, truth: np.ndarray, read: np.ndarray) -> tuple:
    n = len(truth)
    agree = int((read == truth).sum())
    return (finding, kind, n, agree, int(np.isnan(read).sum()), agree / n if n else np.nan)


def _coded(tags: list, heads: tuple) -> tuple[str | None, float]:
    """The side (union of the coded sides) and the worst coded grade of the tags of
    ``heads`` among ``tags``."""
    sides, grade = set(), np.nan
    for tag in tags:
        parts = [p.strip().casefold() for p in tag.split("/")]
        if parts[0] not in {h.casefold() for h in heads}:
            continue
        sides |= {MESH_SIDES[p] for p in parts[1:] if p in MESH_SIDES}
        for p in parts[1:]:
            if p in MESH_GRADES:
                grade = MESH_GRADES[p] if grade != grade else max(grade, MESH_GRADES[p])
    side = None if not sides else "both" if "both" in sides or sides == {"left", "right"} \
        else sides.pop()
    return side, grade


def openi_agreement(path, *, ids: str = "all") -> pd.DataFrame:
    """Per finding of :data:`OPENI_LATERAL` and kind: the reports whose MeSH codes give a side
    (a severity) for it, how many the labeler reads the same, how many it gives none for."""
    from .evaluate_openi import _reports

    df = _reports(path, ids)
    got = report_grades(df["sections"], findings=list(OPENI_LATERAL))
    rows = []
    for finding, heads in OPENI_LATERAL.items():
        coded = [_coded(tags, heads) for tags in df["major"]]
        want_side = np.array([c[0] for c in coded], object)
        want_grade = np.array([c[1] for c in coded], float)
        said = got[side_column(finding)].to_numpy(object)
        keep = want_side != None  # noqa: E711
        rows.append((finding, "side", int(keep.sum()), int((said[keep] == want_side[keep]).sum()),
                     int(pd.isna(said[keep]).sum()),
                     float((said[keep] == want_side[keep]).mean()) if keep.any() else np.nan))
        keep = ~np.isnan(want_grade)
        read = got[grade_column(finding)].to_numpy(float)
        rows.append(_row(finding, "grade", want_grade[keep], read[keep]))
    return pd.DataFrame(rows, columns=list(COLUMNS))


__all__ = ["openi_agreement", "taix_agreement"]
