"""Grounded tasks: boxes as text in the spec's dialect (``boxes:``), for the image the record
points at (``images:``), under the spec's readers choice (``readers:``); see
``docs/mixture_grounding.md``.

* ``detect_findings`` -- every finding of an image with its boxes (images with a box).
* ``detect_no_finding`` -- images without a box whose labels say normal (``no_finding`` = 1, or
  every known label 0): the target says nothing is there. Drawn by its own rule, so the spec
  sets the rate of normal images (``detect_no_finding: random:10%``).
* ``grounded_diagnosis`` -- a finding -> its boxes.
* ``phrase_grounding`` -- MS-CXR: a phrase -> its boxes; ``grounded_captioning`` -- a box ->
  its phrase.
* ``anatomical_grounding`` -- Chest ImaGenome: a region -> its box.
* ``locate_foreign_objects`` -- Object-CXR: every foreign object with its box, images without
  one included.
* ``grounded_report`` -- PadChest-GR: every finding sentence of the report in order with its
  boxes, negative sentences with none (MAIRA-2 / RadFact grounded reporting).

``fields`` (what :func:`~radharmony.mixture.grounding_scores.grounding_metrics` reads):
``{"task_kind": "detection" | "phrase", "dialect", "frame": {"width", "height", "mode",
"size"}, "boxes": [{"finding" | "phrase": ..., "box": [x1, y1, x2, y2] (source pixels),
"reader"}]}``; captioning records have ``task_kind: "caption"`` (scored as text).
"""

from __future__ import annotations

import numpy as np

from ..records import fields_json
from .base import Draft, Rendered, Task, register_capability, register_task

#: datasets whose boxes ground phrases / anatomical regions / foreign objects (spec keys)
PHRASE_SETS, OBJECT_PREFIX = ("ms_cxr",), "object_cxr"
#: key prefixes of datasets whose boxes are anatomical regions (named by their labels)
REGION_PREFIX = ("chest_imagenome", "vindr_ribcxr")
NO_FINDING, NO_OBJECT = "No finding.", "No foreign object."

DETECT_PROMPTS = ("Detect every abnormality in this chest X-ray and give its boxes.",
                  "Find and localize all findings in this chest radiograph.",
                  "List each finding of this chest X-ray with its bounding boxes.")
DIAGNOSIS_PROMPTS = ("Where is the {finding} in this chest X-ray?",
                     "Locate {finding} in this chest radiograph.",
                     "Give the bounding boxes of {finding} in this image.")
PHRASE_PROMPTS = ("Locate this finding in the chest X-ray: {phrase}",
                  "Ground the phrase in the image: {phrase}",
                  "Where in this chest radiograph is the following? {phrase}")
CAPTION_PROMPTS = ("Describe the finding in this region of the chest X-ray: {box}",
                   "What is shown in the region {box}?",
                   "Caption the boxed region {box}.")
REGION_PROMPTS = ("Locate the {region} in this chest X-ray.",
                  "Give the bounding box of the {region}.",
                  "Where is the {region} in this chest radiograph?")
OBJECT_PROMPTS = ("Locate every foreign object in this chest X-ray.",
                  "Are there foreign objects in this chest radiograph? Give their boxes.",
                  "Find the foreign objects (tubes, wires, devices, jewellery) in this image.")
REPORT_PROMPTS = ("Write the findings of this chest X-ray, each with its boxes.",
                  "Generate a grounded report for this chest radiograph.",
                  "Report this chest X-ray sentence by sentence, boxing each finding.")


def _key(spec) -> str:
    return str(getattr(spec, "key", ""))


def _boxed(spec) -> bool:
    return spec.row_unit == "image" and "bbox" in spec.outputs


register_capability("boxes", lambda s, kw: _boxed(s) and not _key(s).startswith(REGION_PREFIX),
                    meaning="bounding boxes of findings")
register_capability("phrases", lambda s, kw: _boxed(s) and _key(s) in PHRASE_SETS,
                    meaning="phrases grounded by boxes (MS-CXR)")
