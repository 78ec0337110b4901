"""The viewer's study pages: one study at a time, every view side by side, its sections, and
the patient's previous study below (``/studies`` in the viewer; routes:

* ``/studies`` -- the page (``static/study.html``, ``static/study.js``);
* ``/api/study?split=&index=`` -- one study as JSON (ids, views, sections, prior);
* ``/study.png?split=&index=&j=&prior=0|1`` -- its ``j``-th image (or its prior's).

Studies are those of :class:`radharmony.data.studies.StudyDataset` over each viewed dataset
(built on first use, with priors where the table has a study date).
"""

from __future__ import annotations

import threading
import warnings

import numpy as np

from ..errors import StudyWarning
from ..studies.priors import date_column
from ..studies.sections import SECTION_KEYS
from .answers import NotFound, ViewerError, png8

_lock = threading.Lock()


def _studies(app, split: str | None):
    """The StudyDataset of a viewed split (made once per app and split)."""
    from ..data.studies import StudyDataset

    s = app.split(split)
    with _lock:
        cache = app.__dict__.setdefault("_studies", {})
        if s.spec.key not in cache:
            ds = s.dataset
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", StudyWarning)
                cache[s.spec.key] = StudyDataset(
                    ds, prior=date_column(ds.harmonized_df, ds.spec) is not None)
        return cache[s.spec.key]


def _number(value, name: str, n: int) -> int:
    """``value`` as an index below ``n`` (the request's ``name=`` parameter)."""
    try:
        i = int(value)
    except (TypeError, ValueError):
        raise ViewerError(f"This page needs {name}=<integer>", expected=f"{name}=<integer>",
                          found=repr(value)) from None
    if not 0 <= i < n:
        raise NotFound(f"{name}={i} is out of range", expected=f"0 to {n - 1}", found=str(i))
    return i


def _index(st, index) -> int:
    return _number(index, "index", len(st))


def study_json(app, split: str | None, index) -> dict:
    """One study: ids, views, ``key_image``, sections, report, and its prior (or None)."""
    st = _studies(app, split)
    i = _index(st, index)
    ix = st.index
    sec = {k: ix.sections[i][k] for k in SECTION_KEYS}
    out = {"split": app.split(split).spec.key, "index": i, "total": len(st),
           "study_id": str(ix.study_ids[i]), "patient_id": str(ix.patient_ids[i]),
           "views": list(st._views[i]), "n_images": int(ix.n_images[i]),
           "key_image": int(ix.key_image[i]), "sections": sec,
           "section_source": str(ix.section_source[i]),
           "report": ix.reports[i] if isinstance(ix.reports[i], str) else None, "prior": None}
    p = int(st.prior_of[i]) if st.prior else -1
    if p >= 0:
        out["prior"] = {"study_id": str(ix.study_ids[p]), "views": list(st._views[p]),
                        "days": None if np.isnan(st.prior_days[i]) else int(st.prior_days[i]),
                        "findings": ix.sections[p]["findings"],
                        "impression": ix.sections[p]["impression"]}
    return out


def study_png(app, split: str | None, index, j, prior) -> bytes:
    """Image ``j`` of the study (or of its prior) as an 8-bit PNG."""
    st = _studies(app, split)
    i = _index(st, index)
    if str(prior) in ("1", "true"):
        i = int(st.prior_of[i]) if st.prior else -1
        if i < 0:
            raise NotFound("This study has no prior", found=str(index))
    rows = st.index.rows[i]
    j = _number(j, "j", len(rows))
    return png8(st._quantized(np.asarray(rows[j:j + 1], np.int64))[0])


def route(app, path: str, q: dict):
    """``(body, content type)`` for a study route, or None for another path."""
    if path == "/api/study":
        import json

        return json.dumps(study_json(app, q.get("split"), q.get("index"))).encode(), \
            "application/json"
    if path == "/study.png":
        return study_png(app, q.get("split"), q.get("index"), q.get("j", 0),
                         q.get("prior", "0")), "image/png"
    return None
