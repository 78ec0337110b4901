"""Per-row labels and boxes from a config's table cells, as its encodings describe them.

:func:`row_labels` reads wide label columns or one list column into a rows x labels array;
:func:`row_boxes` reads every box encoding (xyxy, xywh, cxcywh; pixel, normalized or percent)
into each image's normalized box records.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import MetadataError
from ..table.read_csv import lists_by
from .derive import derive
from .reading import cell_text


def row_labels(labels: dict, table: pd.DataFrame, *, source: str, rows: np.ndarray
               ) -> np.ndarray:
    """Per-row label values (rows x labels), from wide columns or a list column."""
    if labels["layout"] == "wide":
        enc = labels["encoding"]
        out = np.empty((len(table), len(labels["columns"])), np.float32)
        for j, col in enumerate(labels["columns"]):
            cells = table[col].to_numpy(object)
            codes, uniques = pd.factorize(pd.Series([c.strip() if isinstance(c, str) else
                                                     cell_text(c) for c in cells], dtype=object))
            lookup = []
            for u in uniques:
                if u not in enc:
                    i = int(np.flatnonzero(codes == len(lookup))[0])
                    raise MetadataError(f"{source}, row {rows[i]}: label {col!r} has a value "
                                        "the config does not encode",
                                        expected=f"one of {sorted(enc)} (labels.encoding)",
                                        found=repr(u), fix=f"add {u!r}: 1, 0, -1 or null to "
                                        "labels.encoding")
                lookup.append(np.nan if enc[u] is None else enc[u])
            out[:, j] = np.asarray(lookup, np.float32)[codes] if len(lookup) else np.nan
        return out
    lst = labels["list"]
    index = {t: j for j, t in enumerate(lst["labels"])}
    none, sep = set(lst["none"]), lst["separator"]
    out = np.zeros((len(table), len(index)), np.float32)
    for i, cell in enumerate(table[lst["column"]].to_numpy(object)):
        if isinstance(cell, list):
            terms = [str(t).strip() for t in cell]
        else:
            cell = "" if cell is None else str(cell).strip()
            if not cell:
                out[i] = np.nan  # not labelled
                continue
            terms = [t.strip() for t in cell.split(sep)] if sep else [cell]
        for t in terms:
            if not t or t in none:
                continue
            j = index.get(t)
            if j is None:
                if lst["unknown"] == "ignore":
                    continue
                raise MetadataError(f"{source}, row {rows[i]}: finding {t!r} is not a listed "
                                    "label", expected=f"one of {lst['labels']} or "
                                    f"{sorted(none)} (labels.list)", found=repr(cell),
                                    fix=f"add {t!r} to labels.list.labels, or set "
                                        "labels.list.unknown: ignore")
            out[i, j] = 1.0
    return out


def row_boxes(encodings: list[dict], table: pd.DataFrame, index: pd.Index, paths: np.ndarray,
              *, source: str, rows: np.ndarray) -> list[list[dict]]:
    """Each image's box records (``x_min..y_max``), from every encoding, in row order."""
    keys, recs = [], []
    n = len(table)
    per_row: list[list[dict]] = [[] for _ in range(n)]
    for e, b in enumerate(encodings):
        vals = np.full((n, 4), np.nan)
        for j, col in enumerate(b["columns"]):
            cells = table[col].to_numpy(object)
            for i, c in enumerate(cells):
                c = c.strip() if isinstance(c, str) else c
                if c == "" or c is None:
                    continue
                try:
                    vals[i, j] = float(c)
                except (TypeError, ValueError):
                    raise MetadataError(f"{source}, row {rows[i]}: box column {col!r} is not a "
                                        "number", expected="a number or an empty cell",
                                        found=repr(c), fix="correct the cell, or "
                                        f"boxes[{e}].columns") from None
        empty = np.isnan(vals).all(axis=1)
        partial = np.isnan(vals).any(axis=1) & ~empty
        if partial.any():
            i = int(np.flatnonzero(partial)[0])
            raise MetadataError(f"{source}, row {rows[i]}: box has some coordinates missing",
                                expected=f"all four of {b['columns']} or none",
                                found=repr(vals[i].tolist()), fix="fill or empty the row's box")
        x, y, c3, c4 = vals.T
        if b["format"] == "xywh":
            xyxy = np.stack([x, y, x + c3, y + c4], 1)
        elif b["format"] == "cxcywh":
            xyxy = np.stack([x - c3 / 2, y - c4 / 2, x + c3 / 2, y + c4 / 2], 1)
        else:
            xyxy = vals
        if b["units"] == "percent":
            xyxy = xyxy / 100.0
        elif b["image_size"] is not None:
            w = pd.to_numeric(table[b["image_size"]["width"]], errors="coerce").to_numpy(float)
            h = pd.to_numeric(table[b["image_size"]["height"]], errors="coerce").to_numpy(float)
            bad = ~empty & ~((w > 0) & (h > 0))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise MetadataError(f"{source}, row {rows[i]}: image size for a box is not "
                                    "positive", expected="width and height in pixels",
                                    found=f"{w[i]} x {h[i]}", fix=f"correct boxes[{e}]."
                                    "image_size or the cells")
            xyxy = xyxy / np.stack([w, h, w, h], 1)
        bad = ~empty & ((xyxy[:, 2] < xyxy[:, 0]) | (xyxy[:, 3] < xyxy[:, 1]))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise MetadataError(f"{source}, row {rows[i]}: box ends before it starts",
                                expected=f"a {b['format']} box with positive size",
                                found=repr(vals[i].tolist()), fix=f"check boxes[{e}].format")
        label = derive(b["label"], table) if b["label"] else np.full(n, "", object)
        who = derive(b["annotator"], table) if b["annotator"] else np.full(n, None, object)
        for i in np.flatnonzero(~empty):
            per_row[i].append({"label": label[i] or "", "annotator": who[i],
                               "x_min": float(xyxy[i, 0]), "y_min": float(xyxy[i, 1]),
                               "x_max": float(xyxy[i, 2]), "y_max": float(xyxy[i, 3])})
    for i, rs in enumerate(per_row):
        for r in rs:
            keys.append(paths[i])
            recs.append(r)
    return lists_by(index, keys, recs)
