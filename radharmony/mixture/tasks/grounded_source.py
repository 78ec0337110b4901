"""A source's boxes as the grounded tasks use them: read once per source
(:func:`~radharmony.mixture.grounding.box_table`), the spec's readers choice applied, grouped
into *items* (the boxes of one image sharing a text or a label), and rendered for any set of
records in one call of :func:`~radharmony.mixture.boxes.grounded_texts_flat`.

What the spec decides reaches a task through ``ctx.mixture`` (set by the build): ``boxes``
(the dialect), ``images`` (``{"mode", "size"}``: the box text is computed for the image the
record points at), ``readers`` (``all``, ``first``, ``fused`` or ``reader:<id>``) and ``root``
(the images' folder, read for image sizes the table lacks). A context without it (a test's)
gets :data:`DEFAULTS`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..boxes import TOKEN_DIALECTS, crop_counts, grounded_texts_flat
from ..grounding import BoxItem, box_table, choose_readers
from ..records import fields_json, fields_of

#: what a context without ``ctx.mixture`` gets
DEFAULTS = {"boxes": "pixels", "images": {"mode": "original"}, "readers": "all",
            "root": None}
_XYXY = ["x_min", "y_min", "x_max", "y_max"]


def options(ctx) -> dict:
    """The spec's grounding choices for ``ctx`` (:data:`DEFAULTS` filled in)."""
    return {**DEFAULTS, **(getattr(ctx, "mixture", None) or {})}


@dataclass
class Items:
    """A source's grounded items, in table-row order.

    ``row`` (table row per item), ``text`` (object), ``start`` (``len + 1`` offsets into
    ``xyxy``; an item without a box has none), ``xyxy`` (source pixels), ``reader`` (per
    box), ``width`` / ``height`` (per item), ``kind`` (``box_table``'s), ``dialect``,
    ``mode`` / ``size`` (the pointed-at image)."""

    row: np.ndarray
    text: np.ndarray
    start: np.ndarray
    xyxy: np.ndarray
    reader: np.ndarray
    width: np.ndarray
    height: np.ndarray
    kind: str
    dialect: str
    mode: str
    size: int | None

    def __len__(self) -> int:
        return len(self.row)

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.start)

    def frame(self, i: int) -> dict:
        return {"width": int(self.width[i]), "height": int(self.height[i]), "mode": self.mode,
                "size": self.size}


def _long(ctx) -> pd.DataFrame:
    """``box_table`` of the source with the readers choice applied (cached on ``ctx``)."""
    cache = ctx.__dict__.setdefault("_grounding", {})
    if "long" not in cache:
        opt = options(ctx)
        t = box_table(ctx.table, ctx.spec, root=opt["root"])
        mode = opt["readers"]
        if mode != "all" and t["reader"].notna().any():
            t = _choose(t, mode)
        cache["long"] = t
    return cache["long"]


def _choose(t: pd.DataFrame, mode: str) -> pd.DataFrame:
    """``t`` with :func:`choose_readers` applied per image that has readers."""
    multi = set(t.loc[t["reader"].notna(), "row"].tolist())
    keep = t[~t["row"].isin(multi)]
    parts = [keep]
    cols = ["text", "reader", "kind", "label", "item"]
    for r, g in t[t["row"].isin(multi)].groupby("row", sort=True):
        boxes = g[_XYXY].to_numpy()
        items = [BoxItem(tx, None if np.isnan(b[0]) else tuple(b), rd, f"{k}\x1f{it}", lb)
                 for (tx, rd, k, lb, it), b in zip(g[cols].itertuples(index=False, name=None),
                                                   boxes.tolist())]
        chosen, _ = choose_readers(items, mode)
        first = g.iloc[0]
        parts.append(pd.DataFrame({
            "row": r, "sample_id": first["sample_id"],
            "item": [int(i.kind.split("\x1f")[1]) for i in chosen],
            "kind": [i.kind.split("\x1f")[0] for i in chosen],
            "text": [i.text for i in chosen], "label": [i.label for i in chosen],
            "reader": pd.Series([i.reader for i in chosen], dtype=object),
            **{k: [np.nan if i.box is None else i.box[c] for i in chosen]
               for c, k in enumerate(_XYXY)},
            "width": first["width"], "height": first["height"]}))
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else keep
    return out.sort_values(["row", "item"], kind="stable").reset_index(drop=True)


def items(ctx, *, by: str = "text", boxed: bool = False) -> Items:
    """The source's items grouped by ``by`` (``text``: the sentence, phrase, region or finding
    box_table gives; ``label``: the box's own label, as detection reads it); ``boxed``: only
    items with a box (cached on ``ctx``)."""
    cache = ctx.__dict__.setdefault("_grounding", {})
    key = ("items", by, boxed)
    if key in cache:
        return cache[key]
    t = _long(ctx)
    if boxed:
        t = t[t["x_min"].notna()]
    rows = t["row"].to_numpy(np.int64)
    keys = t[by].astype(str).to_numpy(object)
    if by == "label":  # a box without a label is named by its text
        keys = np.where(keys == "", t["text"].astype(str).to_numpy(object), keys)
    codes, _ = pd.factorize(pd.Series(rows.astype(str), dtype=object) + "\x1f" + keys,
                            sort=False)  # first appearance: row-major
    order = np.argsort(codes, kind="stable")
    codes, rows, keys = codes[order], rows[order], keys[order]
    xyxy = t[_XYXY].to_numpy(np.float64)[order]
    reader = t["reader"].to_numpy(object)[order]
    first = np.r_[0, np.flatnonzero(np.diff(codes)) + 1] if len(codes) else np.zeros(0, int)
    has = ~np.isnan(xyxy[:, 0])
    n_boxes = np.add.reduceat(has.astype(np.int64), first) if len(first) else first
    opt = options(ctx)
    img = opt["images"]
    cache[key] = Items(rows[first], keys[first], np.r_[0, np.cumsum(n_boxes)].astype(np.int64),
                       xyxy[has], reader[has], t["width"].to_numpy(np.int64)[order][first],
                       t["height"].to_numpy(np.int64)[order][first],
                       str(t["kind"].iloc[0]) if len(t) else "finding", opt["boxes"],
                       img.get("mode", "original"), img.get("size"))
    return cache[key]


def ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenated integer ranges ``[starts[k], ends[k])``."""
    n = ends - starts
    if not n.sum():
        return np.zeros(0, np.int64)
    offsets = np.repeat(starts - np.r_[0, np.cumsum(n)[:-1]], n)
    return np.arange(int(n.sum()), dtype=np.int64) + offsets


def texts(it: Items, first: np.ndarray, last: np.ndarray, phrases=None) -> list[str]:
    """The target text of records made of items ``first[k]:last[k]`` (``phrases``: the text
    written per item, default the item's own)."""
    sel = ranges(first, last)
    box = ranges(it.start[sel], it.start[sel + 1])
    return grounded_texts_flat(
        list(it.text[sel]) if phrases is None else phrases, xyxy=it.xyxy[box],
        widths=it.width[sel], heights=it.height[sel],
        item_start=np.r_[0, np.cumsum(it.counts[sel])], record_start=np.r_[0, np.cumsum(
            last - first)], dialect=it.dialect, mode=it.mode, size=it.size)


def fields(it: Items, first: np.ndarray, last: np.ndarray, *, task_kind: str,
           name: str = "finding", text: str | None = None, extra=None) -> list[str]:
    """``fields`` of records made of items ``first[k]:last[k]``: ``task_kind``, ``dialect``,
    ``frame`` and ``boxes`` (``[{name: text, "box": [x1, y1, x2, y2] source px, "reader"}]``),
    plus ``extra[k]`` (a dict) where given; ``text`` names every box alike.

    The text is :func:`~radharmony.mixture.records.fields_json`'s, byte for byte, written
    from cached pieces (a million boxes' fields in seconds)."""
    sel = ranges(first, last)
    box = ranges(it.start[sel], it.start[sel + 1])
    dump = _Dump()
    owner = np.repeat(sel, it.counts[sel])
    xy = np.round(it.xyxy[box], 2).tolist()
    names = [dump(text)] * len(box) if text is not None else dump.many(it.text[owner])
    parts = [f'{{"box":[{a!r},{b!r},{c!r},{d!r}],"{name}":{n},"reader":{r}}}'
             for (a, b, c, d), n, r in zip(xy, names, dump.many(it.reader[box]))]
    at = np.minimum(np.r_[0, np.cumsum(last - first)[:-1]], max(len(sel) - 1, 0))
    per = np.add.reduceat(it.counts[sel], at) if len(first) and len(sel) \
        else np.zeros(len(first), np.int64)
    per = np.where(last > first, per, 0)
    ends = np.cumsum(per).tolist()
    head, tail = f'"dialect":{dump(it.dialect)},"frame":', f',"task_kind":{dump(task_kind)}}}'
    size = "null" if it.size is None else str(int(it.size))
    out, start = [], 0
    for k, (a, end) in enumerate(zip(first.tolist(), ends)):
        frame = "null" if last[k] <= a else (
            f'{{"height":{int(it.height[a])},"mode":{dump(it.mode)},"size":{size},'
            f'"width":{int(it.width[a])}}}')
        if extra is not None:
            f = fields_of('{"boxes":[' + ",".join(parts[start:end]) + "]," + head + frame
                          + tail)
            out.append(fields_json({**f, **extra[k]}))
        else:
            out.append('{"boxes":[' + ",".join(parts[start:end]) + "]," + head + frame + tail)
        start = end
    return out


class _Dump(dict):
    """JSON text of a value, cached (the same few texts, readers and names repeat)."""

    def __call__(self, value) -> str:
        key = (type(value), value)
        if key not in self:
            self[key] = json.dumps(None if value is None or value != value else value,
                                   ensure_ascii=False)
        return self[key]

    def many(self, values: np.ndarray) -> list[str]:
        """:meth:`__call__` of each value (object array), each distinct value dumped once."""
        codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=False)
        texts = [self(None if u is None or u != u else u) for u in uniques.tolist()]
        return [texts[c] for c in codes.tolist()]


def crop_counted(it: Items) -> dict:
    """What MAIRA-2's centred crop does to the items' boxes (``mixture.json``'s ``counted``:
    ``boxes_clipped_to_crop``, ``boxes_dropped_outside_crop``; empty when nothing is cut, as
    in the other dialects and on square images)."""
    n = crop_counts(it.xyxy, np.repeat(it.width, it.counts), np.repeat(it.height, it.counts),
                    dialect=it.dialect, mode=it.mode, size=it.size)
    return {k: v for k, v in (("boxes_clipped_to_crop", n["clipped"]),
                              ("boxes_dropped_outside_crop", n["dropped"])) if v}


def nothing_text(dialect: str, words: str) -> str:
    """The target of an image with nothing to box: plain ``words`` in the token dialects
    (text without a token says nothing was found), an empty JSON list in the others."""
    return words if dialect in TOKEN_DIALECTS else json.dumps([])


__all__ = ["DEFAULTS", "Items", "crop_counted", "fields", "items", "nothing_text", "options", "ranges",
           "texts"]
