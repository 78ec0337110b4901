"""Small readers doing what each 3-D trainer's loader does with an exported file (from the
facts in the formats' notes; no trainer imported): open every volume an entry names, check its
shape and range against the trainer's contract, count the image tokens against the images.
Each returns what it read, for the tests to assert on."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np


def _manifest(dest: Path) -> dict:
    return json.loads((Path(dest).parent / "volumes.json").read_text())


def read_ct_chat(dest: Path, folder: Path) -> list[dict]:
    """CT-CHAT: a JSON list; ``image`` one string joined to the data folder; one ``<image>``
    in the human turn; the volume read with nibabel, in [-1, 1] (CT-CLIP's mapping)."""
    import nibabel as nib

    out = []
    for e in json.loads(Path(dest).read_text()):
        assert isinstance(e["image"], str)
        human, gpt = e["conversations"]
        assert human["from"] == "human" and gpt["from"] == "gpt"
        assert human["value"].count("<image>") == 1 and human["value"].startswith("<image>\n")
        path = Path(folder) / e["image"]
        arr = np.load(path) if path.suffix == ".npy" else \
            np.asarray(nib.load(str(path)).dataobj, np.float32)
        assert -1.0 <= arr.min() and arr.max() <= 1.0
        out.append({"image": e["image"], "shape": arr.shape})
    return out


def read_m3d(dest: Path, folder: Path) -> dict:
    """M3D-LaMed: the caption JSON's ``image`` / ``text`` per split, the VQA CSV's columns, each
    ``.npy`` (1, 32, 256, 256) float32 in [0, 1]; an answer letter names its choice."""
    captions = json.loads(Path(dest).read_text())
    shapes = {}
    for split in captions.values():
        for e in split:
            assert set(e) == {"image", "text"} and e["text"]
            shapes[e["image"]] = _npy(folder, e["image"], (0.0, 1.0))
    with open(Path(dest).with_name(Path(dest).stem + "_vqa.csv"), newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        shapes[r["Image Path"]] = _npy(folder, r["Image Path"], (0.0, 1.0))
        if r["Answer Choice"]:
            assert r[f"Choice {r['Answer Choice']}"] == r["Answer"]
    assert all(s == (1, 32, 256, 256) for s in shapes.values()), shapes
    return {"captions": captions, "vqa": rows, "volumes": len(shapes)}


def read_radfm(dest: Path, folder: Path) -> list[tuple]:
    """RadFM: ``image_dict`` entries with a position in the question; each ``.npy`` (3, 512,
    512, D), D a multiple of 4 in [4, 64]; the text's ``<image>`` tokens = the images."""
    out = []
    for e in json.loads(Path(dest).read_text()):
        images = e["image_dict"]
        assert e["text"].count("<image>") == len(images) == e["text"].count("</image>")
        for im in images:
            assert im["position"]["question"] <= len(e["question"])
            s = _npy(folder, im["image"], (0.0, 1.0))
            assert s[:3] == (3, 512, 512) and s[3] % 4 == 0 and 4 <= s[3] <= 64, s
            out.append(s)
    return out


def read_hf_video(dest: Path, folder: Path) -> list[int]:
    """Qwen2.5-VL through the chat format: one ``{"type": "video"}`` per ``videos`` item, each
    a list of PNG frames that PIL opens, as many as ``num_slices``."""
    from PIL import Image

    counts = []
    for line in Path(dest).read_text().splitlines():
        e = json.loads(line)
        items = e["messages"][0]["content"]
        assert sum(i["type"] == "video" for i in items) == len(e["videos"]) == 1
        frames = e["videos"][0]
        assert len(frames) == e["num_slices"] and len(e["spacing_mm"]) == 3
        with Image.open(Path(folder) / frames[-1]) as im:
            assert im.mode == "L"
        counts.append(len(frames))
    return counts


def _npy(folder: Path, ref: str, bounds) -> tuple:
    arr = np.load(Path(folder) / ref, mmap_mode="r")
    assert arr.dtype == np.float32
    assert bounds[0] - 1e-6 <= float(arr.min()) and float(arr.max()) <= bounds[1] + 1e-6
    return tuple(arr.shape)
