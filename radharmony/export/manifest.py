"""The manifest of an export: shard keys, the dataset fingerprint, reading and resuming.

``manifest.json`` records per shard its sample range, count, size and SHA-256, the samples that
failed, and the dataset fingerprint (key, number of samples, hash of the sample ids and of the
table, outputs, dtype, pipeline parameters) that decides whether an existing shard can be kept.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..version import __version__
from ..imaging.pipeline import DefaultTransform
from .codec import ExportError

MANIFEST = "manifest.json"
FORMAT = "radharmony-webdataset"
FORMAT_VERSION = 1


def sample_key(index: int) -> str:
    """The WebDataset key of dataset row ``index`` (digits only, no dots)."""
    return f"{index:09d}"


def shard_keys(entry: dict) -> list[str]:
    """The keys a manifest shard entry holds, in tar order (failed rows left out)."""
    failed = {f["index"] for f in entry.get("failed", [])}
    return [sample_key(i) for i in range(entry["start"], entry["stop"]) if i not in failed]


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _table_sha256(df: pd.DataFrame) -> str:
    text = df.astype(str)  # nested cells (boxes, spans) hash by their printed form
    hashed = pd.util.hash_pandas_object(text, index=False).to_numpy(np.uint64)
    h = hashlib.sha256(",".join(map(str, df.columns)).encode())
    h.update(hashed.tobytes())
    return h.hexdigest()


def fingerprint(ds, transform: DefaultTransform) -> dict:
    """What the exported bytes depend on, as JSON (compared on resume)."""
    ids = ds.harmonized_df["sample_id"].tolist()
    sel = getattr(ds, "box_selection", None)
    return {
        "key": ds.spec.key, "class": f"{type(ds).__module__}.{type(ds).__qualname__}",
        "num_samples": len(ds),
        "sample_ids_sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest(),
        "table_sha256": _table_sha256(ds.harmonized_df),
        "outputs": sorted(ds.outputs), "dtype": str(ds.dtype).removeprefix("torch."),
        "pipeline": transform.params(),
        "options": {"bbox_annotator": getattr(sel, "annotator", None),
                    "bbox_merge_iou": getattr(sel, "merge_iou", None),
                    "uncertain": getattr(ds, "uncertain", None)},
        "radharmony_version": __version__,
    }


# -- the manifest ---------------------------------------------------------------------------------
def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest of an export: ``path`` is the export folder or its ``manifest.json``."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST
    fix = "pass the folder to_webdataset wrote (it holds manifest.json)"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ExportError(f"No export manifest at {path}", expected=f"{MANIFEST} written by "
                          "radharmony.export.to_webdataset", found="no such file",
                          fix=fix) from None
    except (OSError, ValueError) as exc:
        raise ExportError(f"{path} is not a readable export manifest", expected="JSON written "
                          "by to_webdataset", found=f"{type(exc).__name__}: {exc}",
                          fix=fix) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ExportError(f"{path} is not a radharmony WebDataset manifest",
                          expected=f"format {FORMAT!r}", found=repr(doc.get("format")
                                                                    if isinstance(doc, dict)
                                                                    else type(doc).__name__),
                          fix=fix)
    return doc


def _write_manifest(out_dir: Path, manifest: dict) -> None:
    path = out_dir / MANIFEST
    tmp = path.with_name(f".{MANIFEST}.tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, path)


def _reusable(old: dict | None, plan_entry: tuple[str, int, int], out_dir: Path) -> dict | None:
    """The old manifest's entry for this shard when its file is intact and complete."""
    if old is None:
        return None
    name, start, stop = plan_entry
    entry = old.get("_by_name", {}).get(name)
    if entry is None or (entry["start"], entry["stop"]) != (start, stop) or entry["failed"]:
        return None
    path = out_dir / name
    if not path.is_file() or path.stat().st_size != entry["bytes"]:
        return None
    return entry if _sha256_file(path) == entry["sha256"] else None


def _previous(out_dir: Path, fp: dict, prefix: str, shard_size: int) -> dict | None:
    if not (out_dir / MANIFEST).is_file():
        return None
    try:
        old = read_manifest(out_dir)
    except ExportError:
        return None  # unreadable: everything is rewritten
    old["_by_name"] = {e["name"]: e for e in old.get("shards", [])}
    same = old.get("fingerprint") == fp and old.get("shard_size") == shard_size and \
        old.get("prefix") == prefix
    if not same:  # another dataset, pipeline or layout: the folder's old shards are stale
        for name in old["_by_name"]:
            if "/" not in name and name.endswith(".tar"):
                (out_dir / name).unlink(missing_ok=True)
        return None
    return old
