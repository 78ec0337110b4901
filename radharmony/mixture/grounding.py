"""Where a grounded task's boxes come from: every box of a harmonized table in source pixels with
the phrase it grounds and its reader, and the choice between several readers' boxes.

:func:`box_table` reads the table's ``boxes`` column (:mod:`radharmony.annotations.boxes`) for
any dataset with boxes and gives one row per box -- or per sentence without one -- with:

* ``kind`` and ``text``: what the box grounds. ``sentence`` -- PadChest-GR: every finding
  sentence of the ``sentences`` column in order (``sentence_en``), positive ones with their
  readers' boxes, negative ones with none; ``phrase`` -- MS-CXR: the box's phrase; ``region`` --
  Chest ImaGenome: the anatomical region's name; ``finding`` -- every other set (VinDr-CXR's
  two releases, VinDr-PCXR, NIH, RSNA, TBX11K, SIIM-COVID, Object-CXR): the box's label as the
  source spells it. ``label`` keeps the box's own label in every case.
* ``item``: boxes of one image with the same text (one sentence, phrase, region or finding)
  share it, numbered in order of first appearance: the unit a grounded sentence is written for.
* ``reader``: the annotator (``R8`` for VinDr, ``1``/``2`` for PadChest-GR), else None.
* ``x_min, y_min, x_max, y_max``: **source pixels** (NaN for a sentence without a box): a table
  with ``box_units="normalized"`` is scaled by the image's size.
* ``width, height``: the source image's size in pixels, which every dialect needs. Taken from
  ``sizes=`` when given, else the table's ``width``/``height`` columns (TBX11K's COCO sizes),
  else the image file's header under ``root`` (no pixel decoded). NIH's ``original_width`` is
  the size *before* NIH resized to the 1024 PNG, never the file's, and is not used.

:func:`choose_readers` keeps all readers' boxes, one reader's, or their fused boxes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..annotations.boxes import BOX_KEYS, annotator_groups, parse_boxes
from ..errors import ImageReadError, RadHarmonyError, shorten

COLUMNS = ("row", "sample_id", "item", "kind", "text", "label", "reader", "x_min", "y_min",
           "x_max", "y_max", "width", "height")
READER_MODES = ("all", "first", "fused", "reader:<id>")
#: boxes of one finding drawn by different readers are one when their IoU reaches this
FUSE_IOU = 0.5


class BoxItem(NamedTuple):
    """One box (or one sentence without a box) of an image."""

    text: str
    box: tuple | None
    reader: str | None
    kind: str = "finding"
    label: str = ""


class RowBoxes(NamedTuple):
    """One table row's image size and its items in order."""

    sample_id: str
    width: int
    height: int
    items: list


def _kind(df: pd.DataFrame, spec) -> str:
    if "sentences" in df.columns:
        return "sentence"
    if str(getattr(spec, "key", "")).startswith("chest_imagenome"):
        return "region"
    return "finding"


def _spec(spec):
    return getattr(spec, "spec", spec)


