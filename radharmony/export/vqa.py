"""VQA datasets through the study exporters: :func:`to_llava_vqa` (what
:func:`radharmony.export.study_formats.to_llava` does when given a VQA dataset) and
:func:`vqa_records`, the records :func:`~radharmony.export.study_formats.to_parquet` and
:func:`~radharmony.export.study_formats.to_study_webdataset` write for one (one per question).

One entry per question: ``id`` (the sample id), ``image`` (the question's images),
``conversations`` (human: one ``<image>`` line per image, the question, for a multiple-choice
question its options ``A. ...`` one a line and "Answer with the option's letter from the
given choices directly."; otherwise "Answer the question using a single word or phrase."; gpt:
the correct letter, or the answer text), and ``question_id``, ``answer_format``, ``options``,
``answer_letter``, ``answer``, ``explanation``, ``task``, ``category``.

A difference question (Medical-Diff-VQA) also carries its reference study's images: in LLaVA
after the question's own, the prompt naming them (``Current study:`` / ``Reference (prior)
study:`` before each group of ``<image>`` lines), the entry listing them again as
``ref_image`` with ``ref_study_id``; in the records as ``ref_image_paths`` and ``ref_images``
(``ref<j>.png``), which Parquet writes as a ``list<Image>`` column and WebDataset as
``<key>.ref<j>.png`` members.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path

from ..errors import SHOW, check_choice
from ..imaging.read import safe_path
from ..vqa.images import load_one
from .codec import ExportError, png_bytes
from .codec import study_key
from .studies import (check_study_dataset, files_sha256, join_llava_parts, llava_intact,
                      run_shards)
from .tarfiles import _save_shard

#: the text fields of a VQA export record (``options`` and ``image_paths`` are lists of text)
RECORD_FIELDS = ("sample_id", "question_id", "patient_id", "study_id", "question", "options",
                 "answer", "answer_format", "answer_letter", "explanation", "task", "category",
                 "subcategory", "ref_study_id")
MCQ_INSTRUCTION = "Answer with the option's letter from the given choices directly."
OPEN_INSTRUCTION = "Answer the question using a single word or phrase."


#: the trainers a LLaVA export is written for (``to_llava(flavor=...)``): LLaVA-1.5 (one image
#: per entry, ``image`` a string), LLaVA-NeXT/OneVision (``image`` a list, one ``<image>``
#: per image) and LLaVA-Rad (LLaVA-1.5 plus ``view``, ``reason``, ``generate_method``)
FLAVORS = ("llava", "onevision", "llava-rad")
CURRENT_LABEL = "Current study:"
REFERENCE_LABEL = "Reference (prior) study:"


def vqa_prompt(sample: dict, n_images: int, n_ref: int = 0) -> str:
    """The human turn of a question (options in the prompt for a multiple-choice one); with
    ``n_ref`` reference images, both groups of ``<image>`` lines are named."""
    text = "<image>\n" * n_images
    if n_ref:
        text = f"{CURRENT_LABEL}\n{text}{REFERENCE_LABEL}\n" + "<image>\n" * n_ref
    text += sample["question"]
    if sample["answer_format"] == "mcq":
        return text + "\n" + "\n".join(sample["options"]) + "\n" + MCQ_INSTRUCTION
    return text + "\n" + OPEN_INSTRUCTION


def to_llava_vqa(ds, path: str | os.PathLike, *, flavor: str = "llava", images: str = "cache",
                 shard_size: int = 10_000, progress: bool = True) -> dict:
    """Write the VQA dataset ``ds`` as a LLaVA conversation JSON list at ``path``.

    ``flavor="llava"`` (LLaVA-1.5, the default): one image per entry, the question's key image
    (PA, else AP, else its first), ``image`` a string; a difference question, which needs its
    reference study's images too, cannot be one and is left out (counted in the warning).
    ``"onevision"`` (LLaVA-NeXT / LLaVA-OneVision): every image of the question and of its
    reference study, ``image`` a list, one ``<image>`` line per image. (``"llava-rad"`` is a
    report-generation format: refused.)

    ``images="cache"``: each distinct image once, as the cache's preprocessed PNG, under
    ``<stem>_images/<hash of its path>.png`` (paths relative to the JSON's folder);
    ``"original"``: the source files' absolute paths, nothing copied. Questions without an
    answer are left out and counted in one warning. Written, as the study export is, in parts
    of ``shard_size`` questions (``<stem>_parts/``) that a run again over the same folder keeps
    while they and the images they list are as written (resumable). Returns the manifest
    (``num_studies`` counts questions, ``num_images`` their images and reference images).
    """
    check_study_dataset(ds, shard_size, images)
    if flavor == "llava-rad":
        raise ExportError("flavor='llava-rad' writes report-generation entries, not questions",
                          expected="flavor='llava' or 'onevision' for a VQA dataset",
                          found=f"flavor='llava-rad' for {type(ds).__name__}",
                          fix="pass flavor='llava' (LLaVA-1.5) or flavor='onevision'")
    check_choice("flavor", flavor, FLAVORS, error=ExportError)
    path = Path(path)
    image_dir, parts = path.parent / f"{path.stem}_images", path.parent / f"{path.stem}_parts"
    written: dict[str, tuple[str, bytes | None]] = {}  # image -> (entry path, digest)
    left_out: list[str] = []
    needs_refs: list[str] = []  # difference questions, left out of a LLaVA-1.5 export
    df = ds.harmonized_df
    text = {c: df[c].tolist() for c in ("question_id", "question", "answer", "answer_format",
                                        "options", "answer_letter", "explanation")}
    extra = {c: df[c].tolist() if c in df.columns else [None] * len(df)
             for c in ("task", "category", "ref_study_id")}
    own = df["image_paths"].tolist()

    def file_of(rel: str, qid) -> tuple[str, bytes | None]:
        if rel not in written:
            if images == "original":
                written[rel] = (str(ds.base_image_dir / rel), None)
            else:
                f = image_dir / f"{study_key(rel)}.png"
                f.parent.mkdir(parents=True, exist_ok=True)
                data = png_bytes(load_one(ds, ds.base_image_dir, rel), where=f"question {qid}")
                _save_shard(f, data)
                written[rel] = (f.relative_to(path.parent).as_posix(),
                                hashlib.sha256(data).digest())
        return written[rel]

    def read(_ds, rows, _images: str) -> list[dict]:  # "images": what the entry will list
        if flavor == "onevision":
            return [{"index": i, "images": list(own[i]) + reference_paths(ds, i)} for i in rows]
        return [{"index": i, "images": [] if reference_paths(ds, i) else
                 [own[i][int(ds._key[i])]]} for i in rows]

    def write(recs: list[dict], part: Path) -> dict:
        entries, files, n_refs = [], [], 0
        for i in (r["index"] for r in recs):
            sample = {c: v[i] for c, v in text.items()}
            gpt = sample["answer_letter"] if sample["answer_format"] == "mcq" \
                else sample["answer"]
            if gpt is None:
                left_out.append(sample["question_id"])
                continue
            ref_paths = reference_paths(ds, i)
            if flavor == "llava" and ref_paths:
                needs_refs.append(sample["question_id"])
                n_refs += 1
                continue
            chosen = own[i] if flavor == "onevision" else [own[i][int(ds._key[i])]]
            mine = [file_of(rel, sample["question_id"]) for rel in chosen]
            refs = [file_of(rel, sample["question_id"]) for rel in ref_paths]
            files += mine + refs
            names = [f for f, _ in mine + refs]
            entries.append({"id": ds.sample_ids[i],
                            "image": names if flavor == "onevision" else names[0],
                            "conversations": [
                                {"from": "human", "value": vqa_prompt(sample, len(mine),
                                                                      len(refs))},
                                {"from": "gpt", "value": gpt}], **sample,
                            **{c: v[i] for c, v in extra.items()},
                            **({"ref_image": [f for f, _ in refs]} if flavor == "onevision"
                               else {})})
        _save_shard(part, json.dumps(entries, indent=1, ensure_ascii=False).encode())
        return {"entries": len(entries), "needs_refs": n_refs,
                "images_sha256": files_sha256((f, d) for f, d in files if d is not None)}

    manifest = run_shards(ds, parts, fmt="llava", prefix="part", suffix=".json",
                          shard_size=shard_size, images=images, options={"flavor": flavor},
                          write=write, progress=progress, intact=llava_intact(path.parent),
                          read=read)
    missing = len(ds) - join_llava_parts(manifest, parts, path, ensure_ascii=False)
    n_refs = sum(s.get("needs_refs", 0) for s in manifest["shards"])
    if n_refs:
        warnings.warn(f"to_llava(flavor='llava'): {n_refs} of {len(ds)} questions compare two "
                      "studies and were left out (LLaVA-1.5 takes one image per entry)" +
                      (f", first: {needs_refs[:SHOW]}" if needs_refs else "") +
                      "; pass flavor='onevision' to write them with every image",
                      UserWarning, stacklevel=2)
        missing -= n_refs
    if missing:
        warnings.warn(f"to_llava: {missing} of {len(ds)} questions have no answer and were "
                      f"left out" + (f", first: {left_out[:SHOW]}" if left_out else ""),
                      UserWarning, stacklevel=2)
    return manifest


def reference_paths(ds, i: int) -> list[str]:
    """The reference study's image paths of question ``i`` (``[]`` unless a difference
    question)."""
    refs = getattr(ds, "_refs", None)
    value = None if refs is None else refs[i]
    return [] if value is None or isinstance(value, float) else [str(p) for p in value]


def vqa_records(ds, rows, images: str) -> list[dict]:
    """The export records of questions ``rows`` (indices, in order): ``key`` (the WebDataset-safe
    :func:`~radharmony.export.studies.study_key` of the sample id), :data:`RECORD_FIELDS`
    (None where the dataset has no such column), ``views``, ``key_image``, ``image_paths`` and
    ``images`` (``(name, bytes)``: the cache's PNG ``<j>.png``, or the original file
    ``<j><suffix>``), ``ref_image_paths`` and ``ref_images`` (the reference study's, named
    ``ref<j>...``; empty unless a difference question)."""
    from .. import threads

    root = ds.base_image_dir
    rows = [int(i) for i in rows]
    paths = [list(ds._images[i]) for i in rows]
    ref_paths = [reference_paths(ds, i) for i in rows]
    flat = [rel for ps, rs in zip(paths, ref_paths) for rel in ps + rs]
    if images == "cache":  # read through the cache in order, encode over the threads
        encoded = threads.each(lambda a: png_bytes(a, where="VQA export"),
                               [load_one(ds, root, rel) for rel in flat]) if flat else []
        for value in encoded:
            if threads.raised(value) is not None:
                raise threads.raised(value)
    else:
        encoded = [_original(root, rel) for rel in flat]
    data = iter(encoded)
    out = []

    def named(rels: list[str], stem: str = "") -> list[tuple[str, bytes]]:
        return [(f"{stem}{j}.png" if images == "cache" else
                 f"{stem}{j}{Path(rel).suffix.lower()}", next(data))
                for j, rel in enumerate(rels)]

    for i, ps, rs in zip(rows, paths, ref_paths):
        rec = {"key": study_key(ds.rows.ids[i]),
               **{c: _plain(ds._fields[c][i]) if c in ds._fields else None
                  for c in RECORD_FIELDS}, "sample_id": str(ds.rows.ids[i]),
               "views": list(ds._views[i]), "key_image": int(ds._key[i]), "image_paths": ps,
               "images": named(ps), "ref_image_paths": rs}
        rec["ref_images"] = named(rs, "ref")
        out.append(rec)
    return out


def _plain(value):
    """A table cell as JSON: lists for arrays, None for missing."""
    if value is None or isinstance(value, str):
        return value
    if hasattr(value, "tolist") or isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return None if value != value else value  # NaN


def _original(root, rel: str) -> bytes:
    path = safe_path(root, rel)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ExportError(f"VQA export: cannot read {path}", expected="a readable image file",
                          found=f"{type(exc).__name__}: {exc}",
                          fix="restore the file, or export images='cache'") from None
