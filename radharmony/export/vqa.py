"""VQA datasets as LLaVA conversations: :func:`to_llava_vqa` (what
:func:`radharmony.export.study_formats.to_llava` does when given a VQA dataset).

One entry per question: ``id`` (the sample id), ``image`` (the question's images),
``conversations`` (human: one ``<image>`` line per image, the question, for a multiple-choice
question its options ``A. ...`` one a line and "Answer with the option's letter from the
given choices directly."; otherwise "Answer the question using a single word or phrase."; gpt:
the correct letter, or the answer text), and ``question_id``, ``answer_format``, ``options``,
``answer_letter``, ``answer``, ``explanation``, ``task``, ``category``.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from ..errors import SHOW, check_choice
from ..vqa.images import load_one
from .codec import ExportError, png_bytes
from .studies import study_key
from .tarfiles import _save_shard

MCQ_INSTRUCTION = "Answer with the option's letter from the given choices directly."
OPEN_INSTRUCTION = "Answer the question using a single word or phrase."


def vqa_prompt(sample: dict, n_images: int) -> str:
    """The human turn of a question (options in the prompt for a multiple-choice one)."""
    text = "<image>\n" * n_images + sample["question"]
    if sample["answer_format"] == "mcq":
        return text + "\n" + "\n".join(sample["options"]) + "\n" + MCQ_INSTRUCTION
    return text + "\n" + OPEN_INSTRUCTION


def to_llava_vqa(ds, path: str | os.PathLike, *, images: str = "cache",
                 progress: bool = True) -> dict:
    """Write the VQA dataset ``ds`` as a LLaVA conversation JSON list at ``path``.

    ``images="cache"``: each distinct image once, as the cache's preprocessed PNG, under
    ``<stem>_images/<hash of its path>.png`` (paths relative to the JSON's folder);
    ``"original"``: the source files' absolute paths, nothing copied. Questions without an
    answer are left out and counted in one warning. Returns ``{"entries", "images",
    "left_out"}``.
    """
    from tqdm.auto import tqdm

    check_choice("images", images, ("cache", "original"), error=ExportError)
    path = Path(path)
    image_dir = path.parent / f"{path.stem}_images"
    written: dict[str, str] = {}
    entries, left_out = [], []
    df = ds.harmonized_df
    text = {c: df[c].tolist() for c in ("question_id", "question", "answer", "answer_format",
                                        "options", "answer_letter", "explanation")}
    extra = {c: df[c].tolist() if c in df.columns else [None] * len(df)
             for c in ("task", "category")}
    for i in tqdm(range(len(ds)), unit="question", desc="exporting (llava)",
                  disable=not progress):
        sample = {c: v[i] for c, v in text.items()}
        gpt = sample["answer_letter"] if sample["answer_format"] == "mcq" else sample["answer"]
        if gpt is None:
            left_out.append(sample["question_id"])
            continue
        files = []
        for rel in df["image_paths"].iat[i]:
            if rel not in written:
                if images == "original":
                    written[rel] = str(ds.base_image_dir / rel)
                else:
                    f = image_dir / f"{study_key(rel)}.png"
                    f.parent.mkdir(parents=True, exist_ok=True)
                    _save_shard(f, png_bytes(load_one(ds, ds.base_image_dir, rel),
                                             where=f"question {sample['question_id']}"))
                    written[rel] = f.relative_to(path.parent).as_posix()
            files.append(written[rel])
        entries.append({"id": ds.sample_ids[i], "image": files, "conversations": [
            {"from": "human", "value": vqa_prompt(sample, len(files))},
            {"from": "gpt", "value": gpt}], **sample,
            **{c: v[i] for c, v in extra.items()}})
    path.parent.mkdir(parents=True, exist_ok=True)
    _save_shard(path, json.dumps(entries, indent=1, ensure_ascii=False).encode())
    if left_out:
        warnings.warn(f"to_llava: {len(left_out)} of {len(ds)} questions have no answer and "
                      f"were left out, first: {left_out[:SHOW]}", UserWarning, stacklevel=2)
    return {"entries": len(entries), "images": len(written), "left_out": len(left_out)}