def box_table(df: pd.DataFrame, spec, *, root=None, sizes=None) -> pd.DataFrame:
    """Every box of ``df`` (a harmonized table) in source pixels, one row per box or unboxed
    sentence, columns :data:`COLUMNS` (see the module docs).

    Args:
        df: the dataset's ``harmonized_df`` (only rows with boxes or sentences give rows).
        spec: its :class:`~radharmony.spec.DatasetSpec` (or the dataset): ``box_units``.
        root: the images' folder (``base_image_dir``), read for sizes the table lacks.
        sizes: ``{sample_id: (width, height)}`` or a frame with ``sample_id, width, height``.
    """
    spec = _spec(spec)
    if "boxes" not in df.columns:
        raise RadHarmonyError(f"{getattr(spec, 'key', 'The table')} has no boxes column",
                              expected="a harmonized table of a dataset with boxes",
                              found=f"columns {shorten(list(df.columns), 120)}",
                              fix="pick a source that has boxes (`radharmony list`)")
    kind = _kind(df, spec)
    cells = df["boxes"].tolist()
    sentences = df["sentences"].tolist() if kind == "sentence" else None
    rows, items, texts, labels, readers, coords = [], [], [], [], [], []
    for r, cell in enumerate(cells):
        recs = cell if isinstance(cell, list) else parse_boxes(cell)
        if sentences is not None:
            sents = sentences[r] if isinstance(sentences[r], list) else parse_boxes(sentences[r])
            per: dict[int, list] = {}
            for b in recs:
                per.setdefault(int(b.get("sentence", -1)), []).append(b)
            seq = [(i, str(s.get("sentence_en") or ""), per.get(i, []))
                   for i, s in enumerate(sents)]
            seq += [(i, str(per[i][0].get("sentence_en") or ""), per[i])
                    for i in sorted(set(per) - set(range(len(sents))))]
        else:
            seq, index = [], {}
            for b in recs:
                t = str(b.get("phrase") or b.get("label") or "")
                if t not in index:
                    index[t] = len(index)
                    seq.append((index[t], t, []))
                seq[index[t]][2].append(b)
        for i, text, bs in seq:
            for b in bs or [None]:
                rows.append(r)
                items.append(i)
                texts.append(text)
                if b is None:
                    labels.append("")
                    readers.append(None)
                    coords.append((math.nan,) * 4)
                    continue
                labels.append(str(b.get("label", "")))
                who = b.get("annotator")
                readers.append(None if who is None else str(who))
                coords.append(tuple(float(b[k]) for k in BOX_KEYS))
    out = pd.DataFrame({"row": np.asarray(rows, np.int64), "item": np.asarray(items, np.int64)})
    out.insert(1, "sample_id", df["sample_id"].to_numpy()[out["row"].to_numpy()]
               if len(out) else pd.Series([], dtype=object))
    if kind == "finding" and any(isinstance(c, list) and c and "phrase" in c[0] for c in cells):
        kind = "phrase"  # MS-CXR: every box carries its phrase
    out["kind"] = kind
    out["text"], out["label"] = texts, labels
    out["reader"] = pd.Series(readers, dtype=object)  # None stays None (not NaN)
    xyxy = np.asarray(coords, np.float64).reshape(-1, 4)
    w, h = _sizes(df, np.unique(out["row"].to_numpy()), root=root, sizes=sizes, spec=spec)
    wr, hr = w[out["row"].to_numpy()], h[out["row"].to_numpy()]
    if getattr(spec, "box_units", "normalized") == "normalized":
        xyxy = xyxy * np.stack([wr, hr, wr, hr], axis=1)
    for j, k in enumerate(BOX_KEYS):
        out[k] = xyxy[:, j]
    out["width"], out["height"] = wr, hr
    return out[list(COLUMNS)]


def _sizes(df, rows: np.ndarray, *, root, sizes, spec) -> tuple[np.ndarray, np.ndarray]:
    """``(width, height)`` of every row of ``df`` (0 where not needed)."""
    w = np.zeros(len(df), np.int64)
    h = np.zeros(len(df), np.int64)
    if not len(rows):
        return w, h
    ids = df["sample_id"].to_numpy()
    if sizes is not None:
        if isinstance(sizes, pd.DataFrame):
            sizes = dict(zip(sizes["sample_id"], zip(sizes["width"], sizes["height"])))
        missing = [ids[r] for r in rows if ids[r] not in sizes]
        if missing:
            raise RadHarmonyError("sizes= lacks images that have boxes",
                                  expected="a (width, height) for every boxed image",
                                  found=f"{len(missing)} missing, e.g. {missing[0]!r}",
                                  fix="add them, or pass root= to read the image headers")
        for r in rows:
            w[r], h[r] = sizes[ids[r]]
    elif {"width", "height"} <= set(df.columns):
        w[rows] = df["width"].to_numpy()[rows]
        h[rows] = df["height"].to_numpy()[rows]
    elif root is not None:
        paths = df["image_path"].to_numpy()
        for r in rows:
            h[r], w[r] = image_size(root, paths[r])
    else:
        raise RadHarmonyError(f"The boxes of {getattr(spec, 'key', 'this table')} need each "
                              "image's size", expected="the table's width/height columns, "
                              "sizes=, or root= (the image headers are read)",
                              found="none of them", fix="pass root=ds.base_image_dir")
    if (w[rows] < 1).any() or (h[rows] < 1).any():
        bad = rows[(w[rows] < 1) | (h[rows] < 1)][0]
        raise RadHarmonyError(f"Image size of {ids[bad]} is not positive",
                              expected="width and height >= 1",
                              found=f"{w[bad]} x {h[bad]}", fix="repair the size given")
    return w, h


