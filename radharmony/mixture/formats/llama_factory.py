"""LLaMA-Factory's ShareGPT-style multimodal data: a JSON list of ``{"id", "messages":
[{"role": "user", "content": "<image>...<image>" + prompt}, {"role": "assistant", "content":
target}], "images": [...]}`` and, beside it, the ``dataset_info.json`` entry that names the
file (``formatting: sharegpt``, the ``messages`` / ``images`` columns and the role tags).

Its loader counts ``<image>`` in **all** messages, the assistant's included, and requires the
count to equal ``len(images)`` (a list: a string would be counted by characters), so the
user turn holds one ``<image>`` per image (the record's, then the prior study's:
:func:`~radharmony.mixture.formats.inputs.every_image`) and a record whose own text holds a
literal ``<image>`` is left out (``"<image> in the record's text"``). Relative image paths
are joined to the dataset folder (the file's folder), so they are written relative to it.
An existing ``dataset_info.json`` keeps its other datasets; this one is named after the
mixture.
"""

from __future__ import annotations

import json

from ...files import atomic_write
from .common import Export
from .inputs import every_image, token_free
from .llava import COLUMNS, has_target

INFO = "dataset_info.json"
TOKEN = "<image>"
TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user",
        "assistant_tag": "assistant"}

__all__ = ["COLUMNS", "INFO", "entry", "finish"]


def entry(rec: dict, ex: Export) -> dict | None:
    if not has_target(rec, ex) or not token_free(rec, ex, TOKEN):
        return None
    refs, words = every_image(rec, ex)
    return {"id": rec["record_id"],
            "messages": [{"role": "user", "content": TOKEN * len(refs) + words + rec["prompt"]},
                         {"role": "assistant", "content": rec["target"]}],
            "images": [ex.beside_dest(r) for r in refs]}


def finish(ex: Export, summary: dict) -> None:
    """Write (or update) ``dataset_info.json`` beside the data file."""
    path = ex.dest.parent / INFO
    try:
        info = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except ValueError:
        info = {}
    name = str(ex.manifest.get("name") or ex.dest.stem)
    info[name] = {"file_name": ex.dest.name, "formatting": "sharegpt",
                  "columns": {"messages": "messages", "images": "images"}, "tags": TAGS}
    data = (json.dumps(info, indent=2, ensure_ascii=False) + "\n").encode()
    atomic_write(path, lambda fh: fh.write(data))
    summary["dataset_info"] = {"path": str(path), "name": name}