register_capability("regions", lambda s, kw: _boxed(s) and _key(s).startswith(REGION_PREFIX),
                    meaning="anatomical regions with boxes (Chest ImaGenome, VinDr-RibCXR ribs)")
register_capability("foreign_objects",
                    lambda s, kw: _boxed(s) and _key(s).startswith(OBJECT_PREFIX),
                    meaning="boxes of foreign objects (Object-CXR)")
register_capability("sentences", lambda s, kw: _boxed(s) and "sentences" in s.columns,
                    meaning="report sentences grounded by boxes (PadChest-GR)")


def _per_image(it):
    """Per image that has items: its unit position and its items' range."""
    if not len(it):
        z = np.zeros(0, np.int64)
        return z, z, z
    new = np.r_[True, it.row[1:] != it.row[:-1]]
    first = np.flatnonzero(new)
    return it.row[first], first, np.r_[first[1:], len(it)]


def _detect(ctx) -> Draft:
    from .grounded_source import fields, items, texts  # pandas: only when a task runs

    it = items(ctx, by="label", boxed=True)
    pos, first, last = _per_image(it)

    def render(j):
        return Rendered(texts(it, first[j], last[j]), {},
                        fields(it, first[j], last[j], task_kind="detection"))

    return _counted(Draft("image", pos, render, skipped=_none_skipped(ctx, pos)), it)


def _counted(draft: Draft, it) -> Draft:
    """``draft`` with the boxes MAIRA-2's crop cuts or leaves out of its items counted."""
    from .grounded_source import crop_counted

    draft.counted = crop_counted(it)
    return draft


def _none_skipped(ctx, pos) -> dict:
    n = len(ctx.units("image")) - len(pos)
    return {"no_box": n} if n else {}


def _frames(ctx, rows: np.ndarray) -> list[dict]:
    """The frame of table rows without boxes (the table's width/height, else the header)."""
    from ..grounding import image_size
    from .grounded_source import options

    t, opt = ctx.table, options(ctx)
    img = opt["images"]
    out = []
    for r in rows.tolist():
        if {"width", "height"} <= set(t.columns):
            w, h = int(t["width"].iat[r]), int(t["height"].iat[r])
        else:
            h, w = image_size(opt["root"], str(t["image_path"].iat[r]))
        out.append({"width": w, "height": h, "mode": img.get("mode", "original"),
                    "size": img.get("size")})
    return out


def _empty(ctx, pos: np.ndarray, words: str, finding: str) -> Rendered:
    """Records of images with nothing to box."""
    from .grounded_source import nothing_text, options

    dialect = options(ctx)["boxes"]
    f = [fields_json({"task_kind": "detection", "dialect": dialect, "frame": fr, "boxes": [],
                      "finding": finding}) for fr in _frames(ctx, pos)]
    return Rendered([nothing_text(dialect, words)] * len(pos), {}, f)


def _normal_rows(ctx) -> np.ndarray:
    """Table rows without a box whose labels say normal."""
    from .grounded_source import items

    ids, values = ctx.findings()
    known = ~np.isnan(values)
    normal = (known.any(axis=1) & (np.where(known, values, 0) == 0).all(axis=1)) \
        if values.shape[1] else np.zeros(len(values), bool)
    if "no_finding" in ids:
        normal |= values[:, ids.index("no_finding")] == 1
    boxed = np.zeros(len(values), bool)
    boxed[items(ctx, by="label", boxed=True).row] = True
    return np.flatnonzero(normal & ~boxed)


def _no_finding(ctx) -> Draft:
    pos = _normal_rows(ctx)
    return Draft("image", pos, lambda j: _empty(ctx, pos[j], NO_FINDING, "no_finding"),
                 skipped={"not_normal": len(ctx.table) - len(pos)}
                 if len(ctx.table) > len(pos) else {})


def _one_item(by: str, kind: str, name: str, slot: str):
    """A task with one record per item: its text in the prompt, its boxes the target."""

    def build(ctx) -> Draft:
        from .grounded_source import fields, items, texts

        it = items(ctx, by=by, boxed=True)
        ids = ctx.units("image").ids

        def render(j):
            return Rendered(texts(it, j, j + 1), {slot: list(it.text[j])},
                            fields(it, j, j + 1, task_kind=kind, name=name))

        return _counted(Draft("image", it.row, render, item=lambda j: [
            f"{ids[r]}|{t}" for r, t in zip(it.row[j], it.text[j])]), it)

    return build


