"""Reading boxes back out of a model's output text, in any dialect of
:mod:`radharmony.mixture.boxes`, as boxes in the **original image's pixels**.

Tolerant of what models add: prose before, between and after the tokens, whitespace between
tokens and inside coordinates (``<x 12>``, ``( 12 , 30 )``), a JSON answer inside a code fence,
a MAIRA-2 sentence cut off before its ``</obj>``. Never guessing: a box that cannot be read
exactly is **counted** in ``malformed`` and left out --

* a MAIRA-2 ``<box>`` whose content is not whole ``<x><y><x><y>`` groups, or a bin over 99
  (MAIRA-2's own processor refuses bins past its 100);
* a CheXagent ``<|box|>`` that is not whole ``(x,y),(x,y)`` pairs, or a value over 100;
* an InternVL ``<box>`` that is not a JSON list of four-number lists, or a value over 1000;
* a Qwen2.5-VL ``bbox_2d`` past the image as its processor resizes it;
* a JSON box that is not four numbers (``{"x_min", ...}`` or ``[x1, y1, x2, y2]``), or a value
  past the image (over 1 for ``radfact``, over the width or height for ``pixels``);
* in every dialect, a negative value or a box whose corners are reversed (``x1 > x2``);
* a box token opened and never closed.

Several boxes in one token (``<box>`` with 8 coordinates, ``<|box|>`` with 4 points) are read
as that many boxes. A CheXagent box with no ``<|ref|>`` before it belongs to the phrase ``""``;
consecutive ``<|ref|>`` s with the same phrase are one sentence with all their boxes.

An output is **unparsed** (``ok`` False) when it holds malformed boxes and nothing usable (no
well-formed box, no sentence without a box), or, in the JSON dialects, no JSON list at all. A
plain sentence with no token reads as no sentence and is ``ok`` in the token dialects (a model
saying it found nothing).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import orjson

from ..errors import RadHarmonyError
from .box_fast import read_strict, strict_mask
from .box_frame import (ImageFrame, ParseResult, RADFACT_KEYS, _params, check_dialect,
                        from_units, unit_limits)

_NUM = r"(-?\d+(?:\.\d+)?)"
_OBJ_OPEN = re.compile(r"<\s*obj\s*>")
_OBJ_CLOSE = re.compile(r"<\s*/\s*obj\s*>")
_BOX = re.compile(r"<\s*box\s*>(.*?)<\s*/\s*box\s*>", re.S)
_BOX_OPEN = re.compile(r"<\s*box\s*>")
_MAIRA_COORD = re.compile(r"<\s*([xy])\s*(-?\d+)\s*>")
_MAIRA_REST = re.compile(r"<\s*[xy]\s*-?\d+\s*>|\s+")
_CHEX = re.compile(r"<\|ref\|>(.*?)<\|/ref\|>|<\|box\|>(.*?)<\|/box\|>", re.S)
_CHEX_POINT = re.compile(r"\(\s*" + _NUM + r"\s*,\s*" + _NUM + r"\s*\)")
_CHEX_REST = re.compile(r"\(\s*-?\d+(?:\.\d+)?\s*,\s*-?\d+(?:\.\d+)?\s*\)|[\s,]+")


# -- one output -> raw items: [(phrase, [[4 numbers], ...] or None)], malformed, ok -------------------
def _maira_box(inner: str):
    """Coordinates of one ``<box>`` content as 4-lists, or None when malformed."""
    coords = _MAIRA_COORD.findall(inner)
    if not coords or len(coords) % 4 or _MAIRA_REST.sub("", inner):
        return None
    if any(axis != "xyxy"[i % 4] for i, (axis, _) in enumerate(coords)):
        return None
    v = [int(c) for _, c in coords]
    return [v[i:i + 4] for i in range(0, len(v), 4)]


def _maira_content(content: str, items: list, phrase: str | None = None) -> int:
    bad = 0
    first = _BOX_OPEN.search(content)
    text = content if first is None else content[:first.start()]
    boxes, closed_end = [], 0
    for m in _BOX.finditer(content):
        got = _maira_box(m.group(1))
        if got is None:
            bad += 1
        else:
            boxes.extend(got)
        closed_end = m.end()
    bad += len(_BOX_OPEN.findall(content[closed_end:]))  # opened, never closed
    if phrase is None:
        items.append((text.strip(), boxes if first is not None else None))
    elif boxes:
        items.append((phrase, boxes))
    return bad


def _read_maira2(text: str):
    parts = _OBJ_OPEN.split(text)
    items, bad = [], 0
    if _BOX_OPEN.search(parts[0]):  # boxes before any <obj>: the phrase ""
        bad += _maira_content(_OBJ_CLOSE.split(parts[0])[0], items, phrase="")
    for part in parts[1:]:
        bad += _maira_content(_OBJ_CLOSE.split(part, maxsplit=1)[0], items)
    return items, bad, True


def _attach(items: list, last, boxes: list):
    """``boxes`` added to the last item (a phrase ``""`` opened when there is none); returns
    the last item."""
    if last is None:
        last = ("", None)
        items.append(last)
    if last[1] is None:
        last = (last[0], [])
        items[-1] = last
    last[1].extend(boxes)
    return last


def _read_chexagent(text: str):
    items, bad, last = [], 0, None
    for m in _CHEX.finditer(text):
        ref, inner = m.group(1), m.group(2)
        if ref is not None:
            ref = ref.strip()
            if last is None or last[0] != ref:
                last = (ref, None)
                items.append(last)
            continue
        points = _CHEX_POINT.findall(inner)
        if not points or len(points) % 2 or _CHEX_REST.sub("", inner):
            bad += 1
            continue
        v = [float(c) for pt in points for c in pt]
        last = _attach(items, last, [v[i:i + 4] for i in range(0, len(v), 4)])
    bad += max(0, text.count("<|box|>") - text.count("<|/box|>"))  # opened, never closed
    return items, bad, True


def _json_box(b, keys):
    if isinstance(b, dict):
        b = [b.get(k) for k in keys]
    if not isinstance(b, (list, tuple)) or len(b) != 4:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in b):
        return None
    return [float(v) for v in b]


def _json_list(text: str) -> list | None:
    """The JSON list in ``text`` (from its first ``[`` to its last ``]``), or None."""
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end < start:
        return None
    body = text[start:end + 1]
    try:
        data = orjson.loads(body)  # ~2x the standard parser
    except orjson.JSONDecodeError:
        try:  # what orjson refuses and json reads (NaN, Infinity)
            data = json.loads(body)
        except ValueError:
            return None
    return data if isinstance(data, list) else None


def _read_json(text: str):
    data = _json_list(text)
    if data is None:
        return [], 0, False
    items, bad = [], 0
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("text", ""), str):
            bad += 1
            continue
        raw = entry.get("boxes")
        if raw is None:
            items.append((entry.get("text", "").strip(), None))
            continue
        boxes = []
        for b in raw if isinstance(raw, list) else [raw]:
            got = _json_box(b, RADFACT_KEYS)
            if got is None:
                bad += 1
            else:
                boxes.append(got)
        items.append((entry.get("text", "").strip(), boxes))
    return items, bad, True


def _read_qwen(text: str):
    """Qwen2.5-VL: ``[{"bbox_2d": [x1, y1, x2, y2], "label": ...}, ...]``, one object a box
    (consecutive objects of one label are one sentence); an object without ``bbox_2d`` is a
    sentence without a box."""
    data = _json_list(text)
    if data is None:
        return [], 0, False
    items, bad, last = [], 0, None
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("label", ""), str):
            bad += 1
            continue
        label = entry.get("label", "").strip()
        if "bbox_2d" not in entry:
            last = (label, None)
            items.append(last)
            continue
        got = _json_box(entry["bbox_2d"], RADFACT_KEYS)
        if got is None:
            bad += 1
            continue
        if last is None or last[0] != label or last[1] is None:
            last = (label, None)
            items.append(last)
        last = _attach(items, last, [got])
    return items, bad, True


_INTERN = re.compile(r"<ref>(.*?)</ref>|<box>(.*?)</box>", re.S)


def _read_internvl(text: str):
    """InternVL: ``<ref>phrase</ref>`` then ``<box>[[x1, y1, x2, y2], ...]</box>`` (a box with
    no ``<ref>`` before it belongs to the phrase ``""``)."""
    items, bad, last = [], 0, None
    for m in _INTERN.finditer(text):
        ref, inner = m.group(1), m.group(2)
        if ref is not None:
            last = (ref.strip(), None)
            items.append(last)
            continue
        try:
            boxes = json.loads(inner)
            ok = isinstance(boxes, list) and boxes and all(
                isinstance(b, list) and len(b) == 4 and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in b)
                for b in boxes)
        except ValueError:
            ok = False
        if not ok:
            bad += 1
            continue
        last = _attach(items, last, [list(map(float, b)) for b in boxes])
    bad += max(0, text.count("<box>") - text.count("</box>"))  # opened, never closed
    return items, bad, True


_READERS = {"maira2": _read_maira2, "chexagent": _read_chexagent, "radfact": _read_json,
            "pixels": _read_json, "internvl": _read_internvl, "qwen2.5": _read_qwen}


# -- many outputs ---------------------------------------------------------------------------------
@dataclass
class ParsedOutputs:
    """Many outputs parsed at once, as columns: per sentence ``item_output``, ``item_phrase``,
    ``item_boxed``; per box ``box_item`` and ``xyxy`` (source pixels); per output
    ``malformed`` and ``ok``. Items are in output order, boxes in item order.
    :meth:`result` gives one output's :class:`ParseResult`."""

    item_output: np.ndarray
    item_phrase: list
    item_boxed: np.ndarray
    box_item: np.ndarray
    xyxy: np.ndarray
    malformed: np.ndarray
    ok: np.ndarray

    def __len__(self) -> int:
        return len(self.ok)

    def result(self, i: int) -> ParseResult:
        a, b = np.searchsorted(self.item_output, [i, i + 1])
        lo, hi = np.searchsorted(self.box_item, [a, b])
        starts = np.searchsorted(self.box_item[lo:hi], np.arange(a, b + 1)) + lo
        items = [(self.item_phrase[k], self.xyxy[starts[k - a]:starts[k - a + 1]]
                  if self.item_boxed[k] else None) for k in range(a, b)]
        return ParseResult(items, int(self.malformed[i]), bool(self.ok[i]))


