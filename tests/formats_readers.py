"""Small readers that do what each trainer's loader does with a LLaVA-style JSON
(``/work/shared/formats/vlm_training.md`` §2), written here from that description (no trainer
code): each returns the entries the trainer would train on, or raises as the trainer would.

* :func:`read_llava15` -- LLaVA-1.5's ``LazySupervisedDataset``: ``image`` joined to the image
  folder with ``os.path.join`` (a list raises ``TypeError``), opened and converted to RGB; its
  preprocessing collapses every ``<image>`` into one, so an entry with an image must carry
  exactly one (we refuse what it would silently collapse);
* :func:`read_llava_onevision` -- LLaVA-NeXT / OneVision: ``image`` a string or a list, each
  opened; the ``<image>`` tokens of the human turns must number the images;
* :func:`read_llava_rad` -- LLaVA-Rad: the LLaVA-1.5 entry plus ``entry["view"]``,
  ``entry["reason"]`` and ``entry["generate_method"]`` read by key (``KeyError`` without
  them); its MIMIC loaders keep ``view in ("AP", "PA")``, its test loader ``generate_method ==
  "rule-based"``, and an entry whose assistant value is not a string is skipped ("empty
  findings").

The mixture exports reuse them (``from formats_readers import read_llava15``).
"""

from __future__ import annotations

import json
import os

from PIL import Image

IMAGE_TOKEN = "<image>"


def _entries(path) -> list[dict]:
    with open(path) as fh:
        data = json.load(fh)
    if not isinstance(data, list):
        raise TypeError(f"{path}: a LLaVA file is a JSON list, found {type(data).__name__}")
    return data


def _open(image_folder, image_file) -> None:
    full = os.path.join(image_folder, image_file)  # TypeError for a list, as the trainer
    with Image.open(full) as im:
        im.convert("RGB")


def _turns(entry: dict) -> list[dict]:
    turns = entry["conversations"]
    if not turns or turns[0]["from"] != "human":
        raise ValueError(f"entry {entry.get('id')}: the conversation must start with a human "
                         "turn")
    for k, turn in enumerate(turns):
        if turn["from"] != ("human", "gpt")[k % 2]:
            raise ValueError(f"entry {entry.get('id')}: turns must alternate human/gpt")
        if turn["from"] == "human" and not isinstance(turn["value"], str):
            raise TypeError(f"entry {entry.get('id')}: a human value must be text")
    return turns


def _tokens(entry: dict) -> int:
    return sum(t["value"].count(IMAGE_TOKEN) for t in _turns(entry) if t["from"] == "human")


def read_llava15(path, image_folder) -> list[dict]:
    """LLaVA-1.5's loader over the JSON at ``path``: every entry, or the trainer's error."""
    out = []
    for entry in _entries(path):
        n = _tokens(entry)
        if "image" in entry:
            _open(image_folder, entry["image"])
            if n != 1:
                raise ValueError(f"entry {entry.get('id')}: {n} {IMAGE_TOKEN} tokens for one "
                                 "image (LLaVA-1.5 collapses them into one)")
        elif n:
            raise ValueError(f"entry {entry.get('id')}: {IMAGE_TOKEN} without an image")
        out.append(entry)
    return out


def read_llava_onevision(path, image_folder) -> list[dict]:
    """LLaVA-NeXT / OneVision's loader: ``image`` a string or a list, one token per image."""
    out = []
    for entry in _entries(path):
        image = entry.get("image")
        files = [] if image is None else [image] if isinstance(image, str) else image
        if not isinstance(files, list):
            raise TypeError(f"entry {entry.get('id')}: image must be a string or a list")
        for f in files:
            _open(image_folder, f)
        if _tokens(entry) != len(files):
            raise ValueError(f"entry {entry.get('id')}: {_tokens(entry)} {IMAGE_TOKEN} tokens "
                             f"for {len(files)} images")
        out.append(entry)
    return out


def read_llava_rad(path, image_folder, *, test: bool = False) -> list[dict]:
    """LLaVA-Rad's MIMIC loader (``test=True``: its test loader, rule-based entries only):
    the entries it keeps."""
    out = []
    for entry in read_llava15(path, image_folder):
        view, reason, method = entry["view"], entry["reason"], entry["generate_method"]
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"entry {entry.get('id')}: reason must be text or null")
        if view not in ("AP", "PA") or (test and method != "rule-based"):
            continue
        if not isinstance(entry["conversations"][1]["value"], str):
            continue  # "empty findings"
        out.append(entry)
    return out


__all__ = ["read_llava15", "read_llava_onevision", "read_llava_rad"]
