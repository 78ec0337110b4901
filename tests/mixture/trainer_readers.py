"""Small readers that do what each trainer's own loader does with an exported file
(/work/shared/formats/vlm_training.md §2), written from those descriptions, not copied: a file
these accept is one the trainer reads. Each returns what its loader would train on and
raises where that loader would fail."""

from __future__ import annotations

import json
import os
import re

from formats_readers import read_llava15, read_llava_onevision
from formats_readers import read_llava_rad as _read_llava_rad

IMAGE = "<image>"


def _turns(entry: dict) -> list[dict]:
    conv = entry["conversations"]
    assert conv and conv[0]["from"] == "human", entry["id"]
    for a, b in zip(conv, conv[1:]):
        assert a["from"] != b["from"], f"{entry['id']}: turns do not alternate"
    return conv


def read_llava(path, image_folder) -> list[tuple[dict, str | None]]:
    """LLaVA-1.5 (LazySupervisedDataset): :func:`formats_readers.read_llava15` (the reader the
    single-dataset exports are held to: a JSON list, ``os.path.join(image_folder,
    entry["image"])`` opened, a list raising TypeError, one ``<image>`` per entry), and the
    token opens the first human turn as the trainer's preprocessing places it."""
    out = []
    for entry in read_llava15(path, image_folder):
        conv = _turns(entry)
        if "image" in entry:
            assert conv[0]["value"].startswith(IMAGE + "\n"), entry["id"]
        out.append((entry, os.path.join(image_folder, entry["image"]) if "image" in entry
                    else None))
    return out


def read_onevision(path, image_folder) -> list[tuple[dict, list[str]]]:
    """LLaVA-OneVision: :func:`formats_readers.read_llava_onevision` (``image`` a string or a
    list, each opened; the ``<image>`` tokens of the human turns number the images)."""
    out = []
    for entry in read_llava_onevision(path, image_folder):
        _turns(entry)
        images = entry.get("image", [])
        images = [images] if isinstance(images, str) else images
        out.append((entry, [os.path.join(image_folder, f) for f in images]))
    return out


def read_llava_rad(path, image_folder) -> list[tuple[dict, str]]:
    """LLaVA-Rad's MIMIC test loader: :func:`formats_readers.read_llava_rad` with
    ``test=True`` (AP/PA views, rule-based entries, ``KeyError`` without the keys, empty
    findings skipped), and its 14 CheXpert labels each 1, 0, -1 or null."""
    kept = []
    for entry in _read_llava_rad(path, image_folder, test=True):
        labels = entry["chexpert_labels"]
        assert len(labels) == 14 and all(v in (1, 0, -1, None) for v in labels.values())
        kept.append((entry, os.path.join(image_folder, entry["image"])))
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


def read_r2gen(path, image_dir, variant: str = "iu") -> dict[str, list[tuple[dict, list[str]]]]:
    """R2Gen: a dict of the three splits; each entry's ``image_path`` a list joined to
    ``--image_dir``; ``report`` text. Its loaders read the images by position: the IU X-ray
    one ``image_path[0]`` and ``image_path[1]`` (``IndexError`` on one image), the MIMIC-CXR
    one ``image_path[0]``; only those are returned."""
    ann = json.loads(open(path, encoding="utf-8").read())
    assert set(ann) == {"train", "val", "test"}
    read = {"iu": lambda p: [p[0], p[1]], "mimic": lambda p: [p[0]]}[variant]
    out = {}
    for split, entries in ann.items():
        out[split] = []
        for e in entries:
            assert isinstance(e["image_path"], list) and isinstance(e["report"], str)
            assert e["split"] == split
            out[split].append((e, [os.path.join(image_dir, p) for p in read(e["image_path"])]))
    return out


MAIRA2_INPUTS = ("frontal", "lateral", "prior_frontal", "prior_report", "indication",
                 "technique", "comparison")


MAIRA2_TASKS = ("findings_generation", "grounded_reporting", "phrase_grounding")


