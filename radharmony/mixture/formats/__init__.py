"""A mixture written in the training format of a vision-language trainer.

:func:`export_mixture` reads ``OUT/records.parquet`` one row group at a time (a mixture of
millions of records is never held whole) and writes one file, entries in the records' order:

=================== =============================================================== ==========
``fmt``             what                                                            file
=================== =============================================================== ==========
``llava``           LLaVA-1.5: ``image`` one string (the key frontal image)          JSON list
``llava-onevision`` LLaVA-NeXT / OneVision: ``image`` a list, one ``<image>`` each   JSON list
``llava-rad``       LLaVA-Rad: the LLaVA-1.5 entry + ``view``, ``reason``, ...      JSON list
``hf-chat``         Hugging Face chat ``messages`` + ``images`` (TRL, Qwen-VL)       JSON lines
``r2gen``           R2Gen ``annotation.json``: ``{"train", "val", "test"}``          JSON
``maira2``          MAIRA-2's inputs per study, grounded reports and phrases        JSON lines
``llama-factory``   LLaMA-Factory ShareGPT ``messages`` / ``images`` + its            JSON list
                    ``dataset_info.json`` entry beside it
``ms-swift``        ms-swift ``messages`` / ``images`` / ``objects`` (boxes)          JSON lines
``internvl``        InternVL ``conversations`` + the meta JSON beside it             JSON lines
``energon``         Megatron-Energon metadataset: a blend of one JSON lines file     YAML
                    per (source, task), weighted by its records
``ct-chat``         CT-CHAT's LLaVA JSON, the volumes at ``ct_clip``                  JSON list
``m3d``             M3D-LaMed's caption JSON + VQA CSV, ``.npy`` volumes              JSON, CSV
``radfm``           RadFM's entries with interleaved image tokens, ``.npy`` volumes   JSON list
=================== =============================================================== ==========

A mixture of volumes (every source a volume table) is written by the 3-D formats
(:mod:`radharmony.mixture.formats.ct3d`): ``ct-chat``, ``m3d``, ``radfm``, and ``hf-chat``
with each volume as a video of its slices.

Each format's module says what an entry holds; :mod:`radharmony.mixture.formats.common`
says how images are referred to (original files, or the cached images written as PNGs).
The same records give the same bytes.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from ...errors import check_choice
from ...export.codec import ExportError
from ...gc_pause import paused_gc
from ..records import read_manifest
from . import ct3d, energon, hf_chat, internvl, llama_factory, llava, llava_rad, maira2, ms_swift, r2gen
from .common import Export, Output, dumps, record_batches

#: format name -> (columns read, entry function, JSON lines?)
FORMATS = {
    "llava": SimpleNamespace(columns=llava.COLUMNS, entry=llava.llava_entry, lines=False),
    "llava-onevision": SimpleNamespace(columns=llava.COLUMNS, entry=llava.onevision_entry,
                                       lines=False),
    "llava-rad": SimpleNamespace(columns=llava_rad.COLUMNS, entry=llava_rad.entry,
                                 lines=False),
    "hf-chat": SimpleNamespace(columns=hf_chat.COLUMNS, entry=hf_chat.entry, lines=True),
    "r2gen": SimpleNamespace(columns=r2gen.COLUMNS, entry=r2gen.entry, lines=False),
    "llama-factory": SimpleNamespace(columns=llama_factory.COLUMNS, entry=llama_factory.entry,
                                     lines=False, finish=llama_factory.finish),
    "ms-swift": SimpleNamespace(columns=ms_swift.COLUMNS, entry=ms_swift.entry, lines=True,
                                reframe=False),  # its boxes: objects, from the fields
    "internvl": SimpleNamespace(columns=internvl.COLUMNS, entry=internvl.entry, lines=True,
                                dialect=internvl.DIALECT, finish=internvl.finish,
                                check_dest=internvl.check_dest),
    "energon": SimpleNamespace(columns=energon.COLUMNS, entry=hf_chat.entry, lines=True,
                               write=energon.write),
    "maira2": SimpleNamespace(columns=maira2.COLUMNS, entry=maira2.entry, lines=True,
                              dialect=maira2.DIALECT),
}
#: the splits an R2Gen annotation file holds, in order
R2GEN_SPLITS = ("train", "val", "test")


def export_mixture(out: str | os.PathLike, fmt: str, dest: str | os.PathLike, *,
                   image_folder: str | os.PathLike | None = None, split: str | None = None,
                   images: str | None = None, workers: int | None = None,
                   engine: str = "local", progress: bool = True,
                   cache_dir: str | os.PathLike | None = None,
                   r2gen_variant: str = "iu", volumes: str | None = None) -> dict:
    """Write the mixture in folder ``out`` (``records.parquet`` + ``mixture.json``) as ``fmt``
    at ``dest``.

    Args:
        out: the mixture folder ``radharmony mix build`` wrote.
        fmt: one of :data:`FORMATS` (``llava``, ``llava-onevision``, ``llava-rad``,
            ``hf-chat``, ``r2gen``, ``maira2``, ``llama-factory``, ``ms-swift``,
            ``internvl``, ``energon``).
        dest: the file to write (``train.json``, ``train.jsonl``, ``annotation.json``).
        image_folder: the folder image references are relative to. Cached images: where the
            PNGs are written (default ``<dest's folder>/images``). Original images: None
            writes absolute paths; a folder writes paths relative to it.
        split: ``"train"`` or ``"valid"`` to write one split of the mixture (None: all;
            R2Gen files every record under its own split).
        images: ``"original"`` (the source files) or ``"cache"`` (the letterboxed cached
            images, written as PNGs); None: the manifest's ``images.mode``.
        workers: processes encoding PNGs (None or 0: this process); with ``engine="ray"``,
            CPUs of the local Ray cluster started when none runs (0: every core).
        engine: ``"local"`` or ``"ray"`` (PNG encoding as Ray tasks; the same bytes).
        progress: a tqdm bar over the record row groups.
        cache_dir: the image cache the source datasets read and fill (None: images decoded
            without a cache; the pixels are the same).
        r2gen_variant: ``"iu"`` (R2Gen's IU X-ray loader: two images per study, frontal then
            lateral) or ``"mimic"`` (its MIMIC-CXR loader: the frontal image);
            :mod:`radharmony.mixture.formats.r2gen`.
        volumes: the 3-D formats' volume files: ``"npy"`` writes CT-CHAT's encoder-input
            arrays instead of NIfTI (:func:`radharmony.mixture.formats.ct3d.export_volumes`).

    Returns:
        a summary: ``format``, ``dest``, ``split``, ``entries`` written, ``skipped`` (reason ->
        records left out: ``no frontal image``, ``text-only``, ``not report generation``,
        ``no image``, ``no target``), ``boxes`` (grounded records' boxes written again for
        the image this export points at or the format's dialect: ``rewritten``, and
        ``clipped`` / ``dropped`` by MAIRA-2's crop; :mod:`radharmony.mixture.reframe`),
        ``images`` (``mode``, ``size``, ``folder``, ``written``).
    """
    if fmt in ct3d.VOLUME_FORMATS and (fmt != "hf-chat" or ct3d.volume_mixture(
            read_manifest(Path(out)))):
        return ct3d.export_volumes(out, fmt, dest, split=split, cache_dir=cache_dir,
                                   workers=workers, engine=engine, volumes=volumes,
                                   volume_folder=image_folder, progress=progress)
    spec = FORMATS.get(fmt)
    if spec is None:
        check_choice("fmt", fmt, (*FORMATS, *ct3d.VOLUME_FORMATS), error=ExportError)
    if split is not None and split not in ("train", "valid"):
        raise ExportError("split must be 'train', 'valid' or None", expected="a mixture "
                          "split (or None for every record)", found=repr(split),
                          fix="pass split='train'")
    out, dest = Path(out), Path(dest)
    manifest = read_manifest(out)
    check_choice("r2gen_variant", r2gen_variant, r2gen.VARIANTS, error=ExportError)
    if getattr(spec, "check_dest", None) is not None:
        spec.check_dest(dest)
    ex = Export(out, manifest, dest, images=images, image_folder=image_folder,
                cache_dir=cache_dir, workers=workers, engine=engine, fmt=fmt,
                dialect=getattr(spec, "dialect", None),
                variant=r2gen_variant if fmt == "r2gen" else None)
    columns = list(dict.fromkeys([*spec.columns, "fields"]))  # the boxes' source pixels
    from tqdm.auto import tqdm

    try:
        batches = tqdm(record_batches(out, columns, split), unit="row group",
                       desc=f"exporting {out.name} ({fmt})", disable=not progress)
        with paused_gc():  # a row group's records and entries: ~10 objects each, no cycles
            if fmt == "energon":
                groups = energon.write(batches, dest, ex)
                entries = sum(n for files in groups.values() for n in files.values())
            else:
                entries = (_r2gen if fmt == "r2gen" else _list)(batches, dest, ex, spec)
    finally:
        ex.close()
    summary = ex.summary(fmt, entries, split)
    if getattr(spec, "finish", None) is not None:  # the files a trainer reads beside it
        spec.finish(ex, summary)
    if fmt == "energon":
        summary["groups"] = groups  # {split: {file relative to dest's folder: records}}
    if fmt == "r2gen":
        summary.update(entries=sum(entries.values()), variant=r2gen_variant, splits=entries,
                       note=r2gen.EMPTY_TEST)
    return summary


class _Preview:
    """What an entry function needs of an :class:`Export`, for one record shown alone: image
    references as ``<source>/<image_path>`` and the reason a record would be skipped."""

    #: boxes stay as the build wrote them, for the original image; R2Gen's default loader
    mode, size, dialect, variant = "original", None, None, None

    def __init__(self):
        self.skipped: list[str] = []
        self.boxes: Counter = Counter()

    def ref(self, source: str, path: str) -> str:
        return f"{source}/{path}"

    def beside_dest(self, ref: str) -> str:
        return ref

    def image_size(self, source: str, path: str) -> tuple[None, None]:
        return None, None  # not read for a preview

    def skip(self, reason: str) -> None:
        self.skipped.append(reason)


def render_record(record: dict, fmt: str) -> dict:
    """One record (a row of ``records.parquet`` as a dict) as ``fmt``'s entry, exactly as
    :func:`export_mixture` writes it, images named ``<source>/<image_path>``; a record the
    format leaves out gives ``{"skipped": reason}``.

    >>> rec = {"record_id": "r1", "source": "nih", "image_paths": ["a.png"], "views": ["PA"],
    ...        "prompt": "Which view?", "target": "PA", "fields": "{}"}
    >>> render_record(rec, "llava")["image"], render_record(rec, "hf-chat")["images"]
    ('nih/a.png', ['nih/a.png'])
    """
    spec = FORMATS.get(fmt.replace("_", "-"))
    if spec is None:
        check_choice("fmt", fmt, tuple(FORMATS), error=ExportError)
    ex = _Preview()
    entry = spec.entry({k: v for k, v in record.items() if k != "_fields"}, ex)
    return entry if entry is not None else {"skipped": ex.skipped[0] if ex.skipped else
                                            "not written by this format"}


def _list(batches, dest: Path, ex: Export, spec) -> int:
    """A JSON list or JSON lines file of the entries, in the records' order."""
    target = Output(dest, lines=spec.lines)
    volumes = ct3d.volume_sources(ex.manifest)  # a mixture of images and volumes: 2-D only
    try:
        for recs in batches:
            for rec in recs:
                if volumes and rec["source"] in volumes:
                    ex.skip(ct3d.VOLUME_RECORD)
                    continue
                entry = spec.entry(ex.reframed(rec) if getattr(spec, "reframe", True) else rec,
                                   ex)
                if entry is not None:
                    target.write(entry)
            ex.flush()
    except BaseException:
        target.abort()
        raise
    target.close()
    return target.count


def _r2gen(batches, dest: Path, ex: Export, spec) -> dict:
    """R2Gen's one JSON object: each split's entries gathered in a temporary file first
    (returns the entries per split)."""
    parts = {name: Output(dest.with_name(f".{dest.name}.{name}"), lines=True)
             for name in R2GEN_SPLITS}
    volumes = ct3d.volume_sources(ex.manifest)
    try:
        for recs in batches:
            for rec in recs:
                if volumes and rec["source"] in volumes:
                    ex.skip(ct3d.VOLUME_RECORD)
                    continue
                entry = spec.entry(ex.reframed(rec), ex)
                if entry is not None:
                    if entry["split"] not in parts:
                        raise ExportError(f"Record {entry['id']} has the split "
                                          f"{rec['split']!r}", expected="train or valid",
                                          found=repr(rec["split"]),
                                          fix="rebuild the mixture")
                    parts[entry["split"]].write(entry)
            ex.flush()
        for part in parts.values():
            part.close()
        counts = {name: parts[name].count for name in R2GEN_SPLITS}
        tmp = dest.with_name(f".{dest.name}.tmp{os.getpid()}")
        with open(tmp, "wb") as fh:
            for k, name in enumerate(R2GEN_SPLITS):
                fh.write((b"{" if k == 0 else b",\n") + dumps(name) + b":[")
                with open(parts[name].path, "rb") as part:
                    for j, line in enumerate(part):
                        fh.write((b"\n" if j == 0 else b",\n") + line.rstrip(b"\n"))
                fh.write(b"]")
            fh.write(b"}\n")
        os.replace(tmp, dest)
    finally:
        for part in parts.values():
            if not part.fh.closed:
                part.abort()
            Path(part.path).unlink(missing_ok=True)
    return counts


__all__ = ["FORMATS", "export_mixture"]
