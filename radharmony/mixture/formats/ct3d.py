"""The 3-D trainers' formats: a mixture of volume records (the ``ct_`` tasks) written for a
trainer that takes CT volumes, each volume at that trainer's preset
(:mod:`radharmony.mixture.formats.volumes`):

=========== ======== =========================================================================
``fmt``     preset   what
=========== ======== =========================================================================
``ct-chat`` ct_clip  CT-CHAT's LLaVA JSON list ``{"id", "image", "conversations"}``, ``image``
                     the volume (a gzip NIfTI; ``volumes="npy"``: the encoder-input array),
                     the human turn starting with ``"<image>\\n"``
``m3d``     m3d      M3D-LaMed: ``.npy`` volumes (1, 32, 256, 256) in [0, 1]; the caption JSON
                     ``{"train": [{"image", "text"}], "validation": [...]}`` (report records)
                     at ``dest`` and the VQA CSV beside it (``<stem>_vqa.csv``: ``Image Path,
                     Question, Choice A-D, Answer Choice, Answer, Question Type``; every other
                     record: closed questions with their choices as options)
``radfm``   radfm    RadFM: ``.npy`` volumes (3, 512, 512, D), D a multiple of 4 in [4, 64];
                     a JSON list ``{"id", "image_dict": [{"image", "position": {"question":
                     0}}], "question", "answer"}``, and ``text``: the question with the image's
                     tokens interleaved (``<image>`` then :data:`RADFM_TOKENS` patch tokens
                     then ``</image>``, at its position)
``hf-chat`` m3d      Hugging Face chat with the volume as a video: a user turn ``[{"type":
                     "video"}, {"type": "text", ...}]``, ``videos`` (a list of frame lists: one
                     PNG per slice, as Qwen2.5-VL takes a video), ``num_slices`` and
                     ``spacing_mm`` (the slices' spacing, then in-plane)
=========== ======== =========================================================================

A record without a volume (text only) is skipped (``"no volume"``), as one without a target.
A grounded record's boxes (``ct_detect_findings``) are written again for the volume as the
preset made it (:func:`radharmony.mixture.tasks.grounded3d.target_for`; ``boxes`` in the
summary: ``rewritten``, ``clipped``, ``outside``).
The M3D-LaMed and RadFM loaders' fields were taken from their repositories' dataset classes
(not run here); tests read the files back with a reader of radharmony's own.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from ...errors import check_choice
from ...export.codec import ExportError
from ...files import atomic_write
from ..records import read_manifest
from .common import Output, dumps, record_batches
from .inputs import fields
from .llava import conversation
from .volumes import VolumeWriter

COLUMNS = ["record_id", "source", "sample_id", "image_paths", "family", "task", "prompt",
           "target", "split", "fields"]
#: format -> (its preset, the volumes' kind)
VOLUME_FORMATS = {"ct-chat": ("ct_clip", "nifti"), "m3d": ("m3d", "npy"),
                  "radfm": ("radfm", "npy"), "hf-chat": ("m3d", "slices")}
M3D_VQA_COLUMNS = ("Image Path", "Question", "Choice A", "Choice B", "Choice C", "Choice D",
                   "Answer Choice", "Answer", "Question Type")
M3D_SPLITS = {"train": "train", "valid": "validation"}
#: RadFM's patch tokens per image
RADFM_TOKENS = 32
NO_VOLUME = "no volume"


def radfm_text(question: str, n_images: int = 1) -> str:
    """The question with each image's tokens first (position 0), as RadFM interleaves them.

    >>> radfm_text("Is there a nodule?")[:18], radfm_text("Q").count("<image")
    ('<image><image0><im', 33)
    """
    tokens = "".join(f"<image>{''.join(f'<image{k}>' for k in range(RADFM_TOKENS))}</image>"
                     for _ in range(n_images))
    return tokens + question


def _choices(rec: dict) -> list:
    f = fields(rec)
    got = f.get("choices") or f.get("options")
    if got:
        return list(got)[:4]
    if rec["target"] in ("yes", "no", "uncertain") and rec["family"] in ("vqa", "labels"):
        return ["yes", "no", "uncertain"] if "uncertain" in (rec["prompt"] or "") else \
            ["yes", "no"]
    return []


def m3d_row(rec: dict, ref: str) -> list:
    """One VQA CSV row of M3D-LaMed's columns (:data:`M3D_VQA_COLUMNS`)."""
    choices = _choices(rec)
    letter = "ABCD"[choices.index(rec["target"])] if rec["target"] in choices else ""
    return [ref, rec["prompt"], *(choices + [""] * 4)[:4], letter, rec["target"], rec["task"]]


