"""Study-level exports: the records, the shard plan, the manifest and resuming, shared by
:func:`~radharmony.export.study_formats.to_llava`, :func:`~radharmony.export.study_formats.to_parquet`
and :func:`~radharmony.export.study_formats.to_study_webdataset`.

A record is one study (``StudyDataset`` order): ids, views, ``key_image``, the six sections,
``report``, the prior's id when the dataset has priors, and its images as ``(name, bytes)``;
for a VQA dataset, one question with its images (:func:`radharmony.export.vqa.vqa_records`;
``num_studies`` in the manifest then counts questions):

* ``images="cache"`` (default): the preprocessed image at the pipeline's size (224, or the
  transform's), as the cache holds it (read through it, filling it on a miss), stored
  losslessly as an 8- or 16-bit PNG;
* ``images="original"``: the source files' bytes as shipped (their own format and size).

The manifest says which (``images``). Exports are written in shards of ``shard_size`` studies;
a finished shard is listed in ``manifest.json`` with its SHA-256, and an export run again with
the same dataset and options keeps every intact shard (resumable); anything else is rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable, Sequence

from ..errors import check_choice
from ..studies.sections import SECTION_KEYS
from .codec import ExportError, png_bytes, study_key  # noqa: F401 (study_key: re-exported)
from .manifest import _sha256_file, fingerprint
from .tarfiles import _save_shard

IMAGE_SOURCES = ("cache", "original")
STUDY_FORMAT = "radharmony-study-export"


def is_vqa(ds) -> bool:
    """Whether ``ds`` is a VQA dataset (one row per question): exported one record per
    question (:func:`radharmony.export.vqa.vqa_records`)."""
    return getattr(getattr(ds, "spec", None), "row_unit", "image") == "question"


def image_dataset(ds):
    """The per-image dataset whose pipeline and cache give the exported pixels."""
    return ds if is_vqa(ds) else ds.images


def check_study_dataset(ds, shard_size: int, images: str) -> None:
    if not is_vqa(ds) and (not hasattr(ds, "index") or not hasattr(ds, "images")):
        raise ExportError("Study exports need a study-level dataset",
                          expected="XDataset(..., level='study')", found=type(ds).__name__,
                          fix="build the dataset with level='study'")
    if isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1:
        raise ExportError("shard_size must be a positive integer", expected="e.g. 1000",
                          found=repr(shard_size), fix="pass shard_size=1000")
    check_choice("images", images, IMAGE_SOURCES, error=ExportError)
    if images == "cache" and image_dataset(ds).user_transform is not None:
        raise ExportError("images='cache' needs the built-in pipeline",
                          expected="transform=None or a DefaultTransform",
                          found=type(image_dataset(ds).user_transform).__name__,
                          fix="pass images='original', or build the dataset without transform")


def image_info(ds, images: str) -> dict:
    """What the exported images are (recorded in the manifest)."""
    if images == "original":
        return {"source": "original", "description": "the source files as shipped"}
    p = image_dataset(ds).pipeline
    return {"source": "cache", "size": p.size, "bits": p.bits, "format": "png",
            "description": f"preprocessed {p.size}x{p.size} {p.bits}-bit PNG (the cache's "
                           "pixels)"}


def records(ds, rows, images: str, *, key_only: bool = False) -> list[dict]:
    """The export records of studies ``rows`` (indices, in order; a VQA dataset's, one per
    question: :func:`radharmony.export.vqa.vqa_records`). ``key_only``: ``images`` holds the
    key image alone (``key_image`` and ``views`` still describe the whole study)."""
    ix, img = ds.index, ds.images

    def chosen(s) -> list[tuple[int, int]]:  # (position in the study, image row)
        pairs = list(enumerate(int(r) for r in ix.rows[s]))
        return [pairs[int(ix.key_image[s])]] if key_only else pairs

    flat = [r for s in rows for _, r in chosen(s)]
    if images == "cache":  # PNG encoding over the process's threads (OpenCV drops the GIL)
        import numpy as np

        from .. import threads

        encoded = threads.each(lambda a: png_bytes(a, where="study export"),
                               list(ds._quantized(np.asarray(flat, np.int64)))) if flat else []
        for value in encoded:
            if threads.raised(value) is not None:
                raise threads.raised(value)
        arrays = iter(encoded)
    out = []
    for s in rows:
        key = study_key(ix.study_ids[s])
        pics = []
        for j, r in chosen(s):
            if images == "cache":
                pics.append((f"{j}.png", next(arrays)))
            else:
                path = img.image_file(int(r))
                try:
                    data = path.read_bytes()
                except OSError as exc:
                    raise ExportError(f"study {ix.study_ids[s]}: cannot read {path}",
                                      expected="a readable image file",
                                      found=f"{type(exc).__name__}: {exc}",
                                      fix="restore the file, or export images='cache'") from None
                pics.append((f"{j}{path.suffix.lower()}", data))
        rec = {"key": key, "study_id": str(ix.study_ids[s]),
               "patient_id": str(ix.patient_ids[s]), "views": list(ds._views[s]),
               "sample_ids": img.rows.ids[ix.rows[s]].tolist(),
               "key_image": int(ix.key_image[s]),
               **{k: ix.sections[s][k] for k in SECTION_KEYS},
               "report": ix.reports[s] if isinstance(ix.reports[s], str) else None,
               "images": pics}
        if ds.prior:
            p = int(ds.prior_of[s])
            rec["prior_study_id"] = str(ix.study_ids[p]) if p >= 0 else None
        out.append(rec)
    return out


def study_fingerprint(ds, *, fmt: str, images: str, options: dict) -> dict:
    fp = fingerprint(image_dataset(ds), image_dataset(ds).pipeline)
    if is_vqa(ds):
        fp.update(level="question", ref_images=True)  # records carry reference images
    else:
        fp.update(level="study", max_images=ds.max_images, view_order=list(ds.view_order),
                  prior=ds.prior)
    fp.update(export_format=fmt, images=images, options=options,
              num_studies=len(ds))
    return json.loads(json.dumps(fp))  # as read back from the manifest


def run_shards(ds, out_dir: Path, *, fmt: str, prefix: str, suffix: str, shard_size: int,
               images: str, options: dict, write: Callable[[list[dict], Path], dict | None],
               progress: bool, manifest_name: str = "manifest.json",
               intact: Callable[[dict, Path], bool] | None = None,
               read: Callable[[object, Sequence[int], str], list[dict]] | None = None,
               groups: list[tuple[str, Sequence[int]]] | None = None) -> dict:
    """Write every shard not kept from an earlier run with ``write(records, path)`` (which
    returns extra manifest fields, or None) and return the manifest. A shard is kept when
    its file has the recorded size and SHA-256 and, given ``intact``, ``intact(entry, path)``
    holds too (files the shard refers to: a LLaVA part's images). ``read(ds, rows, images)``
    gives a shard's records (default :func:`records`; each has ``images``).

    ``groups`` (``[(split, row indices)]``, :func:`radharmony.export.hf_card.split_groups`)
    writes each group to its own shards ``<prefix>-<split>-000000<suffix>``, whose manifest
    entries carry ``split`` and count ``start``/``stop`` within the group's rows; without it
    the shards ``<prefix>-000000<suffix>`` take the rows in order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fp = study_fingerprint(ds, fmt=fmt, images=images, options=options)
    plan = [(f"{prefix}{'' if split is None else '-' + split}-{k:06d}{suffix}", split,
             rows, s, min(s + shard_size, len(rows)))
            for split, rows in (groups or [(None, range(len(ds)))])
            for k, s in enumerate(range(0, len(rows), shard_size))]
    old = _old_shards(out_dir / manifest_name, fp, shard_size)
    done = {}
    for name, split, _, s, e in plan:
        entry = old.get(name)
        path = out_dir / name
        if entry and (entry["start"], entry["stop"], entry.get("split")) == (s, e, split) \
                and path.is_file() and \
                path.stat().st_size == entry["bytes"] and _sha256_file(path) == entry["sha256"] \
                and (intact is None or intact(entry, path)):
            done[name] = entry
    manifest = {"format": STUDY_FORMAT, "export_format": fmt, "prefix": prefix,
                "shard_size": shard_size, "images": image_info(ds, images), "fingerprint": fp,
                "complete": False, "num_studies": 0, "shards": []}

    def save(complete=False):
        shards = [done[p[0]] for p in plan if p[0] in done]
        manifest.update(shards=shards, num_studies=sum(s["count"] for s in shards),
                        num_images=sum(s["images"] for s in shards), complete=complete)
        _write_manifest_as(out_dir, manifest_name, manifest)

    from tqdm.auto import tqdm

    todo = [p for p in plan if p[0] not in done]
    save()
    with tqdm(total=len(plan), initial=len(plan) - len(todo), unit="shard",
              desc=f"exporting {prefix} ({fmt})", disable=not progress) as bar:
        for name, split, rows, s, e in todo:
            recs = (read or records)(ds, rows[s:e], images)
            path = out_dir / name
            extra = write(recs, path) or {}
            done[name] = {"name": name, **({} if split is None else {"split": split}),
                          "start": s, "stop": e, "count": e - s,
                          "images": sum(len(r["images"]) for r in recs),
                          "bytes": path.stat().st_size, "sha256": _sha256_file(path), **extra}
            save()
            bar.update(1)
    save(complete=True)
    return manifest


def files_sha256(files) -> str:
    """One SHA-256 over ``(relative path, SHA-256 digest of the file's bytes)`` pairs, in order:
    what a LLaVA part's manifest entry records of the image files it refers to."""
    h = hashlib.sha256()
    for rel, digest in files:
        h.update(rel.encode() + b"\0" + digest)
    return h.hexdigest()


def llava_intact(folder: Path) -> Callable[[dict, Path], bool]:
    """The ``intact`` check of :func:`run_shards` for a LLaVA export whose JSON lies in
    ``folder``: a part is kept while the image files its entries list (relative to
    ``folder``; absolute paths are source files, referenced, not written) hash to its entry's
    ``images_sha256``."""
    digests: dict[str, bytes] = {}  # an image several parts share is read once

    def intact(entry: dict, part: Path) -> bool:
        try:
            files = [f for e in json.loads(part.read_text()) for f in image_list(e)
                     if not os.path.isabs(f)]
            for f in files:
                if f not in digests:
                    digests[f] = hashlib.sha256((folder / f).read_bytes()).digest()
        except (OSError, ValueError, TypeError, KeyError):
            return False
        return files_sha256((f, digests[f]) for f in files) == entry.get("images_sha256")
    return intact


def image_list(entry: dict) -> list[str]:
    """A LLaVA entry's images as a list (``image`` is a string, a list, or absent)."""
    image = entry.get("image")
    return [] if image is None else [image] if isinstance(image, str) else list(image)


def join_llava_parts(manifest: dict, parts: Path, path: Path, *, ensure_ascii: bool = True
                     ) -> int:
    """Write the LLaVA JSON list at ``path`` from the export's parts (in ``parts``, as
    ``manifest`` lists them); returns how many entries it holds."""
    joined = [e for s in manifest["shards"] for e in json.loads((parts / s["name"]).read_text())]
    _save_shard(path, json.dumps(joined, indent=1, ensure_ascii=ensure_ascii).encode())
    return len(joined)


def _write_manifest_as(out_dir: Path, name: str, manifest: dict) -> None:
    tmp = out_dir / f".{name}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, out_dir / name)


def _old_shards(path: Path, fp: dict, shard_size: int) -> dict:
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(old, dict) or old.get("format") != STUDY_FORMAT or \
            old.get("fingerprint") != fp or old.get("shard_size") != shard_size:
        return {}
    return {e["name"]: e for e in old.get("shards", []) if isinstance(e, dict) and "name" in e}
