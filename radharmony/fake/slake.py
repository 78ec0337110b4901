"""A SLAKE replica in the real on-disk format (HF ``BoKelvin/SLAKE``).

Layout::

    <root>/train.json, <root>/validation.json, <root>/test.json   JSON lists of questions
    <root>/imgs/xmlab<N>/source.jpg                              (imgs.zip extracted)

Quirks reproduced: every question asked twice, in English and in Chinese (``q_lang`` ``en`` /
``zh``, the Chinese answer in Chinese); CT and MRI images beside the X-rays; ``triple`` lists
with ``"vhead"`` placeholders; ``qid`` unique over the three files; ``answer_type`` ``OPEN`` /
``CLOSED``. Only the X-ray images are written.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import register_fake
from .images import synthetic_cxr

FIELDS = ("img_id", "img_name", "question", "answer", "q_lang", "location", "modality",
          "answer_type", "base_type", "content_type", "triple", "qid")
QA = [("Does the picture contain lung?", "Yes", "肺部在图中吗?", "是", "CLOSED", "Organ",
       ["vhead", "_", "_"]),
      ("Which organ is abnormal, heart or lung?", "Lung", "哪个器官异常，心脏还是肺?", "肺",
       "CLOSED", "Abnormality", ["vhead", "_", "_"]),
      ("Where is the pneumonia located?", "Right Lung, Lower Left", "肺炎位于哪里?",
       "右肺，左下", "OPEN", "Position", ["vhead", "_", "_"]),
      ("What diseases are included in the picture?", "Pneumonia", "图中包含哪些疾病?", "肺炎",
       "OPEN", "Abnormality", ["vhead", "_", "_"])]
SPLITS = {"train.json": 4, "validation.json": 2, "test.json": 2}


def write_slake(root: str | Path, *, seed: int = 0, images: bool = True) -> Path:
    """Write the replica under ``root``; returns ``root/imgs`` (``base_image_dir``)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    img_id, qid = 1, 0
    for name, n_images in SPLITS.items():
        out = []
        for k in range(n_images + 1):
            modality = "X-Ray" if k < n_images else "CT"
            folder = root / "imgs" / f"xmlab{img_id}"
            folder.mkdir(parents=True, exist_ok=True)
            if images and modality == "X-Ray":  # only the images slake_chest asks about
                import cv2

                cv2.imwrite(str(folder / "source.jpg"), synthetic_cxr(240, 256, rng=rng, bits=8))
            for q_en, a_en, q_zh, a_zh, atype, content, triple in QA[: 2 + k % 3]:
                for q, a, lang in ((q_en, a_en, "en"), (q_zh, a_zh, "zh")):
                    out.append(dict(zip(FIELDS, (img_id, f"xmlab{img_id}/source.jpg", q, a,
                                                 lang, "Lung", modality, atype, "vqa",
                                                 content, triple, qid))))
                    qid += 1
            img_id += 1
        (root / name).write_text(json.dumps(out, ensure_ascii=False, indent=1))
    return root / "imgs"


@register_fake("slake_chest")
def make(root: Path) -> dict:
    """Contract-suite maker: eight X-ray images over the three splits (and three CTs)."""
    return {"base_image_dir": write_slake(root)}
