"""Boxes in the harmonized table.

A table with boxes has a ``boxes`` column: per image a list of dicts
``{"label": str, "annotator": str | None, "x_min", "y_min", "x_max", "y_max"}``, in the
units the dataset's spec declares (``box_units``: normalized [0, 1] of the source image, or
source pixels). An image without boxes has an empty list. Read back from CSV the column is a
JSON string; :func:`parse_boxes` turns it back into lists.
"""

from __future__ import annotations

import json

import numpy as np

BOX_KEYS = ("x_min", "y_min", "x_max", "y_max")


def parse_boxes(value) -> list[dict]:
    """A ``boxes`` cell (list, JSON string, None or NaN) -> list of dicts."""
    if value is None or isinstance(value, float) and np.isnan(value):
        return []
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else []
    return [dict(b) for b in value]


def boxes_to_array(records) -> tuple[np.ndarray, list[str], list[str | None]]:
    """``(N, 4)`` float32 array, labels and annotators from a ``boxes`` cell."""
    recs = parse_boxes(records)
    xyxy = np.array([[float(b[k]) for k in BOX_KEYS] for b in recs], np.float32).reshape(-1, 4)
    return xyxy, [str(b.get("label", "")) for b in recs], [b.get("annotator") for b in recs]
