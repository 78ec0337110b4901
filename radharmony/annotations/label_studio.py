"""Label Studio box exports -> normalized box records.

Reads the full JSON task list, JSON-MIN and files keyed by image name, with regions in percent
of the image, into the ``boxes`` records of :mod:`radharmony.annotations.boxes`.
"""

from __future__ import annotations

import math
import posixpath
import re
import warnings

from .boxes import box_record
from ..errors import MetadataError

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
