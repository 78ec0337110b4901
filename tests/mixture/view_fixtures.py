"""Small mixtures written by hand, as ``radharmony mix build`` lays them out (records.py's
``RECORD_SCHEMA`` in several row groups, and ``mixture.json``), over fake replicas of two
datasets, for the mixture viewer's and plot's tests.

Five tasks, one per kind the viewer must show: a report task, classification as text, VQA, a
grounded task whose target holds its box as plain pixel JSON (the ``pixels`` dialect), and a
temporal task whose ``fields`` carry the prior study's inputs.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from radharmony.fake import make_fake, synthetic_cxr, write_png
from radharmony.mixture.boxes import ImageFrame, box_to_text
from radharmony.mixture.records import (MANIFEST_FORMAT, RECORD_SCHEMA, fields_json,
                                        record_id)

#: the grounded record's image: 320 wide, 200 high (so a forgotten letterbox shows)
WIDE = (200, 320)
#: its box in source pixels
BOX = [200.0, 40.0, 280.0, 120.0]
EXCLUDED = [{"source": "nih", "task": "phrase_grounding", "reason": "no box", "records": 3},
            {"source": "rexgradient", "task": "vqa_open", "reason": "held out patient",
             "records": 2},
            {"source": "nih", "task": "report_generation", "reason": "empty target",
             "records": 1}]


def make_sources(folder: Path) -> dict:
    """Fake NIH and ReXGradient replicas under ``folder`` (plus the wide image in NIH's root):
    ``{source name: {"dataset", "root", "images"}}``."""
    nih = Path(make_fake("nih_cxr14", folder / "nih")["base_image_dir"])
    rex = Path(make_fake("rexgradient_train", folder / "rex")["base_image_dir"])
    write_png(nih / "wide" / "grounded.png",
              synthetic_cxr(*WIDE, rng=np.random.default_rng(3), bits=8))
    return {"nih": {"dataset": "nih_cxr14", "root": str(nih.resolve()),
                    "images": sorted(str(p.relative_to(nih)) for p in nih.rglob("0*.png"))},
            "rexgradient": {"dataset": "rexgradient_train", "root": str(rex.resolve()),
                            "images": sorted(str(p.relative_to(rex))
                                             for p in rex.rglob("*.png"))}}


def _record(source, dataset, task, family, item, *, split, images, prompt, target,
            fields=None, study=None):
    return {"record_id": record_id(source, task, item), "task": task, "family": family,
            "source": source, "dataset": dataset, "source_split": "train", "split": split,
            "patient_id": f"{source}:p-{item}", "study_id": study or f"s-{item}",
            "sample_id": f"{dataset}:{item}", "image_paths": images,
            "views": ["PA"] * len(images), "prompt": prompt, "target": target,
            "prompt_variant": 0, "fields": fields_json(fields or {})}


def grounded_target(mode: str, size: int, dialect: str = "pixels") -> str:
    """The grounded record's target: ``BOX`` as ``dialect`` text for the image the record
    points at (the original, or the cached letterboxed ``size`` square)."""
    h, w = WIDE
    frame = ImageFrame(w, h, mode=mode, size=size if mode == "cache" else None)
    return box_to_text("nodule", [BOX], frame, dialect)


def make_records(sources: dict, *, mode: str = "original", size: int = 224,
                 dialect: str = "pixels") -> list[dict]:
    """The records: 4 report, 3 classification, 3 VQA, 1 grounded, 2 temporal, in an order
    that mixes tasks across row groups."""
    nih, rex = sources["nih"], sources["rexgradient"]
    recs = []
    for i in range(4):
        recs.append(_record("nih", nih["dataset"], "report_generation", "reports", f"r{i}",
                            split="valid" if i == 3 else "train", images=[nih["images"][i]],
                            prompt="Describe the findings of the chest X-ray.",
                            target="FINDINGS: " + " ".join(["clear"] * (5 + 10 * i)) + "."))
        if i < 3:
            recs.append(_record("nih", nih["dataset"], "finding_labels", "labels", f"c{i}",
                                split="train", images=[nih["images"][4 + i]],
                                prompt="Which findings are present?",
                                target="Effusion, Nodule" if i else "No Finding",
                                fields={"labels": ["Effusion", "Nodule"] if i else []}))
            recs.append(_record("rexgradient", rex["dataset"], "vqa_open", "vqa", f"q{i}",
                                split="train", images=[rex["images"][i]],
                                prompt="Is there a pleural effusion?",
                                target="yes" if i % 2 else "no",
                                fields={"answer": "yes" if i % 2 else "no"}))
    recs.insert(5, _record("nih", nih["dataset"], "phrase_grounding", "grounding", "g0",
                           split="train", images=["wide/grounded.png"],
                           prompt="Where is the nodule?", target=grounded_target(mode, size, dialect),
                           fields={"boxes": [{"phrase": "nodule", "box": BOX}]}))
    for i in range(2):
        recs.append(_record(
            "rexgradient", rex["dataset"], "progression", "temporal", f"t{i}",
            split="train", images=[rex["images"][10 + i]], study=f"study-now-{i}",
            prompt="Compared with the prior study, is the effusion better, same or worse?",
            target="worsening", fields={
                "prior_study_id": f"study-before-{i}",
                "prior_image_paths": [rex["images"][20 + i], rex["images"][30 + i]],
                "prior_report": "FINDINGS: small left effusion.", "days": 30 + i}))
    return recs


def write_mixture(out: Path, sources: dict, records: list[dict], *, row_group_size: int = 4,
                  images: dict | None = None, boxes: str = "pixels",
                  excluded: list[dict] | None = None) -> Path:
    """``out/records.parquet`` (row groups of ``row_group_size``) and ``out/mixture.json``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(records, schema=RECORD_SCHEMA)
    pq.write_table(table, out / "records.parquet", row_group_size=row_group_size)
    counts = Counter((r["source"], r["task"], r["split"]) for r in records)
    manifest = {
        "format": MANIFEST_FORMAT, "radharmony_version": "test", "name": "view-test",
        "seed": 0, "spec": {}, "images": images or {"mode": "original"}, "boxes": boxes,
        "sources": [{"name": name, "dataset": s["dataset"], "root": s["root"],
                     "split": "train", "kwargs": {}, "inputs": {}}
                    for name, s in sources.items()],
        "hold_out": {}, "counts": [{"source": s, "task": t, "split": sp, "records": n}
                                   for (s, t, sp), n in sorted(counts.items())],
        "excluded": EXCLUDED if excluded is None else excluded, "records": len(records)}
    (out / "mixture.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return out
