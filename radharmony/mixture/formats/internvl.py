"""InternVL's fine-tuning data: a JSON lines annotation file (its name must end in
``.jsonl``) and, beside it, the meta JSON that names it (``<stem>_meta.json``:
``{"<mixture>": {"root", "annotation", "data_augment", "repeat_time", "length"}}``).

A line is ``{"id", "image", "width", "height", "conversations": [{"from": "human", "value":
"<image>\\n" + prompt}, {"from": "gpt", "value": target}]}``; with several images (the
record's, then the prior study's) ``image`` is a list with ``width_list`` / ``height_list``
and the human turn names them ``Image-1: <image>\\n...``; a text-only record has no
``image``. ``width`` / ``height`` are those of the image as named (the original file's, from
its header, or the cached square's). Image paths are relative to the meta's ``root`` (the
export's image folder), or absolute.

Boxes are InternVL's own (``boxes:`` dialect ``internvl``): ``<ref>phrase</ref><box>[[x1, y1,
x2, y2]]</box>``, integers 0..1000 of the width and height of the named image, written from
the record's boxes whatever the build's dialect (:func:`radharmony.mixture.reframe.convert`).
A captioning record (its box in the prompt) is left out (``"box in the prompt"``), and so is
a record whose own text holds ``<image>``. The meta's ``repeat_time`` is 1: InternVL keeps the
*first* fraction of the lines for a value under 1, so shuffle before lowering it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...export.codec import ExportError
from ...files import atomic_write
from .common import Export
from .inputs import every_image, fields, token_free
from .llava import COLUMNS as LLAVA_COLUMNS
from .llava import conversation, has_target
from .ms_swift import BOX_IN_PROMPT

COLUMNS = [*LLAVA_COLUMNS, "fields"]
#: InternVL's own box dialect: the export writes grounded targets in it
DIALECT = "internvl"
TOKEN = "<image>"

__all__ = ["COLUMNS", "DIALECT", "check_dest", "entry", "finish"]


def check_dest(dest: Path) -> None:
    if dest.suffix != ".jsonl":
        raise ExportError(f"InternVL's annotation file must end in .jsonl, not {dest.name}",
                          expected="e.g. train.jsonl (its loader reads JSON lines by suffix)",
                          found=dest.name, fix=f"write to {dest.with_suffix('.jsonl').name}")


def entry(rec: dict, ex: Export) -> dict | None:
    if not has_target(rec, ex) or not token_free(rec, ex, TOKEN):
        return None
    if '"caption"' in (rec.get("fields") or "") and fields(rec).get("task_kind") == "caption":
        ex.skip(BOX_IN_PROMPT)
        return None
    refs, words = every_image(rec, ex)
    paths = list(rec["image_paths"] or [])
    if len(refs) > len(paths):  # then the prior study's
        paths += fields(rec)["prior_image_paths"]
    sizes = [ex.image_size(rec["source"], p) for p in paths]
    out = {"id": rec["record_id"]}
    if len(refs) == 1:
        out.update(image=refs[0], width=sizes[0][0], height=sizes[0][1])
        head = TOKEN + "\n"
    elif refs:
        out.update(image=refs, width_list=[w for w, _ in sizes],
                   height_list=[h for _, h in sizes])
        head = "".join(f"Image-{k}: {TOKEN}\n" for k in range(1, len(refs) + 1))
    else:
        head = ""
    out["conversations"] = conversation(head + words + rec["prompt"], rec["target"])
    return out


def finish(ex: Export, summary: dict) -> None:
    """Write the meta JSON beside the annotation file."""
    path = ex.dest.with_name(f"{ex.dest.stem}_meta.json")
    name = str(ex.manifest.get("name") or ex.dest.stem)
    meta = {name: {"root": "" if ex.folder is None else str(ex.folder),
                   "annotation": str(ex.dest.resolve()), "data_augment": False,
                   "repeat_time": 1, "length": summary["entries"]}}
    data = (json.dumps(meta, indent=2, ensure_ascii=False) + "\n").encode()
    atomic_write(path, lambda fh: fh.write(data))
    summary["meta"] = {"path": str(path), "name": name}