def read_maira2(path) -> list[dict]:
    """MAIRA-2's inputs: the seven keys present (null where absent), ``absent`` naming the
    null ones, the task one of the processor's three inputs (a phrase to ground for phrase
    grounding); a grounded target is a sequence of ``<obj>...</obj>`` with whole
    ``<x><y><x><y>`` boxes of bins 0..99, as its processor splits it."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            missing = [k for k in (*MAIRA2_INPUTS, "task", "phrase") if k not in row]
            if missing:
                raise KeyError(missing)
            assert row["absent"] == [k for k in MAIRA2_INPUTS if row[k] is None]
            assert isinstance(row["frontal"], str) and row["task"] in MAIRA2_TASKS
            assert (row["phrase"] is not None) == (row["task"] == "phrase_grounding")
            if row["task"] != "findings_generation":
                body = re.sub(r"<obj>[^<]*(?:<box>(?:<x\d\d?><y\d\d?>){2}</box>)*</obj>", "",
                              row["target"])
                if body:
                    raise ValueError(f"{row['id']}: not MAIRA-2's grounded text: {body!r}")
            out.append(row)
    return out


def read_llama_factory(dataset_dir, name: str) -> list[tuple[dict, list[str]]]:
    """LLaMA-Factory: the ``dataset_info.json`` entry ``name`` in ``dataset_dir`` (sharegpt,
    the messages / images columns, the role tags), its file loaded; per record the roles
    alternate from the user tag, ``images`` is a list, the ``<image>`` count over *all*
    messages equals ``len(images)`` (its mm_plugin's check), and each image, joined to the
    dataset folder when relative, is a file."""
    info = json.loads(open(os.path.join(dataset_dir, "dataset_info.json")).read())[name]
    assert info["formatting"] == "sharegpt"
    cols, tags = info["columns"], info["tags"]
    rows = json.loads(open(os.path.join(dataset_dir, info["file_name"])).read())
    out = []
    for row in rows:
        messages, images = row[cols["messages"]], row.get(cols["images"]) or []
        if not isinstance(images, list):
            raise TypeError(f"{row.get('id')}: images must be a list")
        roles = [m[tags["role_tag"]] for m in messages]
        assert roles == [tags["user_tag"], tags["assistant_tag"]] * (len(roles) // 2), roles
        n = sum(m[tags["content_tag"]].count(IMAGE) for m in messages)
        if n != len(images):
            raise ValueError(f"{row.get('id')}: the number of images does not match the "
                             f"number of {IMAGE} tokens ({len(images)} vs {n})")
        files = [f if os.path.isabs(f) else os.path.join(dataset_dir, f) for f in images]
        for f in files:
            if not os.path.isfile(f):
                raise FileNotFoundError(f)
        out.append((row, files))
    return out


def read_ms_swift(path, image_dir=None) -> list[tuple[dict, list[tuple[str, list]]]]:
    """ms-swift: JSON lines of ``messages`` / ``images`` / ``objects``; as its template's
    preprocessing does, ``<image>`` count == ``len(images)``, each ``<ref-object>`` takes the
    next ``objects["ref"]`` and each ``<bbox>`` the next ``objects["bbox"]`` (the counts must
    agree); ``real`` boxes are pixels within their image (read for its size). Returns each
    row with its ``(ref, bbox)`` pairs in order."""
    import cv2

    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            text = "".join(m["content"] for m in row["messages"])
            images = row.get("images") or []
            if text.count(IMAGE) != len(images):
                raise ValueError(f"{row['id']}: {text.count(IMAGE)} {IMAGE} for {len(images)}")
            obj = row.get("objects") or {"ref": [], "bbox": []}
            if text.count("<ref-object>") != len(obj["ref"]) or \
                    text.count("<bbox>") != len(obj["bbox"]):
                raise ValueError(f"{row['id']}: placeholders and objects disagree")
            if obj["bbox"]:
                assert obj["bbox_type"] == "real" and len(images) == 1
                f = images[0] if image_dir is None else os.path.join(image_dir, images[0])
                h, w = cv2.imread(f, cv2.IMREAD_UNCHANGED).shape[:2]
                for x1, y1, x2, y2 in obj["bbox"]:
                    assert 0 <= x1 <= x2 <= w and 0 <= y1 <= y2 <= h, (row["id"], w, h)
            out.append((row, list(zip(obj["ref"], obj["bbox"]))))
    return out


def read_internvl(meta_path) -> list[tuple[dict, list[str]]]:
    """InternVL: the meta JSON's one dataset (``root``, an ``annotation`` ending in
    ``.jsonl``, ``repeat_time``, ``length`` = its lines); per line, one ``<image>`` in the
    human turn per image (``image`` a string with ``width`` / ``height``, or a list with
    ``width_list`` / ``height_list``), each image under ``root`` a file of that size, and
    every ``<box>`` a list of four integers 0..1000 after a ``<ref>`` or alone."""
    import cv2

    meta = json.loads(open(meta_path).read())
    (info,) = meta.values()
    assert info["annotation"].endswith(".jsonl") and info["repeat_time"] == 1
    lines = [json.loads(x) for x in open(info["annotation"], encoding="utf-8")]
    assert info["length"] == len(lines)
    out = []
    for row in lines:
        conv = row["conversations"]
        assert [c["from"] for c in conv] == ["human", "gpt"]
        image = row.get("image")
        images = [] if image is None else [image] if isinstance(image, str) else image
        sizes = ([(row["width"], row["height"])] if isinstance(image, str) else
                 list(zip(row.get("width_list", []), row.get("height_list", []))))
        assert conv[0]["value"].count(IMAGE) == len(images) == len(sizes), row["id"]
        files = [os.path.join(info["root"], f) for f in images]
        for f, (w, h) in zip(files, sizes):
            assert cv2.imread(f, cv2.IMREAD_UNCHANGED).shape[:2] == (h, w), f
        for box in re.findall(r"<box>(.*?)</box>", conv[1]["value"]):
            vals = json.loads(box)
            assert all(len(b) == 4 and all(isinstance(v, int) and 0 <= v <= 1000 for v in b)
                       for b in vals), box
        out.append((row, files))
    return out


def read_energon(metadataset) -> dict[str, list[tuple[float, list[dict]]]]:
    """Megatron-Energon's metadataset: ``MetadatasetV2`` of module ``megatron.energon``, each
    split a ``blend`` of ``{weight, path}`` (a positive weight; the path relative to the YAML,
    as Energon resolves it) naming a JSON lines dataset, read here as the chat lines they
    hold (:func:`read_hf_chat`). Returns per split its ``(weight, rows)`` datasets."""
    import yaml

    meta = yaml.safe_load(open(metadataset, encoding="utf-8"))
    assert meta["__module__"] == "megatron.energon" and meta["__class__"] == "MetadatasetV2"
    base = os.path.dirname(os.path.abspath(metadataset))
    out = {}
    for split, spec in meta["splits"].items():
        assert split in ("train", "val", "test") and set(spec) == {"blend"}
        out[split] = []
        for part in spec["blend"]:
            assert set(part) == {"weight", "path"} and part["weight"] > 0
            assert not os.path.isabs(part["path"]) and part["path"].endswith(".jsonl")
            out[split].append((part["weight"], read_hf_chat(os.path.join(base, part["path"]))))
    return out
