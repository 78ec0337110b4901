"""The question-level table every VQA dataset harmonizes to: its spec, and the pure helpers the
dataset modules share (options, answer formats, the key image, the frame itself)."""

from __future__ import annotations

import re
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from ..errors import MetadataError
from ..spec import QUESTION_COLUMNS, REQUIRED_COLUMNS, DatasetSpec

#: optional question columns, kept where the source has them
TAXONOMY = ("task", "category", "subcategory")
#: the columns of a difference question's reference study
REFERENCE = ("ref_study_id", "ref_image_paths")
#: canonical frontal views, best first, for the key image
FRONTAL = ("PA", "AP")
_LETTERED = re.compile(r"^\s*\(?([A-Za-z])\s*[.:)]\s*(.*)$", re.S)
_YES_NO = {"yes", "no"}


def vqa_spec(key: str, title: str, *, extra: Iterable[str] = (),
             column_types: Mapping[str, str] | None = None, **kwargs) -> DatasetSpec:
    """A question-level :class:`~radharmony.spec.DatasetSpec`: one row per question
    (``row_unit="question"``), ``sample_id`` = ``"<key>:<question_id>"``, the
    :data:`~radharmony.spec.QUESTION_COLUMNS` first among the extra columns, then ``extra``
    (e.g. :data:`TAXONOMY`, :data:`REFERENCE`, ``split``/``split_raw``)."""
    extra = tuple(extra)
    types = {c: t for c, t in QUESTION_COLUMNS.items() if t != "text"}
    if "ref_image_paths" in extra:
        types["ref_image_paths"] = "json"
    types.update(column_types or {})
    return DatasetSpec(key=key, title=title, extra_cols=tuple(QUESTION_COLUMNS) + extra,
                       column_types=types, id_col="question_id", row_unit="question",
                       **kwargs)


def normalise_options(options, *, where: str = "question") -> list[str]:
    """Options as ``["A. text", "B. text", ...]``: ``"A: x"``, ``"(A) x"``, ``"a. x"`` are
    re-lettered in place; plain texts get letters in order; None -> ``[]``."""
    if options is None:
        return []
    if isinstance(options, str) or not isinstance(options, (list, tuple)):
        raise MetadataError(f"{where}: options are not a list", expected="a list of options",
                            found=repr(options)[:80], fix="check the question's options")
    texts = [str(o) for o in options]
    parsed = [_LETTERED.match(t) for t in texts]
    if parsed and all(parsed) and [m.group(1).upper() for m in parsed] == \
            [chr(65 + k) for k in range(len(texts))]:
        texts = [m.group(2).strip() for m in parsed]
    return [f"{chr(65 + k)}. {t.strip()}" for k, t in enumerate(texts)]


def text(value) -> str | None:
    """A field as text (numbers as written: ``2`` -> ``"2"``); None stays None."""
    return None if value is None else str(value)


def option_text(options: list[str], letter: str) -> str | None:
    """The text of option ``letter`` (``"B"``) of normalised ``options``; None when absent."""
    for o in options:
        if o[0] == letter:
            return o[3:]
    return None


#: an ``answer_type`` as shipped (stripped, upper-cased) -> ``answer_format``
ANSWER_TYPES = {"OPEN": "open", "CLOSED": "closed"}


def typed_format(answer_type, *, where: str) -> str:
    """``answer_format`` from a shipped ``answer_type`` (``"OPEN"``, ``"CLOSED "``, ...)."""
    fmt = ANSWER_TYPES.get(str(answer_type).strip().upper())
    if fmt is None:
        raise MetadataError(f"{where} has answer_type {answer_type!r}",
                            expected="OPEN or CLOSED", found=repr(answer_type),
                            fix="correct that entry")
    return fmt


def answer_format(answer) -> str:
    """``"closed"`` for a yes/no answer, else ``"open"`` (sources without an answer type)."""
    return "closed" if isinstance(answer, str) and answer.strip().lower() in _YES_NO \
        else "open"


def key_image(views: list) -> int:
    """Index of the key image among a question's canonical ``views``: PA, else AP, else 0
    (ReXrank's single-image choice)."""
    for v in FRONTAL:
        if v in views:
            return views.index(v)
    return 0


class _Canonical(dict):
    """Raw view name -> canonical (by ``view_map``), each distinct name worked out once."""

    def __init__(self, view_map):
        super().__init__()
        self.view_map = view_map

    def __missing__(self, v):
        self[v] = c = self.view_map.get(v.strip().upper(), v.strip()) \
            if isinstance(v, str) else None
        return c


def key_images(image_paths: list, view_positions: list, view_map) -> tuple[list, list]:
    """``(image_path, view_position)`` of each question's key image (:func:`key_image` on
    its canonical views); a views list shared by several questions is looked at once."""
    key_path, key_view, done = [], [], {}  # done: id of a views list already looked at
    canonical = _Canonical(view_map).__getitem__
    for paths, views in zip(image_paths, view_positions):
        k = done.get(id(views)) if len(views) > 1 else 0
        if k is None:
            k = done[id(views)] = key_image(list(map(canonical, views)))
        key_path.append(paths[k] if paths else None)
        key_view.append(views[k] if paths else None)
    return key_path, key_view


def question_frame(cols: dict, spec: DatasetSpec, *, source: str) -> pd.DataFrame:
    """The question table from column lists: ``image_paths`` / ``view_positions`` (lists per
    question) give ``image_path`` / ``view_position`` (the key image, by the spec's
    ``view_map``; :func:`key_images`, unless ``cols`` has them already). The one schema
    validation checks it (a repeated ``question_id`` is refused naming both occurrences)."""
    if "image_path" in cols:
        key_path, key_view = cols["image_path"], cols["view_position"]
    else:
        key_path, key_view = key_images(cols["image_paths"], cols["view_positions"],
                                        spec.view_map)
    base = {"patient_id": cols["patient_id"], "study_id": cols["study_id"],
            "image_path": key_path, "view_position": key_view,
            "report": cols.get("report") or [None] * len(key_path)}
    order = [c for c in spec.columns if c not in REQUIRED_COLUMNS]
    missing = [c for c in order if c not in cols]
    if missing:
        raise MetadataError(f"{source}: the harmonizer made no column {missing}",
                            expected=f"columns {order}", found=sorted(cols),
                            fix="report this as a radharmony bug")
    data = {**base, **{c: cols[c] for c in order}}
    return pd.DataFrame({c: _objects(v) for c, v in data.items()},
                        copy=False)  # a block per column (validating replaces columns)


def _objects(values) -> pd.Series:
    """``values`` (lists stay lists) as an object Series, filled once (pandas' own
    conversion of a list takes about twice as long)."""
    return pd.Series(np.fromiter(values, dtype=object, count=len(values)), dtype=object,
                     copy=False)
