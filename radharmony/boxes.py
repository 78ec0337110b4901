"""Boxes, written once for every dataset.

In the harmonized table a dataset with boxes has a ``boxes`` column: per image a list of dicts
``{"label": str, "annotator": str | None, "x_min", "y_min", "x_max", "y_max"}`` in the units
its spec declares (``box_units``: ``"normalized"`` = [0, 1] of the source image, or
``"pixel"`` = source pixels when the metadata gives no image size). An image without boxes has
an empty list. Read back from CSV the column is a JSON string; :func:`parse_boxes` turns it back.

This module also holds what every dataset's boxes may need:

* :func:`iou_matrix` -- pairwise IoU;
* :class:`BoxSelection` -- keep all annotators (default), keep one, or merge across annotators
  by IoU; the dataset constructors' ``bbox_annotator=`` / ``bbox_merge_iou=`` build one;
* :func:`read_label_studio` -- Label Studio exports (full JSON task list or JSON-MIN) and
  files keyed by image name, in percent of the image, to normalized box records.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
import warnings
from dataclasses import dataclass

import numpy as np

from .errors import MetadataError, RadHarmonyError
from .schema import parse_literal

BOX_KEYS = ("x_min", "y_min", "x_max", "y_max")


# -- the boxes column ------------------------------------------------------------------------------
def parse_boxes(value) -> list[dict]:
    """A ``boxes`` cell (list, JSON or Python-literal text as ``DataFrame.to_csv`` writes it,
    None or NaN) -> list of dicts. Text is parsed as data only (``json``/``ast.literal_eval``)."""
    if value is None or isinstance(value, float) and np.isnan(value):
        return []
    if isinstance(value, str):
        value = parse_literal(value) if value.strip() else []
    return [dict(b) for b in value]



def boxes_to_array(records) -> tuple[np.ndarray, list[str], list[str | None]]:
    """``(N, 4)`` float32 array, labels and annotators from a ``boxes`` cell."""
    recs = parse_boxes(records)
    xyxy = np.array([[float(b[k]) for k in BOX_KEYS] for b in recs], np.float32).reshape(-1, 4)
    return xyxy, [str(b.get("label", "")) for b in recs], [b.get("annotator") for b in recs]


def box_record(label: str, annotator, x_min, y_min, x_max, y_max) -> dict:
    """One entry of a ``boxes`` list (annotator as text, or None when unknown)."""
    return {"label": label, "annotator": None if annotator is None else str(annotator),
            "x_min": float(x_min), "y_min": float(y_min), "x_max": float(x_max),
            "y_max": float(y_max)}


def normalize_boxes(records, *, width: float, height: float) -> list[dict]:
    """Pixel box records -> [0, 1] of a ``width`` x ``height`` image (e.g. a ``"pixel"``
    table's boxes once the image size is known)."""
    scale = {"x_min": width, "x_max": width, "y_min": height, "y_max": height}
    return [{**b, **{k: float(b[k]) / scale[k] for k in BOX_KEYS}} for b in parse_boxes(records)]


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in ``a`` (N, 4) with every box in ``b`` (M, 4), as an (N, M) array.

    Boxes are ``x_min, y_min, x_max, y_max`` in continuous coordinates; empty boxes give 0.
    """
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    lo = np.maximum(a[:, None, :2], b[None, :, :2])
    hi = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(hi - lo, 0, None).prod(axis=2)
    area_a = np.clip(a[:, 2:] - a[:, :2], 0, None).prod(axis=1)
    area_b = np.clip(b[:, 2:] - b[:, :2], 0, None).prod(axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def match_pairs(iou: np.ndarray, threshold: float = 0.0) -> list[tuple[int, int, float]]:
    """Greedy one-to-one matching: highest IoU first, each row and column used once, pairs
    with IoU above ``threshold`` (or equal to it when ``threshold`` > 0)."""
    pairs = []
    if iou.size == 0:
        return pairs
    used_r, used_c = set(), set()
    order = np.argsort(-iou, axis=None, kind="stable")
    for flat in order:
        r, c = divmod(int(flat), iou.shape[1])
        v = float(iou[r, c])
        if v < threshold or (threshold == 0.0 and v <= 0.0):
            break
        if r not in used_r and c not in used_c:
            used_r.add(r)
            used_c.add(c)
            pairs.append((r, c, v))
    return pairs


# -- keep all / keep one annotator / merge ---------------------------------------------------------
@dataclass(frozen=True)
class BoxSelection:
    """Which boxes a sample gets when several annotators boxed the same image.

    Attributes:
        annotator: None keeps every annotator's boxes (the default); ``"first"`` keeps, per
            image, the boxes of the annotator listed first for that image; any other text keeps
            only that annotator's boxes (images they did not annotate get none).
        merge_iou: when set, boxes of the same label drawn by different annotators are grouped
            (greedily, highest IoU first, at most one box per annotator in a group, every pair
            in a group with IoU >= ``merge_iou``) and each group becomes one box: the mean of its
            coordinates, annotator ``"a+b"`` (sorted ids). Boxes left alone are kept as they are.
    """

    annotator: str | None = None
    merge_iou: float | None = None

    def __post_init__(self):
        if self.annotator is not None and not isinstance(self.annotator, str):
            raise RadHarmonyError("bbox_annotator must be text", expected="None (all), 'first' "
                                  "or an annotator id such as '705'", found=repr(self.annotator),
                                  fix=f"pass bbox_annotator={str(self.annotator)!r}")
        if self.merge_iou is not None:
            ok = isinstance(self.merge_iou, (int, float)) and not isinstance(self.merge_iou, bool)
            if not ok or not 0.0 < float(self.merge_iou) <= 1.0:
                raise RadHarmonyError("bbox_merge_iou must be a number in (0, 1]",
                                      expected="e.g. bbox_merge_iou=0.5",
                                      found=repr(self.merge_iou), fix="pass a value in (0, 1]")
            if self.annotator is not None:
                raise RadHarmonyError("bbox_annotator and bbox_merge_iou exclude each other",
                                      expected="one annotator's boxes, or boxes merged across "
                                      "annotators", found=f"bbox_annotator={self.annotator!r}, "
                                      f"bbox_merge_iou={self.merge_iou!r}",
                                      fix="pass only one of them")

    @property
    def keeps_all(self) -> bool:
        return self.annotator is None and self.merge_iou is None

    def apply(self, records) -> list[dict]:
        """The selected box records of one image (a ``boxes`` cell)."""
        recs = parse_boxes(records)
        if self.keeps_all or not recs:
            return recs
        if self.annotator is not None:
            who = recs[0].get("annotator") if self.annotator == "first" else self.annotator
            return [b for b in recs if b.get("annotator") == who]
        return merge_boxes(recs, iou=float(self.merge_iou))


def merge_boxes(records: list[dict], *, iou: float) -> list[dict]:
    """Merge same-label boxes of different annotators that overlap with IoU >= ``iou``.

    Greedy and deterministic: pairs are taken highest IoU first; a box joins a group only when
    its annotator is not in it yet and it overlaps every member with IoU >= ``iou``. A group's
    box is the mean of its members' coordinates. Output order follows the first member.
    """
    xyxy, labels, annotators = boxes_to_array(records)
    groups = [[i] for i in range(len(records))]
    group_of = list(range(len(records)))
    m = iou_matrix(xyxy, xyxy)
    cand = [(m[i, j], i, j) for i in range(len(records)) for j in range(i + 1, len(records))
            if labels[i] == labels[j] and annotators[i] != annotators[j] and m[i, j] >= iou]
    for _, i, j in sorted(cand, key=lambda t: (-t[0], t[1], t[2])):
        gi, gj = group_of[i], group_of[j]
        if gi == gj:
            continue
        a, b = groups[gi], groups[gj]
        if {annotators[k] for k in a} & {annotators[k] for k in b} or \
                min(m[p, q] for p in a for q in b) < iou:
            continue
        groups[gi] = sorted(a + b)
        groups[gj] = []
        for k in b:
            group_of[k] = gi
    out = []
    for g in sorted((g for g in groups if g), key=lambda g: g[0]):
        if len(g) == 1:
            out.append(dict(records[g[0]]))
            continue
        mean = xyxy[g].astype(np.float64).mean(axis=0)
        who = "+".join(sorted(str(annotators[k]) for k in g))
        out.append(box_record(labels[g[0]], who, *mean.tolist()))
    return out


# -- Label Studio ----------------------------------------------------------------------------------
#: The Label Studio export forms :func:`read_label_studio` detects.
LABEL_STUDIO_FORMS = ("label_studio_json", "label_studio_json_min", "keyed_by_image")
_LS_LABEL_KEYS = ("rectanglelabels", "labels")
_LS_UPLOAD_PREFIX = re.compile(r"^[0-9a-f]{8}-")


def image_key(name: str) -> str:
    """The file name a Label Studio image reference points at (URL/path and query removed)."""
    name = str(name).split("?", 1)[0].replace("\\", "/")
    return posixpath.basename(name)


def join_boxes(names, by_name: dict[str, list[dict]]) -> tuple[list[list[dict]], list[str]]:
    """Each of ``names``' box list (empty when it has none) and the box-file names that matched
    no image. A name also matches without Label Studio's upload prefix (``"1a2b3c4d-"``, eight
    hex digits and a dash, which Label Studio puts before uploaded file names)."""
    wanted = set(names)
    table: dict[str, list[dict]] = {}
    unmatched = []
    for key, recs in by_name.items():
        name = key if key in wanted else _LS_UPLOAD_PREFIX.sub("", key, count=1)
        if name in wanted:
            table.setdefault(name, []).extend(recs)
        else:
            unmatched.append(key)
    return [[dict(r) for r in table.get(n, [])] for n in names], unmatched


def detect_label_studio_form(raw, *, source: str = "box file") -> str:
    """Which of :data:`LABEL_STUDIO_FORMS` ``raw`` (parsed JSON) is.

    * a list of tasks with ``data`` and ``annotations`` -> ``"label_studio_json"`` (the full
      "JSON" export);
    * a list of flat records with an image field and region lists -> ``"label_studio_json_min"``;
    * an object keyed by image file name whose values are region lists -> ``"keyed_by_image"``.
    """
    if isinstance(raw, dict):
        if all(isinstance(v, list) for v in raw.values()):
            return "keyed_by_image"
    elif isinstance(raw, list):
        if not raw:
            return "label_studio_json"
        if all(isinstance(t, dict) for t in raw):
            if all("data" in t and ("annotations" in t or "completions" in t) for t in raw):
                return "label_studio_json"
            if all(any(isinstance(v, list) for v in t.values()) or "image" in t for t in raw):
                return "label_studio_json_min"
    raise MetadataError(f"{source} is not a Label Studio box export",
                        expected="a Label Studio JSON task list, a JSON-MIN list, or an object "
                        "keyed by image name with lists of regions", found=_describe(raw),
                        fix="export the project again from Label Studio as JSON or JSON-MIN")


def read_label_studio(raw, *, source: str = "box file", image_sizes=None
                      ) -> tuple[dict[str, list[dict]], str]:
    """Normalized box records per image file name, and the detected form.

    Label Studio coordinates: ``x``, ``y`` (top-left corner before rotation), ``width`` and
    ``height`` in percent (0-100) of the image, so ``/ 100`` gives [0, 1] of the source image
    whatever its resolution; ``original_width``/``original_height`` only serve to turn a rotated
    rectangle into its axis-aligned envelope (a rotation other than 0 warns). Only rectangle
    results count (``rectanglelabels``, or ``rectangle`` with ``labels``); predictions and
    cancelled annotations of the full export are ignored. The annotator is the full export's
    ``completed_by`` (id or e-mail), JSON-MIN's ``annotator``, or a region's own ``annotator``.

    In a file keyed by image name, a region that carries ``original_width``/``original_height``
    is a Label Studio region (percent); one without them is in pixels of the original image and
    is normalized with ``image_sizes[name] = (height, width)``: a pixel region of an image
    mapped to None (size unknown) is dropped with a warning, one of an image the mapping does
    not list is left out (it is not among the caller's images). A region's label is its
    ``rectanglelabels``/``labels`` list (joined with ``|``) or its ``label`` text.
    """
    form = detect_label_studio_form(raw, source=source)
    regions: list[tuple[str, object, dict, str]] = []  # image, annotator, region, where
    if form == "label_studio_json":
        for t, task in enumerate(raw):
            image = _image_field(task.get("data"), f"{source}, task {t}")
            for a, ann in enumerate(task.get("annotations", task.get("completions")) or []):
                if not isinstance(ann, dict) or ann.get("was_cancelled") or ann.get("skipped"):
                    continue
                who = _annotator(ann.get("completed_by"))
                for r, res in enumerate(ann.get("result") or []):
                    regions.append((image, who, res, f"{source}, task {t}, annotation {a}, "
                                                     f"result {r}"))
    elif form == "label_studio_json_min":
        for t, rec in enumerate(raw):
            image = _image_field(rec, f"{source}, record {t}")
            who = _annotator(rec.get("annotator"))
            for key, val in rec.items():
                if isinstance(val, list):
                    regions += [(image, who, res, f"{source}, record {t}, {key}[{r}]")
                                for r, res in enumerate(val) if isinstance(res, dict)]
    else:
        for image, val in raw.items():
            regions += [(image, None, res, f"{source}, {image!r}[{r}]")
                        for r, res in enumerate(val)]
    out: dict[str, list[dict]] = {}
    notes = {"ignored": 0, "rotated": [], "unsized": []}
    sizes = image_sizes or {}
    for image, who, res, where in regions:
        name = image_key(image)
        pixel = form == "keyed_by_image" and isinstance(res, dict) and not _has_size(res)
        if pixel and name not in sizes:
            continue
        rec = _ls_region(res, who, where=where, notes=notes,
                         size=sizes.get(name) if pixel else None, pixel=pixel)
        if rec is not None:
            out.setdefault(name, []).append(rec)
    if notes["rotated"]:
        warnings.warn(f"{source}: {len(notes['rotated'])} rotated rectangle(s), e.g. "
                      f"{notes['rotated'][0]}; radharmony uses each one's axis-aligned envelope.",
                      UserWarning, stacklevel=2)
    if notes["unsized"]:
        warnings.warn(f"{source}: {len(notes['unsized'])} pixel box(es) dropped because their "
                      f"image's size is unknown, e.g. {notes['unsized'][0]}.", UserWarning,
                      stacklevel=2)
    if notes["ignored"]:
        warnings.warn(f"{source}: {notes['ignored']} result(s) that are not labelled rectangles "
                      "were ignored (e.g. choices, polygons).", UserWarning, stacklevel=2)
    return out, form


def _has_size(res: dict) -> bool:
    value = res.get("value") if isinstance(res.get("value"), dict) else {}
    return any(k in res or k in value for k in ("original_width", "original_height"))


def _ls_region(res, who, *, where: str, notes: dict, size, pixel: bool) -> dict | None:
    value = res.get("value") if isinstance(res, dict) and isinstance(res.get("value"), dict) \
        else res
    kind = str(res.get("type", "")).lower() if isinstance(res, dict) else ""
    labels = next((value[k] for k in _LS_LABEL_KEYS if isinstance(value, dict) and
                   isinstance(value.get(k), list)), None)
    if labels is None and isinstance(value, dict) and isinstance(value.get("label"), str):
        labels = [value["label"]]
    if labels is None or (kind and kind not in ("rectanglelabels", "rectangle", "labels")):
        notes["ignored"] += 1
        return None
    try:
        x, y, w, h = (float(value[k]) for k in ("x", "y", "width", "height"))
        if not all(map(math.isfinite, (x, y, w, h))):
            raise ValueError("not finite")
    except (KeyError, TypeError, ValueError) as exc:
        raise MetadataError(f"{where}: rectangle without numeric x, y, width, height",
                            expected="numbers x, y, width, height", found=repr(exc),
                            fix="export the project again from Label Studio") from None
    who = _annotator(value.get("annotator")) if who is None else who
    ow = float(res.get("original_width") or value.get("original_width") or 1)
    oh = float(res.get("original_height") or value.get("original_height") or 1)
    if pixel:
        if not (isinstance(size, (tuple, list)) and len(size) == 2):
            notes["unsized"].append(where)
            return None
        oh, ow = float(size[0]), float(size[1])
        x, w, y, h = 100 * x / ow, 100 * w / ow, 100 * y / oh, 100 * h / oh
    angle = float(value.get("rotation", 0) or 0)
    if min(x, y, w, h) < -0.5 or (angle % 360 == 0 and max(x + w, y + h) > 100.5):
        raise MetadataError(f"{where}: rectangle outside its image", expected="x, y, width, "
                            "height within 0-100 % of the image (Label Studio) or within the "
                            "image's pixel size", found=f"x={x:g}, y={y:g}, width={w:g}, "
                            f"height={h:g} (percent)", fix="check the box file's units")
    x0, y0, x1, y1 = x / 100, y / 100, (x + w) / 100, (y + h) / 100
    if angle % 360:
        notes["rotated"].append(f"{where} (rotation {angle:g})")
        x0, y0, x1, y1 = _rotated_envelope(x0, y0, x1 - x0, y1 - y0, angle, ow / oh)
    return box_record("|".join(str(v) for v in labels), who, x0, y0, x1, y1)


def _rotated_envelope(x, y, w, h, angle, aspect):
    """Axis-aligned envelope (normalized) of a rectangle rotated clockwise by ``angle`` degrees
    about its top-left corner (Label Studio's convention); ``aspect`` = width / height."""
    t = math.radians(angle)
    c, s = math.cos(t), math.sin(t)
    ww, hh = w * aspect, h  # to isotropic units (height = 1)
    pts = [(0, 0), (ww, 0), (ww, hh), (0, hh)]
    xs = [x * aspect + px * c - py * s for px, py in pts]
    ys = [y + px * s + py * c for px, py in pts]
    return (max(0.0, min(xs) / aspect), max(0.0, min(ys)), min(1.0, max(xs) / aspect),
            min(1.0, max(ys)))


def _image_field(data, where: str) -> str:
    if isinstance(data, dict):
        for key in ("image", "img", "image_url"):
            if isinstance(data.get(key), str):
                return data[key]
        texts = [v for v in data.values() if isinstance(v, str) and "." in v]
        if len(texts) == 1:
            return texts[0]
    raise MetadataError(f"{where} names no image", expected="a data field 'image' holding the "
                        "image's file name or URL", found=_describe(data),
                        fix="export the project again from Label Studio")


def _annotator(value) -> str | None:
    if isinstance(value, dict):
        value = value.get("email", value.get("id"))
    return None if value is None else str(value)


def _describe(value) -> str:
    if isinstance(value, dict):
        return f"an object with keys {sorted(value)[:6]}"
    if isinstance(value, list):
        return f"a list of {len(value)} item(s), first {type(value[0]).__name__ if value else '-'}"
    return type(value).__name__