def parse_many(texts, frames, dialect: str, *, _fast: bool = True) -> ParsedOutputs:
    """Parse every output of ``texts`` (``frames[i]``: the image output ``i`` was asked about,
    an :class:`ImageFrame` or its dict; one frame is used for all) in ``dialect``.

    Outputs written exactly as :mod:`.boxes` writes them are read together in a few passes
    (:mod:`.box_fast`); the others one by one, tolerantly. The values are then checked and
    mapped back to source pixels for all boxes at once.
    """
    reader = _READERS[check_dialect(dialect)]
    texts = list(texts)
    n = len(texts)
    if isinstance(frames, (ImageFrame, dict)):
        frames = [ImageFrame.coerce(frames)] * n
    frames = [ImageFrame.coerce(f) for f in frames]
    if len(frames) != n:
        raise RadHarmonyError("parse_many needs one frame per output",
                              expected=f"{n} frames", found=str(len(frames)),
                              fix="pass the image frame of every output (or one for all)")
    malformed, ok = np.zeros(n, np.int64), np.ones(n, bool)
    strict = strict_mask(texts, dialect) if _fast else np.zeros(n, bool)
    fast = np.flatnonzero(strict)
    item_output, phrases, counts, values = read_strict([texts[i] for i in fast], fast, dialect) \
        if len(fast) else ([], [], [], np.zeros((0, 4)))
    parts = [values]
    for i in np.flatnonzero(~strict).tolist():
        text = texts[i]
        items, malformed[i], ok[i] = reader(text if isinstance(text, str) else "")
        for phrase, boxes in items:
            item_output.append(i)
            phrases.append(phrase)
            counts.append(-1 if boxes is None else len(boxes))
            if boxes:
                parts.append(np.asarray(boxes, np.float64).reshape(-1, 4))
    u = np.concatenate(parts) if len(parts) > 1 else values
    item_output = np.asarray(item_output, np.int64)
    counts = np.asarray(counts, np.int64)
    box_item = np.repeat(np.arange(len(counts)), np.maximum(counts, 0))
    order = np.argsort(item_output, kind="stable")  # fast outputs first: back to output order
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    box_item = rank[box_item]
    box_order = np.argsort(box_item, kind="stable")
    box_item, u = box_item[box_order], u[box_order]
    item_output, counts = item_output[order], counts[order]
    phrases = [phrases[k] for k in order.tolist()]
    box_output = item_output[box_item]
    p = _params(frames)
    good = ((u >= 0).all(1) & (u <= unit_limits(p, box_output, dialect)).all(1)
            & (u[:, 0] <= u[:, 2]) & (u[:, 1] <= u[:, 3]))
    malformed += np.bincount(box_output[~good], minlength=n)
    xyxy = from_units(u[good], p, box_output[good], dialect)
    boxed = counts >= 0
    usable = (np.bincount(box_output[good], minlength=n)
              + np.bincount(item_output[~boxed], minlength=n))
    ok &= ~((malformed > 0) & (usable == 0))  # it tried, and nothing could be read
    return ParsedOutputs(item_output, phrases, boxed, box_item[good], xyxy, malformed, ok)


def parse_boxes(text: str, frame, dialect: str) -> ParseResult:
    """The sentences and boxes (source pixels) of one model output; see the module docs.

    >>> r = parse_boxes("Sure: <|ref|>Nodule<|/ref|><|box|>(25, 17),(50,50)<|/box|>.",
    ...                 ImageFrame(400, 300), "chexagent")
    >>> phrase, boxes = r.items[0]
    >>> phrase, boxes.tolist(), r.malformed
    ('Nodule', [[100.0, 51.0, 200.0, 150.0]], 0)

    The 3-D dialects (``box3d``, ``box3d_mm``: :mod:`.boxes3d`) take a volume's frame and
    give ``(k, 6)`` boxes in the source volume's voxels.
    """
    if dialect in ("box3d", "box3d_mm"):
        from .boxes3d import parse_boxes3d

        return parse_boxes3d(text, frame, dialect)
    return parse_many([text], [frame], dialect).result(0)
