"""Study-level counts of a harmonized table (``radharmony info --level study``)."""

from __future__ import annotations

import warnings

import pandas as pd

from ..errors import StudyWarning
from ..table.schema import canonical_views
from .index import build_index
from .sections import SECTION_KEYS


def study_info(df: pd.DataFrame, spec) -> dict:
    """Studies, the images-per-study histogram, each section's coverage (share of studies
    that have it) and where the sections came from (``source`` / ``parser`` / ``none``)."""
    if "view" not in df.columns:
        df = df.assign(view=canonical_views(df["view_position"], spec.view_map))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)  # counted below instead
        ix = build_index(df, max_images=None, root_col=spec.root_col, owner=spec.key)
    counts = pd.Series(ix.n_images).value_counts().sort_index()
    frontal = df["view"].isin(("PA", "AP")).to_numpy(bool)
    n = len(ix)
    return {"studies": n, "images": int(ix.n_images.sum()),
            "images_per_study": {int(k): int(v) for k, v in counts.items()},
            "sections": {k: round(sum(s[k] is not None for s in ix.sections) / n, 4)
                         for k in SECTION_KEYS},
            "section_source": {str(k): int(v) for k, v in
                               pd.Series(ix.section_source).value_counts().items()},
            "with_frontal": int(sum(bool(frontal[r].any()) for r in ix.rows))}


def study_info_text(r: dict) -> list[str]:
    """The text lines of :func:`study_info`'s result."""
    lines = [f"  study level: {r['studies']:,} studies ({r['images']:,} images, "
             f"{r['with_frontal']:,} studies with a PA/AP image)",
             "  images per study: " + ", ".join(f"{k}: {v:,}" for k, v in
                                                r["images_per_study"].items()),
             "  sections (share of studies): " + ", ".join(
                 f"{k} {100 * v:.1f}%" for k, v in r["sections"].items()),
             "  sections from: " + ", ".join(f"{k} {v:,}" for k, v in
                                             r["section_source"].items())]
    return lines