def _caption(ctx) -> Draft:
    from .grounded_source import fields, items, texts

    it = items(ctx, by="text", boxed=True)
    ids = ctx.units("image").ids

    def render(j):
        return Rendered(list(it.text[j]), {"box": texts(it, j, j + 1, phrases=[""] * len(j))},
                        fields(it, j, j + 1, task_kind="caption", name="phrase"))

    return _counted(Draft("image", it.row, render, item=lambda j: [
        f"{ids[r]}|{t}" for r, t in zip(it.row[j], it.text[j])]), it)


def _objects(ctx) -> Draft:
    from .grounded_source import fields, items, texts

    it = items(ctx, by="label", boxed=True)
    pos, first, last = _per_image(it)
    normal = _normal_rows(ctx)
    every = np.r_[pos, normal]
    n = len(pos)

    def render(j):
        targets, out = [None] * len(j), [None] * len(j)
        kb, ke = np.flatnonzero(j < n), np.flatnonzero(j >= n)
        a, b = first[j[kb]], last[j[kb]]
        one = ["Foreign object"] * int((b - a).sum())
        boxed = Rendered(texts(it, a, b, phrases=one), {},
                         fields(it, a, b, task_kind="detection", text="Foreign object"))
        for part, ks in ((boxed, kb), (_empty(ctx, every[j[ke]], NO_OBJECT, "foreign_object"),
                                       ke)):
            for k, x, y in zip(ks.tolist(), part.targets, part.fields):
                targets[k], out[k] = x, y
        return Rendered(targets, {}, out)

    return _counted(Draft("image", every, render), it)


def _report(ctx) -> Draft:
    from .grounded_source import fields, items, texts

    it = items(ctx, by="text")
    pos, first, last = _per_image(it)

    def render(j):
        a, b = first[j], last[j]
        sentences = [{"sentences": list(it.text[x:y])} for x, y in zip(a.tolist(), b.tolist())]
        return Rendered(texts(it, a, b), {},
                        fields(it, a, b, task_kind="detection", extra=sentences))

    return _counted(Draft("image", pos, render, skipped=_none_skipped(ctx, pos)), it)


def _task(name, needs, prompts, build, description, slots=()):
    register_task(Task(name=name, family="grounding", needs=("images",) + needs,
                       prompts=prompts, build=build, slots=slots, description=description))


_task("detect_findings", ("boxes",), DETECT_PROMPTS, _detect,
      "every finding of an image with its boxes, as text in the spec's box dialect")
_task("detect_no_finding", ("boxes", "labels"), DETECT_PROMPTS, _no_finding,
      "a normal image without boxes: the target says no finding (its rule sets the rate)")
_task("grounded_diagnosis", ("boxes",), DIAGNOSIS_PROMPTS,
      _one_item("label", "detection", "finding", "finding"),
      "a finding of an image -> its boxes", slots=("finding",))
_task("phrase_grounding", ("phrases",), PHRASE_PROMPTS,
      _one_item("text", "phrase", "phrase", "phrase"),
      "an MS-CXR phrase -> its boxes", slots=("phrase",))
_task("grounded_captioning", ("phrases",), CAPTION_PROMPTS, _caption,
      "a box (as text) -> the MS-CXR phrase it grounds", slots=("box",))
_task("anatomical_grounding", ("regions",), REGION_PROMPTS,
      _one_item("text", "phrase", "phrase", "region"),
      "a Chest ImaGenome anatomical region -> its box", slots=("region",))
_task("locate_foreign_objects", ("foreign_objects",), OBJECT_PROMPTS, _objects,
      "every foreign object with its box; images without one say so")
_task("grounded_report", ("sentences",), REPORT_PROMPTS, _report,
      "every finding sentence of a PadChest-GR report with its boxes, negatives with none")

__all__ = ["NO_FINDING", "NO_OBJECT"]
