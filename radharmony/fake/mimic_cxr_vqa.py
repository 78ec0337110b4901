"""A MIMIC-CXR-VQA replica in the real on-disk format, over a MIMIC-CXR-JPG replica.

Layout::

    <root>/mimiccxrvqa/dataset/{train,valid,test}.json   JSON lists of questions
    <root>/files/...                                      MIMIC-CXR-JPG (radharmony.fake.mimic)

Quirks reproduced: ``answer`` always a list (one item, several, or empty), ``idx`` counting
from 0 in every file, integer ``subject_id`` / ``study_id``, ``template_program`` strings and
``template_arguments`` dicts, ``split`` written in every entry.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import register_fake
from .mimic import studies, write_mimic

QUESTIONS = [
    ("presence", "verify", "is there ${object} in the ${anatomy}?",
     "is there any abnormality in the left lung?", ["yes"]),
    ("anatomy", "query", "list all anatomical locations related to ${attribute}.",
     "list all anatomical locations related to lung opacity.", ["left lung", "right lung"]),
    ("abnormality", "choose", "which abnormality is present, ${a} or ${b}?",
     "which abnormality is present, atelectasis or pneumothorax?", []),
    ("plane", "query", "what is the view of this image?", "what is the view of this image?",
     ["pa"]),
]
SPLITS = {"train": "train", "validate": "valid", "test": "test"}


def write_mimic_cxr_vqa(root: str | Path, *, n_subjects: int = 6, seed: int = 0,
                        images: bool = True) -> Path:
    """Write the replica under ``root`` and return ``root`` (MIMIC-CXR-JPG's root)."""
    root = Path(write_mimic(root, n_subjects=n_subjects, seed=seed, images=images))
    files: dict[str, list] = {"train": [], "valid": [], "test": []}
    for s in studies(root):
        split = SPLITS[s["split"]]
        for k, dicom in enumerate(s["dicoms"]):
            for content, semantic, template, question, answer in QUESTIONS[k:k + 3]:
                out = files[split]
                out.append({"split": split, "idx": len(out), "image_id": dicom,
                            "question": question, "content_type": content,
                            "semantic_type": semantic, "template": template,
                            "template_program": "program_1", "template_arguments": {
                                "object": {}, "attribute": {}, "category": {}, "viewpos": {},
                                "gender": {}}, "answer": answer,
                            "subject_id": int(s["subject"]), "study_id": int(s["study"]),
                            "image_path": f"files/p{s['subject'][:2]}/p{s['subject']}/"
                                          f"s{s['study']}/{dicom}.jpg"})
    folder = root / "mimiccxrvqa" / "dataset"
    folder.mkdir(parents=True, exist_ok=True)
    for split, out in files.items():
        (folder / f"{split}.json").write_text(json.dumps(out, indent=4))
    return root


@register_fake("mimic_cxr_vqa")
def make(root: Path) -> dict:
    """Contract-suite maker: questions on the images of a six-patient MIMIC replica."""
    base = write_mimic_cxr_vqa(root)
    return {"base_image_dir": base, "csv_path": base / "mimiccxrvqa" / "dataset" / "train.json"}