def image_size(root, rel: str) -> tuple[int, int]:
    """``(height, width)`` of the image ``root/rel`` from its header (no pixel decoded)."""
    from ..imaging.read import check_header, describe_bytes, read_head, safe_path, sniff

    full = safe_path(root, rel)
    head = read_head(full)
    kind = sniff(head)
    if kind is None:
        raise ImageReadError(f"Image file {full} is not a PNG, JPEG or DICOM image",
                             expected="an image file", found=describe_bytes(head),
                             fix="re-extract the file")
    h, w, _ = check_header(full, kind, head)
    return h, w


def box_items(df: pd.DataFrame, spec, *, root=None, sizes=None) -> list[RowBoxes]:
    """Per row of ``df``: its image size and its :class:`BoxItem` s in order (``box`` a tuple
    ``(x1, y1, x2, y2)`` in source pixels, None for a sentence without one); rows without
    boxes get an empty list and size 0. Built from :func:`box_table`."""
    t = box_table(df, spec, root=root, sizes=sizes)
    out = [RowBoxes(s, 0, 0, []) for s in df["sample_id"].tolist()]
    xyxy = t[list(BOX_KEYS)].to_numpy()
    cols = zip(t["row"].tolist(), t["text"].tolist(), t["reader"].tolist(),
               t["kind"].tolist(), t["label"].tolist(), t["width"].tolist(),
               t["height"].tolist(), xyxy.tolist())
    for r, text, reader, kind, label, w, h, box in cols:
        if not out[r].items:
            out[r] = RowBoxes(out[r].sample_id, int(w), int(h), [])
        box = None if math.isnan(box[0]) else tuple(box)
        out[r].items.append(BoxItem(text, box, reader, kind, label))
    return out


# -- readers ---------------------------------------------------------------------------------------
def check_reader_mode(mode: str) -> str:
    """``mode`` when it is ``all``, ``first``, ``fused`` or ``reader:<id>``."""
    if isinstance(mode, str) and (mode in ("all", "first", "fused")
                                  or mode.startswith("reader:") and len(mode) > 7):
        return mode
    raise RadHarmonyError("Unknown readers choice", expected="'all', 'first', 'fused' or "
                          "'reader:<id>' (e.g. 'reader:R8')", found=shorten(repr(mode), 60),
                          fix="pass readers='all'")


def choose_readers(items, mode: str = "all") -> tuple[list, dict]:
    """The boxes of one image under a readers choice, and what was chosen (for the manifest).

    Items without a reader (single-reader sets) and sentences without a box are always kept.

    * ``all`` -- every reader's boxes;
    * ``first`` -- the boxes of the reader listed first on this image;
    * ``reader:<id>`` -- that reader's boxes only (none where they did not read the image);
    * ``fused`` -- per text, boxes of different readers grouped greedily, highest IoU first,
      every pair in a group at IoU >= :data:`FUSE_IOU`, at most one box per reader
      (:func:`radharmony.annotations.boxes.annotator_groups`); a group becomes one box, the mean
      of its members, reader ``"a+b"`` (sorted ids); a box alone stays as it is.

    >>> a = [BoxItem("Nodule", (10, 10, 50, 50), "R1"), BoxItem("Nodule", (12, 10, 52, 50), "R2")]
    >>> chosen, info = choose_readers(a, "fused")
    >>> chosen[0].box, chosen[0].reader, info
    ((11.0, 10.0, 51.0, 50.0), 'R1+R2', {'readers': 'fused', 'fuse_iou': 0.5})
    """
    check_reader_mode(mode)
    info = {"readers": mode, **({"fuse_iou": FUSE_IOU} if mode == "fused" else {})}
    items = [i if isinstance(i, BoxItem) else BoxItem(*i) for i in items]
    multi = [k for k, i in enumerate(items) if i.box is not None and i.reader is not None]
    if mode == "all" or not multi:
        return items, info
    if mode != "fused":
        who = items[multi[0]].reader if mode == "first" else mode[len("reader:"):]
        return [i for i in items if i.box is None or i.reader in (None, who)], info
    xyxy = np.array([items[k].box for k in multi], np.float64)
    groups = annotator_groups(xyxy, [items[k].text for k in multi],
                              [items[k].reader for k in multi], iou=FUSE_IOU)
    first = {}
    for g in groups:
        members = [multi[k] for k in g]
        mean = tuple(xyxy[g].mean(axis=0).tolist())
        who = "+".join(sorted(items[m].reader for m in members))
        first[members[0]] = items[members[0]]._replace(box=mean, reader=who) \
            if len(g) > 1 else items[members[0]]
    drop = set(multi) - set(first)
    return [first.get(k, i) for k, i in enumerate(items) if k not in drop], info
