"""Study-level exports for vision-language training: LLaVA JSON, Hugging Face Parquet and
WebDataset shards of whole studies (records, shards, manifest and resuming:
:mod:`radharmony.export.studies`).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from functools import partial
from pathlib import Path

from ..errors import SHOW, StudyWarning, check_choice
from ..studies.references import rexrank_context, rexrank_report
from ..studies.sections import SECTION_KEYS
from .codec import ExportError
from .decoders import bit_depth, warn_deep
from .hf_card import split_groups, write_card
from .studies import (check_study_dataset, files_sha256, is_vqa, join_llava_parts,
                      llava_intact, records, run_shards)
from .tarfiles import _save_shard, _tar_bytes
from .vqa import FLAVORS, to_llava_vqa, vqa_records

ANSWERS = ("findings", "findings_impression")
PROMPTS = {"findings": "Write the findings section of the radiology report for this chest "
                       "X-ray study.",
           "findings_impression": "Write the findings and impression sections of the "
                                  "radiology report for this chest X-ray study."}
#: the Parquet columns of a study export and of a VQA export (one row per question), by kind:
#: ``text``, ``texts`` (list of text), ``int`` (int32), ``images`` (list<Image>)
STUDY_COLUMNS = {"study_id": "text", "patient_id": "text", "images": "images",
                 "views": "texts", "sample_ids": "texts", "key_image": "int",
                 **{k: "text" for k in SECTION_KEYS}, "report": "text",
                 "prior_study_id": "text"}
VQA_COLUMNS = {"sample_id": "text", "question_id": "text", "patient_id": "text",
               "study_id": "text", "images": "images", "views": "texts", "key_image": "int",
               "image_paths": "texts", "question": "text", "options": "texts",
               "answer": "text", "answer_format": "text", "answer_letter": "text",
               "explanation": "text", "task": "text", "category": "text",
               "subcategory": "text", "ref_study_id": "text", "ref_images": "images",
               "ref_image_paths": "texts"}
_TEXT = {"dtype": "string", "_type": "Value"}
#: Hugging Face ``datasets`` features of each kind (stored in the schema metadata)
HF_KINDS = {"text": _TEXT, "texts": {"feature": _TEXT, "_type": "List"},
            "int": {"dtype": "int32", "_type": "Value"},
            "images": {"feature": {"_type": "Image"}, "_type": "List"}}
HF_FEATURES = {k: HF_KINDS[kind] for k, kind in STUDY_COLUMNS.items()}


def _records_of(ds):
    """How the shards of ``ds`` get their records: one per question for a VQA dataset, else
    the study records (:func:`radharmony.export.studies.records`)."""
    return vqa_records if is_vqa(ds) else None


def _prefix(ds, prefix: str | None) -> str:
    prefix = prefix or ds.spec.key
    if "/" in prefix or "." in prefix:
        raise ExportError("prefix must be a file name stem", expected="no '/' and no '.'",
                          found=repr(prefix), fix="pass e.g. prefix='rexgradient-test'")
    return prefix


# -- LLaVA ------------------------------------------------------------------------------------
def llava_answer(rec: dict, answer: str) -> str | None:
    """The assistant turn: the findings, or ReXrank's ``Findings: ... Impression: ...``."""
    if answer == "findings":
        return rec["findings"]
    if rec["findings"] is None and rec["impression"] is None:
        return None
    return rexrank_report(rec["findings"], rec["impression"])


def llava_prompt(rec: dict, answer: str, n_images: int | None = None) -> str:
    """One ``<image>`` line per image (``n_images``, default every view of the study), the
    context (indication, comparison), the instruction."""
    context = rexrank_context(rec)
    n = len(rec["images"]) if n_images is None else n_images
    return "<image>\n" * n + (context + "\n" if context else "") + PROMPTS[answer]


def llava_entry(rec: dict, files: list[str], answer: str, gpt: str, flavor: str) -> dict:
    """The entry of one study: ``files`` are its exported image paths (``"onevision"``: every
    view; otherwise the key image alone, ``image`` then a string)."""
    key = rec["key_image"]
    entry = {"id": rec["study_id"], "image": files if flavor == "onevision" else files[0],
             "conversations": [{"from": "human", "value": llava_prompt(rec, answer,
                                                                       len(files))},
                               {"from": "gpt", "value": gpt}]}
    if flavor == "onevision":
        entry["views"] = rec["views"]
    else:
        entry["view"] = rec["views"][key]
    entry.update(indication=rec["indication"], comparison=rec["comparison"])
    if flavor == "llava-rad":  # the fields LLaVA-Rad's loaders read
        entry.update(reason=rec["indication"], generate_method="rule-based",
                     impression=rec["impression"], history=rec["history"])
    return entry


