"""An X-Raydar multimodal replica in the card's on-disk format.

Layout (as ``hf download dnamodel/xraydar-multimodal`` leaves it)::

    <root>/images/<xray_id>.png        (full resolution; 8- or 16-bit grayscale)
    <root>/annotations.jsonl           (one JSON object per exam, keys in the card's order)

Reproduced: numeric-text ``xray_id``; two annotators per image boxing findings independently
(ids like ``"705"``), sometimes only one of them, sometimes none; boxes in pixels of the full
image; an empty ``consensus_labels`` list for a normal exam; reports whose tokens split
punctuation from words (``"zone ."`` for ``"zone."``), double spaces and line breaks in the text,
an untagged header (``O``), IOBE tags per sentence and spans as token indices over sentences,
several labels on one sentence. ``span_end`` chooses whether a span's ``end`` is its last token
(``"inclusive"``, as the card's example reads) or one past it (``"exclusive"``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from . import register_fake
from .images import synthetic_cxr, write_png

ANNOTATORS = ["703", "705", "711", "714", "720"]
FINDINGS = ["cardiomegaly", "consolidation", "pleural_effusion", "atelectasis", "pneumothorax",
            "unfolded_aorta", "mediastinum_widened", "volume_loss", "rib_fracture", "object",
            "parenchymal_lesion", "scoliosis"]
SENTENCES = {  # sentence -> report categories
    "The heart is enlarged.": ["cardiomegaly"],
    "There is consolidation in the left lower zone.": ["consolidation"],
    "Small right pleural effusion, with basal atelectasis.": ["pleural_effusion",
                                                              "atelectasis"],
    "No pneumothorax.": ["normal"],
    "Lungs clear.": ["normal"],
    "Unfolded aorta.": ["unfolded_aorta"],
    "Comparison made with the previous film (12/03/2015).": ["comparison"],
    "Rotated film; limited inspiration.": ["technical_issue"],
    "Appearances may represent infection.": ["possible_diagnosis"],
    "Suggest follow-up radiograph in 6 weeks.": ["recommendation"],
    "Old healed left rib fractures.": ["rib_fracture", "abnormal_non_clinically_important"],
    "NG tube in situ.": ["object"],
    "See above.": ["undefined_sentence"],
}
HEADER = "CHEST X-RAY:"
_TOKEN = re.compile(r"\w+|[^\w\s]")


def _report(rng: np.random.Generator, span_end: str):
    """``(text, tokens, tags, spans, labels)`` for a few random sentences."""
    chosen = list(rng.choice(list(SENTENCES), size=int(rng.integers(1, 5)), replace=False))
    text, tokens, tags, spans = "", [], [], []
    if rng.random() < 0.4:
        text = HEADER + "\n"
        head = _TOKEN.findall(HEADER)
        tokens += head
        tags += ["O"] * len(head)
    for k, sentence in enumerate(chosen):
        text += sentence + ("  " if k % 2 else ("\n" if rng.random() < 0.3 else " "))
        toks = _TOKEN.findall(sentence)
        first, last = len(tokens), len(tokens) + len(toks) - 1
        tokens += toks
        tags += ["B"] + ["I"] * (len(toks) - 2) + ["E"]
        for label in SENTENCES[sentence]:
            spans.append({"label": label, "start": first,
                          "end": last if span_end == "inclusive" else last + 1})
    labels = list(dict.fromkeys(s["label"] for s in spans))
    return text.rstrip(), tokens, tags, spans, labels


def _boxes(rng, labels, h, w) -> list[dict]:
    who = [str(a) for a in rng.choice(ANNOTATORS, size=2, replace=False)]
    out = []
    for label in labels:
        cx, cy = rng.uniform(0.25, 0.75) * w, rng.uniform(0.25, 0.75) * h
        bw, bh = rng.uniform(0.1, 0.3) * w, rng.uniform(0.1, 0.3) * h
        for a in who[: int(rng.choice([1, 2, 2, 2]))]:
            j = rng.normal(0, 0.04, 4) * [bw, bh, bw, bh]
            x0, y0 = max(0, cx - bw / 2 + j[0]), max(0, cy - bh / 2 + j[1])
            x1, y1 = min(w - 1, cx + bw / 2 + j[2]), min(h - 1, cy + bh / 2 + j[3])
            out.append({"label": label, "annotator": a, "x_min": int(x0), "y_min": int(y0),
                        "x_max": int(x1), "y_max": int(y1)})
    return out


def make_records(n: int, *, seed: int = 0, span_end: str = "inclusive",
                 sizes: tuple[int, int] = (300, 260), unknown_label: bool = False) -> list[dict]:
    """The ``annotations.jsonl`` objects for ``n`` exams (image sizes vary around ``sizes``)."""
    rng = np.random.default_rng(seed)
    ids = sorted(rng.choice(np.arange(100, 9000), size=n, replace=False).tolist())
    out = []
    for i, xid in enumerate(ids):
        h, w = int(sizes[0] * rng.uniform(0.85, 1.1)), int(sizes[1] * rng.uniform(0.85, 1.1))
        labels = [] if i % 5 == 0 else sorted(rng.choice(FINDINGS, size=int(rng.integers(1, 4)),
                                                         replace=False).tolist())
        text, tokens, tags, spans, rlabels = _report(rng, span_end)
        rec = {"xray_id": str(xid), "image_file": f"images/{xid}.png",
               "consensus_labels": labels,
               "bounding_boxes": [] if i % 7 == 3 else _boxes(rng, labels, h, w),
               "report_text": text, "report_tokens": tokens, "report_iobe_tags": tags,
               "report_spans": spans, "report_labels": rlabels, "_size": (h, w)}
        out.append(rec)
    if unknown_label and out:
        out[1]["consensus_labels"] = out[1]["consensus_labels"] + ["lung_nodule"]
        out[1]["report_labels"] = out[1]["report_labels"] + ["incidental"]
    return out


def write_xraydar(root: str | Path, *, n: int = 12, seed: int = 0, images: bool = True,
                  span_end: str = "inclusive", sizes: tuple[int, int] = (300, 260),
                  unknown_label: bool = False, malformed_line: int | None = None) -> Path:
    """Write an X-Raydar multimodal replica under ``root`` and return ``root``.

    Args:
        n: exams. images: also write the PNGs (alternately 8- and 16-bit).
        span_end: ``"inclusive"`` or ``"exclusive"`` span ends.
        unknown_label: put labels outside the vocabularies into the second exam.
        malformed_line: replace that line (1-based) of the JSONL with broken JSON.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    records = make_records(n, seed=seed, span_end=span_end, sizes=sizes,
                           unknown_label=unknown_label)
    lines = []
    for i, rec in enumerate(records):
        h, w = rec.pop("_size")
        lines.append(json.dumps(rec))
        if images:
            rng = np.random.default_rng(seed * 7919 + i)
            write_png(root / rec["image_file"], synthetic_cxr(h, w, rng=rng,
                                                              bits=16 if i % 2 else 8))
    if malformed_line is not None:
        lines[malformed_line - 1] = lines[malformed_line - 1][:-7]
    (root / "annotations.jsonl").write_text("\n".join(lines) + "\n")
    return root


@register_fake("xraydar_multimodal")
def make(root: Path) -> dict:
    """Contract-suite maker: a small replica with images."""
    return {"base_image_dir": write_xraydar(root)}
