"""The viewer's VQA pages: one question at a time with its images, options, the correct letter
and the explanation (``/questions`` in the viewer; routes:

* ``/questions`` -- the page (``static/question.html``, ``static/question.js``);
* ``/api/question?split=&index=`` -- one question as JSON;
* ``/question.png?split=&index=&j=&ref=0|1`` -- its ``j``-th image (or its reference study's).
"""

from __future__ import annotations

import numpy as np

from .answers import NotFound, png8
from .studies import _number

#: the question fields the page shows, where the table has them
FIELDS = ("question_id", "patient_id", "study_id", "question", "answer", "answer_format",
          "options", "answer_letter", "explanation", "task", "category", "subcategory",
          "split", "ref_study_id")


def _question_split(app, split: str | None):
    s = app.split(split)
    if getattr(s.spec, "row_unit", "image") != "question":
        raise NotFound(f"{s.spec.key} is not a VQA dataset", expected="a split whose rows "
                       "are questions (e.g. rexvqa_test)", found=s.spec.key)
    return s


def question_json(app, split: str | None, index) -> dict:
    """One question: its fields, its images' views and which is the key image."""
    s = _question_split(app, split)
    df = s.dataset.harmonized_df
    i = _number(index, "index", len(df))
    row = df.iloc[i]
    out = {"split": s.spec.key, "index": i, "total": len(df), "sample_id": row["sample_id"],
           **{k: _plain(row[k]) for k in FIELDS if k in df.columns},
           "views": list(s.dataset._views[i]), "key_image": int(s.dataset._key[i]),
           "n_ref_images": len(row["ref_image_paths"] or []) if "ref_image_paths" in df.columns
           else 0}
    return out


def _plain(value):
    if isinstance(value, float) and value != value:
        return None
    return value.item() if isinstance(value, np.generic) else value


def question_png(app, split: str | None, index, j, ref) -> bytes:
    """Image ``j`` of the question (or of its reference study) as an 8-bit PNG."""
    from ..vqa.images import load_one

    s = _question_split(app, split)
    ds = s.dataset
    i = _number(index, "index", len(ds))
    col = "ref_image_paths" if str(ref) in ("1", "true") else "image_paths"
    paths = ds.harmonized_df[col].iat[i] if col in ds.harmonized_df.columns else None
    if not paths:
        raise NotFound("This question has no such images", found=f"{col} of {index}")
    return png8(load_one(ds, ds.base_image_dir, paths[_number(j, "j", len(paths))]))


def route(app, path: str, q: dict):
    """``(body, content type)`` for a question route, or None for another path."""
    if path == "/api/question":
        import json

        return json.dumps(question_json(app, q.get("split"), q.get("index"))).encode(), \
            "application/json"
    if path == "/question.png":
        return question_png(app, q.get("split"), q.get("index"), q.get("j", 0),
                            q.get("ref", "0")), "image/png"
    return None