def to_llava(ds, path: str | os.PathLike, *, answer: str = "findings", flavor: str = "llava",
             images: str = "cache", shard_size: int = 1000, progress: bool = True) -> dict:
    """Write ``ds`` (``level="study"``) as a LLaVA conversation JSON list at ``path``.

    ``flavor`` picks the trainer whose loader reads it (:data:`FLAVORS`):

    * ``"llava"`` (LLaVA-1.5): one image per entry, the study's key image (its frontal view),
      ``image`` a string and one ``<image>`` line; ``view`` names its view;
    * ``"onevision"`` (LLaVA-NeXT / LLaVA-OneVision): every view, ``image`` a list (frontal
      first) and one ``<image>`` line per image; ``views`` lists them;
    * ``"llava-rad"`` (LLaVA-Rad): ``"llava"`` plus ``reason`` (the indication or None),
      ``generate_method`` (``"rule-based"``), ``impression`` and ``history``.

    Each entry: ``id`` (the study id), ``image`` (relative to the JSON's folder),
    ``conversations`` (human: the ``<image>`` lines, ``Indication: ... Comparison: ...`` when
    present, the instruction; gpt: the findings, or ``Findings: ... Impression: ...`` for
    ``answer="findings_impression"``), ``indication``, ``comparison``. Images go to
    ``<stem>_images/<study key>/<j>.png``. Studies without an answer are left out and counted
    in one warning. Returns the manifest (``<stem>_parts/manifest.json``, beside the per-shard
    parts the JSON is joined from; each part's entry holds one SHA-256 of its images too, so a
    run again over the same folder keeps a part only while its images are as written, and
    writes it and them again otherwise). A VQA dataset is written one entry per question
    (:func:`radharmony.export.vqa.to_llava_vqa`).
    """
    if is_vqa(ds):
        return to_llava_vqa(ds, path, flavor=flavor, images=images, shard_size=shard_size,
                            progress=progress)
    check_study_dataset(ds, shard_size, images)
    check_choice("answer", answer, ANSWERS, error=ExportError)
    check_choice("flavor", flavor, FLAVORS, error=ExportError)
    path = Path(path)
    image_dir, parts = path.parent / f"{path.stem}_images", path.parent / f"{path.stem}_parts"
    left_out: list[str] = []

    def write(recs: list[dict], part: Path) -> dict:
        entries, written = [], []
        for rec in recs:
            gpt = llava_answer(rec, answer)
            if gpt is None:
                left_out.append(rec["study_id"])
                continue
            files = []
            for name, data in rec["images"]:  # the key image alone unless "onevision"
                f = image_dir / rec["key"] / name
                f.parent.mkdir(parents=True, exist_ok=True)
                _save_shard(f, data)
                files.append(f.relative_to(path.parent).as_posix())
                written.append((files[-1], hashlib.sha256(data).digest()))
            entries.append(llava_entry(rec, files, answer, gpt, flavor))
        _save_shard(part, json.dumps(entries, indent=1).encode())
        return {"entries": len(entries), "images_sha256": files_sha256(written)}

    manifest = run_shards(ds, parts, fmt="llava", prefix="part", suffix=".json",
                          shard_size=shard_size, images=images,
                          options={"answer": answer, "flavor": flavor}, write=write,
                          progress=progress, intact=llava_intact(path.parent),
                          read=None if flavor == "onevision" else partial(records,
                                                                          key_only=True))
    missing = len(ds) - join_llava_parts(manifest, parts, path)
    if missing:
        warnings.warn(f"to_llava(answer={answer!r}): {missing} of {len(ds)} studies have no "
                      f"{'findings' if answer == 'findings' else 'findings or impression'} "
                      "and were left out" + (f", first: {left_out[:SHOW]}" if left_out else ""),
                      StudyWarning, stacklevel=2)
    return manifest


