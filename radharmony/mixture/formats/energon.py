"""Megatron-Energon: a metadataset YAML (``MetadatasetV2``) whose ``splits`` blend one JSON lines
dataset per (source, task) of the mixture, weighted by the records the spec drew for it.

``dest`` is the metadataset (``metadataset.yaml``); beside it ``<split>/<source>.<task>.jsonl``
hold the records (the Hugging Face chat entries of :mod:`.hf_chat`: ``id``, ``messages``,
``images``, the media referenced from the image folder or absolute), one file per group, and
the YAML's ``train`` (the mixture's ``train``) and ``val`` (its ``valid``) are ``blend:``
lists of ``{weight, path}`` with ``path`` relative to the YAML, as Energon resolves it. A
weight is the group's record count in that split: Energon then draws the groups in the
proportions the spec's rates gave the build (a rule ``x2`` doubles a group's weight). Energon
reads JSON lines as crude data through an index: run ``energon prepare`` on each file (the
summary lists them) and give the loader a cooker that turns a line into your sample.
"""

from __future__ import annotations

import re
from pathlib import Path

from .common import Export, Output
from .hf_chat import COLUMNS as CHAT_COLUMNS
from .hf_chat import entry as chat_entry

COLUMNS = [*CHAT_COLUMNS, "task"]
#: the mixture's split -> Energon's
SPLITS = {"train": "train", "valid": "val"}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")

__all__ = ["COLUMNS", "SPLITS", "write"]


def _name(source: str, task: str) -> str:
    return _UNSAFE.sub("_", f"{source}.{task}") + ".jsonl"


def write(batches, dest: Path, ex: Export) -> dict:
    """Write the group files and the metadataset; returns ``{split: {relative path: n}}``."""
    import yaml

    parts: dict = {}
    try:
        for recs in batches:
            for rec in recs:
                entry = chat_entry(ex.reframed(rec), ex)
                if entry is None:
                    continue
                split = SPLITS[rec["split"]]
                key = (split, _name(rec["source"], rec["task"]))
                if key not in parts:
                    parts[key] = Output(dest.parent / split / key[1], lines=True)
                parts[key].write(entry)
            ex.flush()
    except BaseException:
        for part in parts.values():
            part.abort()
        raise
    groups: dict = {}
    for (split, name), part in sorted(parts.items()):
        part.close()
        groups.setdefault(split, {})[f"{split}/{name}"] = part.count
    meta = {"__module__": "megatron.energon", "__class__": "MetadatasetV2",
            "splits": {split: {"blend": [{"weight": n, "path": f"./{path}"}
                                         for path, n in files.items()]}
                       for split, files in groups.items()}}
    text = yaml.safe_dump(meta, sort_keys=False, default_flow_style=False)
    out = Output(dest, lines=True)
    out.fh.write(text.encode())
    out.close()
    return groups