def export_volumes(out: str | os.PathLike, fmt: str, dest: str | os.PathLike, *,
                   split: str | None = None, cache_dir=None, workers: int | None = None,
                   engine: str = "local", volumes: str | None = None,
                   volume_folder: str | os.PathLike | None = None, preset=None,
                   boxes: str = "box3d", progress: bool = True) -> dict:
    """Write the volume mixture in ``out`` as ``fmt`` (:data:`VOLUME_FORMATS`) at ``dest``,
    the volumes under ``volume_folder`` (default ``<dest's folder>/volumes``) and
    ``volumes.json`` beside ``dest``. ``volumes``: ``"npy"`` writes CT-CHAT's encoder-input
    arrays instead of NIfTI files. ``preset``: another preset than the format's (a smaller
    one for a test). ``boxes``: the grounded records' dialect, ``"box3d"`` (bins) or
    ``"box3d_mm"`` (millimetres). Returns a summary (``entries``, ``skipped``, ``volumes``, the files)."""
    from ...volumes.presets import get_preset

    check_choice("fmt", fmt, tuple(VOLUME_FORMATS), error=ExportError)
    check_choice("boxes", boxes, ("box3d", "box3d_mm"), error=ExportError)
    if split is not None:
        check_choice("split", split, tuple(M3D_SPLITS), error=ExportError)
    name, kind = VOLUME_FORMATS[fmt]
    if volumes is not None:
        check_choice("volumes", volumes, ("nifti", "npy") if fmt == "ct-chat" else (kind,),
                     error=ExportError)
        kind = volumes
    out, dest = Path(out), Path(dest)
    manifest = read_manifest(out)
    folder = Path(volume_folder) if volume_folder is not None else dest.parent / "volumes"
    vw = VolumeWriter(manifest, folder, preset=get_preset(preset or name), kind=kind,
                      cache_dir=cache_dir, workers=workers, engine=engine)
    skipped: dict = {}
    tally = {"rewritten": 0, "clipped": 0, "outside": 0}
    target = Output(dest, lines=fmt == "hf-chat") if fmt in ("ct-chat", "radfm", "hf-chat") \
        else None
    captions = {v: [] for v in M3D_SPLITS.values()}
    vqa: list = []
    from tqdm.auto import tqdm

    try:
        for recs in tqdm(record_batches(out, COLUMNS, split), unit="row group",
                         disable=not progress, desc=f"exporting {out.name} ({fmt})"):
            made = []
            for rec in recs:
                why = None if rec["image_paths"] else NO_VOLUME
                if why is None and not (isinstance(rec["target"], str) and rec["target"]):
                    why = "no target"
                if why is not None:
                    skipped[why] = skipped.get(why, 0) + 1
                    continue
                made.append((rec, vw.ref(rec["source"], rec["sample_id"])))
            vw.flush()
            for rec, ref in made:
                if '"boxes3d"' in (rec.get("fields") or ""):  # boxes for this preset's grid
                    rec = _reboxed(rec, vw.volumes[ref], tally, boxes)
                if fmt == "m3d":
                    if rec["family"] == "reports":
                        captions[M3D_SPLITS[rec["split"]]].append({"image": ref,
                                                                   "text": rec["target"]})
                    else:
                        vqa.append(m3d_row(rec, ref))
                else:
                    target.write(_entry(fmt, rec, ref, vw.volumes[ref]))
    except BaseException:
        if target is not None:
            target.abort()
        raise
    finally:
        vw.close()
    files = [str(dest)]
    if target is not None:
        target.close()
        entries = target.count
    else:
        atomic_write(dest, lambda fh: fh.write(dumps(captions) + b"\n"))
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(M3D_VQA_COLUMNS)
        w.writerows(vqa)
        vqa_path = dest.with_name(dest.stem + "_vqa.csv")
        atomic_write(vqa_path, lambda fh: fh.write(buf.getvalue().encode()))
        files.append(str(vqa_path))
        entries = sum(map(len, captions.values())) + len(vqa)
    files.append(str(vw.write_manifest(dest, fmt)))
    return {"format": fmt, "dest": str(dest), "split": split, "entries": entries,
            "skipped": dict(sorted(skipped.items())), "files": files,
            "boxes": {"dialect": boxes, **tally},
            "volumes": {"preset": vw.preset.name, "kind": kind, "folder": str(folder),
                        "written": len(vw.volumes)}}


def _reboxed(rec: dict, meta: dict, counts: dict, dialect: str = "box3d") -> dict:
    """A grounded record with its target written through the preset's geometry (its boxes
    clipped or left out as the output's crop says, counted)."""
    from ..tasks.grounded3d import target_for

    text, c = target_for(fields(rec), meta["affine"], meta["spatial"], dialect)
    counts["rewritten"] += 1
    counts["clipped"] += c["clipped"]
    counts["outside"] += c["outside"]
    return {**rec, "target": text}


def _entry(fmt: str, rec: dict, ref: str, meta: dict) -> dict:
    if fmt == "ct-chat":
        return {"id": rec["record_id"], "image": ref,
                "conversations": conversation("<image>\n" + rec["prompt"], rec["target"])}
    if fmt == "radfm":
        return {"id": rec["record_id"], "image_dict": [{"image": ref,
                                                        "position": {"question": 0}}],
                "question": rec["prompt"], "answer": rec["target"],
                "text": radfm_text(rec["prompt"])}
    frames = [f"{ref}/{k:03d}.png" for k in range(meta["spatial"][0])]
    return {"id": rec["record_id"],
            "messages": [{"role": "user", "content": [{"type": "video"},
                                                      {"type": "text", "text": rec["prompt"]}]},
                         {"role": "assistant",
                          "content": [{"type": "text", "text": rec["target"]}]}],
            "videos": [frames], "num_slices": len(frames), "spacing_mm": meta["spacing_mm"]}


#: why a 2-D format leaves out a volume record
VOLUME_RECORD = "a volume (written by ct-chat, m3d, radfm or hf-chat alone)"


def volume_sources(manifest: dict) -> set[str]:
    """The mixture's sources whose records name volumes (a volume table's)."""
    from ... import catalog

    known = set(catalog.list_datasets())
    return {s["name"] for s in manifest.get("sources", [])
            if s["dataset"] in known and catalog.spec(s["dataset"]).row_unit == "volume"}


def volume_mixture(manifest: dict) -> bool:
    """Whether every source of the mixture is a volume table (its records name volumes)."""
    sources = manifest.get("sources", [])
    return bool(sources) and len(volume_sources(manifest)) == len(sources)


__all__ = ["M3D_VQA_COLUMNS", "RADFM_TOKENS", "VOLUME_FORMATS", "VOLUME_RECORD",
           "export_volumes", "m3d_row", "radfm_text", "volume_mixture", "volume_sources"]
