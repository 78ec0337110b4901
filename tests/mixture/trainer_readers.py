"""Small readers that do what each trainer's own loader does with an exported file
(/work/shared/formats/vlm_training.md §2), written from those descriptions, not copied: a file
these accept is one the trainer reads. Each returns what its loader would train on and
raises where that loader would fail."""

from __future__ import annotations

import json
import os

IMAGE = "<image>"


def _turns(entry: dict) -> list[dict]:
    conv = entry["conversations"]
    assert conv and conv[0]["from"] == "human", entry["id"]
    for a, b in zip(conv, conv[1:]):
        assert a["from"] != b["from"], f"{entry['id']}: turns do not alternate"
    return conv


def read_llava(path, image_folder) -> list[tuple[dict, str | None]]:
    """LLaVA-1.5 (LazySupervisedDataset): a JSON list; ``os.path.join(image_folder,
    entry["image"])`` (a list raises TypeError there); one image per entry, its token in the
    first human turn (the preprocessing collapses every ``<image>`` into one)."""
    data = json.loads(open(path, encoding="utf-8").read())
    assert isinstance(data, list)
    out = []
    for entry in data:
        conv = _turns(entry)
        human = " ".join(t["value"] for t in conv if t["from"] == "human")
        if "image" in entry:
            file = os.path.join(image_folder, entry["image"])  # TypeError for a list
            assert human.count(IMAGE) == 1 and conv[0]["value"].startswith(IMAGE + "\n")
        else:
            file = None
            assert IMAGE not in human, f"{entry['id']}: a token without an image"
        out.append((entry, file))
    return out


def read_onevision(path, image_folder) -> list[tuple[dict, list[str]]]:
    """LLaVA-OneVision: ``image`` a string or a list; the ``<image>`` tokens of the human
    turns number the images."""
    out = []
    for entry in json.loads(open(path, encoding="utf-8").read()):
        conv = _turns(entry)
        images = entry.get("image", [])
        images = [images] if isinstance(images, str) else images
        tokens = sum(t["value"].count(IMAGE) for t in conv if t["from"] == "human")
        if tokens != len(images):
            raise ValueError(f"{entry['id']}: {tokens} image tokens for {len(images)} images")
        out.append((entry, [os.path.join(image_folder, f) for f in images]))
    return out


def read_llava_rad(path, image_folder) -> list[tuple[dict, str]]:
    """LLaVA-Rad's MIMIC loader: entries whose ``view`` is AP or PA (KeyError without the
    key), the indication-conditioned prompt from ``reason``, rule-based entries only, and an
    entry whose assistant value is not a string skipped as empty findings."""
    kept = []
    for entry, file in read_llava(path, image_folder):
        if entry["view"] not in ("AP", "PA") or entry["generate_method"] != "rule-based":
            continue
        reason = entry["reason"]
        assert reason is None or isinstance(reason, str)
        if not isinstance(entry["conversations"][1]["value"], str):
            continue
        labels = entry["chexpert_labels"]
        assert len(labels) == 14 and all(v in (1, 0, -1, None) for v in labels.values())
        kept.append((entry, file))
    return kept


def read_hf_chat(path) -> list[dict]:
    """The Hugging Face chat format: one JSON object a line; roles alternate from the user;
    as many ``{"type": "image"}`` items as ``images``."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            roles = [m["role"] for m in row["messages"]]
            assert roles == ["user", "assistant"] * (len(roles) // 2), roles
            items = [c for m in row["messages"] for c in m["content"] if c["type"] == "image"]
            if len(items) != len(row["images"]):
                raise ValueError(f"{len(items)} image items for {len(row['images'])} images")
            for m in row["messages"]:
                assert all(isinstance(c["text"], str) for c in m["content"]
                           if c["type"] == "text")
            out.append(row)
    return out


def read_r2gen(path, image_dir) -> dict[str, list[tuple[dict, list[str]]]]:
    """R2Gen: a dict of the three splits; each entry's ``image_path`` a list joined to
    ``--image_dir``; ``report`` text."""
    ann = json.loads(open(path, encoding="utf-8").read())
    assert set(ann) == {"train", "val", "test"}
    out = {}
    for split, entries in ann.items():
        out[split] = []
        for e in entries:
            assert isinstance(e["image_path"], list) and isinstance(e["report"], str)
            assert e["split"] == split
            out[split].append((e, [os.path.join(image_dir, p) for p in e["image_path"]]))
    return out


MAIRA2_INPUTS = ("frontal", "lateral", "prior_frontal", "prior_report", "indication",
                 "technique", "comparison")


def read_maira2(path) -> list[dict]:
    """MAIRA-2's inputs: the seven keys present (null where absent), ``absent`` naming the
    null ones."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            missing = [k for k in MAIRA2_INPUTS if k not in row]
            if missing:
                raise KeyError(missing)
            assert row["absent"] == [k for k in MAIRA2_INPUTS if row[k] is None]
            assert isinstance(row["frontal"], str)
            out.append(row)
    return out