# -- Parquet ----------------------------------------------------------------------------------
def to_parquet(ds, folder: str | os.PathLike, *, shard_size: int = 1000,
               images: str = "cache", prefix: str | None = None,
               progress: bool = True) -> dict:
    """Write ``ds`` (``level="study"``) as Parquet shards ``<prefix>-000000.parquet`` that
    Hugging Face ``datasets`` loads (``load_dataset("parquet", data_files=...)``): one row per
    study with ``images`` a ``list<Image>`` column (``{bytes, path}`` structs, the feature
    declared in the schema metadata), ``views``, ``sample_ids``, ``key_image``, the six
    sections, ``report`` and ``prior_study_id``. A VQA dataset is written one row per
    question (:data:`VQA_COLUMNS`: its images, ``question``, ``options``, ``answer``,
    ``answer_letter``, ``explanation``, ``task``/``category``/``subcategory``, and a difference
    question's reference study as ``ref_study_id``, ``ref_images`` (``list<Image>``, empty
    otherwise) and ``ref_image_paths``).

    Each split's rows go to their own shards ``<prefix>-<split>-000000.parquet`` (``train``,
    ``validation``, ``test``: :func:`radharmony.export.hf_card.split_groups`), and
    ``README.md``, a dataset card whose YAML header lists each split's files, makes
    ``datasets.load_dataset(folder)`` give every row the split it belongs to. Returns the
    manifest (``manifest.json``; each shard's entry names its ``split``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_study_dataset(ds, shard_size, images)
    columns = VQA_COLUMNS if is_vqa(ds) else STUDY_COLUMNS
    image_t = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    arrow = {"text": pa.string(), "texts": pa.list_(pa.string()), "int": pa.int32(),
             "images": pa.list_(image_t)}
    features = {k: HF_KINDS[kind] for k, kind in columns.items()}
    schema = pa.schema([(k, arrow[kind]) for k, kind in columns.items()],
                       metadata={"huggingface": json.dumps({"info": {"features": features}})})

    def write(recs: list[dict], path: Path) -> None:
        cols = {name: [] for name in schema.names}
        for rec in recs:
            for name in schema.names:
                if columns[name] == "images":
                    cols[name].append([{"bytes": d, "path": f"{rec['key']}/{n}"}
                                       for n, d in rec[name]])
                else:
                    cols[name].append(rec.get(name))
        table = pa.Table.from_pydict(cols, schema=schema)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        pq.write_table(table, tmp, compression="none", row_group_size=max(1, len(recs)))
        os.replace(tmp, path)

    prefix = _prefix(ds, prefix)
    manifest = run_shards(ds, Path(folder), fmt="parquet", prefix=prefix, suffix=".parquet",
                          shard_size=shard_size, images=images, options={}, write=write,
                          progress=progress, read=_records_of(ds), groups=split_groups(ds))
    write_card(Path(folder), manifest, title=f"{prefix} (radharmony export)")
    return manifest


# -- WebDataset -------------------------------------------------------------------------------
def to_study_webdataset(ds, folder: str | os.PathLike, *, shard_size: int = 1000,
                        images: str = "cache", prefix: str | None = None,
                        progress: bool = True) -> dict:
    """Write ``ds`` (``level="study"``) as WebDataset tar shards of whole studies: per study
    ``<key>.<j>.png`` (``<key>.<j><suffix>`` for original files), one per view in order, and
    ``<key>.json`` (ids, views, ``key_image``, sections, ``report``, image file names). The
    key is :func:`~radharmony.export.studies.study_key` (hex digits: study ids with dots
    would break WebDataset's grouping). A VQA dataset is written one sample per question
    (key: the hash of its sample id; ``.json``: :data:`VQA_COLUMNS` but the images; a
    difference question's reference images as ``<key>.ref<j>.png``, named in the JSON's
    ``ref_images``). Returns the manifest (``manifest.json``)."""
    check_study_dataset(ds, shard_size, images)

    def write(recs: list[dict], path: Path) -> dict:
        members = []
        for rec in recs:
            meta = {k: v for k, v in rec.items() if k not in ("images", "ref_images")}
            for group in ("images", "ref_images"):
                if group in rec:
                    meta[group] = [f"{rec['key']}.{n}" for n, _ in rec[group]]
                    members += [(f"{rec['key']}.{n}", d) for n, d in rec[group]]
            members.append((f"{rec['key']}.json", json.dumps(meta).encode()))
        _save_shard(path, _tar_bytes(members))
        return {"bits": max([bit_depth(d) for n, d in members if not n.endswith(".json")],
                            default=8)}

    manifest = run_shards(ds, Path(folder), fmt="webdataset", prefix=_prefix(ds, prefix),
                          suffix=".tar", shard_size=shard_size, images=images, options={},
                          write=write, progress=progress, read=_records_of(ds))
    warn_deep(manifest, caller="to_study_webdataset")
    return manifest
