"""Export a dataset to sharded WebDataset tar files with a manifest.

Shards are plain POSIX tar files written with the standard library: members sorted by name,
fixed mtime, uid, gid and mode, so the same dataset and pipeline give the same bytes. Each
shard holds ``shard_size`` consecutive samples (the last one fewer); ``manifest.json`` beside
them records per shard its sample range, count, size and SHA-256, the samples that failed, and
the dataset fingerprint (key, number of samples, hash of the sample ids and of the table,
outputs, dtype, pipeline parameters) that decides whether an existing shard can be kept.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import hashlib
import io
import json
import os
import tarfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..version import __version__
from ..errors import RadHarmonyError, RowsDroppedWarning, check_choice
from ..imaging.pipeline import DefaultTransform
from .codec import ExportError, encode_members

MANIFEST = "manifest.json"
FORMAT = "radharmony-webdataset"
FORMAT_VERSION = 1
#: the mtime of every tar member (2000-01-01T00:00:00Z), for byte-reproducible shards
MTIME = 946684800
#: how many failures the raised error and the warning list
FIRST_N = 10


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


# -- one shard ------------------------------------------------------------------------------------
_STATE: dict[str, Any] = {}


def _init_worker(ds, transform, own_cache) -> None:
    import cv2

    cv2.setNumThreads(1)  # one process per core already
    _STATE.update(ds=ds, transform=transform, own_cache=own_cache)


def _sample(ds, transform, own_cache: bool, index: int, sample_id: str) -> dict[str, bytes]:
    if own_cache:
        arr, box = ds.load_image(index)  # through the dataset's cache when it has one
    else:
        arr, box = transform.encode(ds.image_file(index))
    sample: dict[str, Any] = {"sample_id": sample_id}
    ds.add_outputs(index, sample, box)
    outputs = {k: v for k, v in sample.items() if k not in ("sample_id", "img")}
    return encode_members(sample_key(index), sample_id, arr, outputs, bits=transform.bits)


def _tar_bytes(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), MTIME, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _write_shard(out_dir: str, name: str, start: int, stop: int, ids: list[str]) -> dict:
    entry, data = _shard(_STATE["ds"], _STATE["transform"], _STATE["own_cache"], name, start,
                         stop, ids)
    _save_shard(Path(out_dir) / name, data)
    return entry


def _save_shard(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _shard(ds, transform, own_cache: bool, name: str, start: int, stop: int,
           ids: list[str]) -> tuple[dict, bytes]:
    """The manifest entry and the tar bytes of shard ``name`` (rows ``start:stop``)."""
    members, failed = [], []
    for index, sid in zip(range(start, stop), ids):
        try:
            entry = _sample(ds, transform, own_cache, index, sid)
        except RadHarmonyError as exc:  # missing, empty, corrupt images; bad annotations
            failed.append({"index": index, "sample_id": sid,
                           "error": f"{type(exc).__name__}: {exc}"})
            continue
        members += sorted(entry.items())
    data = _tar_bytes(members)
    return {"name": name, "start": start, "stop": stop, "count": stop - start - len(failed),
            "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "failed": failed}, data


def _ray_shard(ds, transform, own_cache: bool, out_dir: str | None, name: str, start: int,
               stop: int, ids: list[str]) -> tuple[dict, bytes | None]:
    """A Ray task: the shard's entry, and its bytes unless it wrote the file to ``out_dir``."""
    import cv2

    cv2.setNumThreads(1)
    entry, data = _shard(ds, transform, own_cache, name, start, stop, ids)
    if out_dir is None:
        return entry, data
    _save_shard(Path(out_dir) / name, data)
    return entry, None


def _on_ray(ds, transform, own_cache: bool, out_dir: Path, todo, ids, *, address, num_workers,
            shared_fs):
    """Yield the manifest entry of every shard in ``todo``, written by Ray tasks (see
    :mod:`radharmony.data.precache_ray` for ``shared_fs``: whether ``out_dir`` and the cache
    folder are the same folders on every node)."""
    from ..data.precache_ray import cluster_cpus, ray_session

    if shared_fs not in (None, True, False):
        raise ExportError("shared_fs must be True, False or None", expected="a bool",
                          found=repr(shared_fs), fix="pass shared_fs=False")
    with ray_session(address, num_cpus=num_workers) as (ray, local):
        shared = local if shared_fs is None else shared_fs
        # off a shared filesystem the workers neither write shards nor touch the cache folder
        task = ray.remote(num_cpus=1)(_ray_shard)
        ds_ref = ray.put(ds)
        queue = iter(todo)
        pending: dict = {}

        def submit() -> None:
            item = next(queue, None)
            if item is not None:
                name, s, e = item
                pending[task.remote(ds_ref, transform, own_cache and shared,
                                    str(out_dir) if shared else None, name, s, e,
                                    ids[s:e])] = name
        try:
            for _ in range(2 * cluster_cpus(ray)):
                submit()
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                name = pending.pop(ready[0])
                try:
                    entry, data = ray.get(ready[0])
                except ray.exceptions.RayError as exc:
                    raise ExportError(f"The Ray task writing shard {name} failed",
                                      expected="every shard written",
                                      found=f"{type(exc).__name__}: "
                                      f"{str(exc).strip().splitlines()[-1][:300]}",
                                      fix="fix the cause and export again (written shards "
                                          "are kept)") from None
                path = out_dir / name
                if data is not None:
                    _save_shard(path, data)
                elif not path.is_file() or path.stat().st_size != entry["bytes"]:
                    raise ExportError(f"Shard {name} written by a Ray worker is not in "
                                      f"{out_dir} as the driver sees it",
                                      expected="the export folder shared by every node at "
                                      "the same path (shared_fs=True)", found=f"no intact "
                                      f"{path}", fix="pass shared_fs=False (the driver writes "
                                      "the shards), or export to a filesystem every node "
                                      "mounts at the same path")
                yield entry
                submit()
        finally:
            for ref in pending:
                ray.cancel(ref)


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


# -- the public call ------------------------------------------------------------------------------
def to_webdataset(ds, out_dir: str | os.PathLike, *, shard_size: int = 1000,
                  split: str | None = None, prefix: str | None = None, num_workers: int = 0,
                  progress: bool = True, dtype_bits: int | None = None,
                  on_error: str = "raise", engine: str = "local", address: str | None = None,
                  shared_fs: bool | None = None) -> dict:
    """Write ``ds`` as WebDataset tar shards ``<prefix>-000000.tar``, ... and ``manifest.json``.

    Per sample: the preprocessed image, losslessly at output size (PNG, 8- or 16-bit as the
    pipeline quantizes it), 2-D uint8 outputs (``mask``) as PNGs too, and a JSON with
    ``sample_id`` and every other requested output (see :mod:`radharmony.export.codec`).
    :func:`radharmony.export.decode_sample` turns a sample read by ``webdataset`` back into
    exactly ``ds[i]``.

    Args:
        ds: a dataset using the built-in pipeline (``transform=None`` or a DefaultTransform).
            Its cache is used (and filled) when it has one.
        out_dir: the export folder (created).
        shard_size: samples per shard.
        split: a name for this part of the data (``"train"``, ``"valid"``); recorded in the
            manifest and, unless ``prefix`` is given, part of the shard names
            (``<key>-<split>-000000.tar``). One folder holds one export (one manifest):
            write each split to its own folder.
        prefix: the shard file prefix (default: the dataset key, plus ``-<split>``).
        num_workers: processes writing shards in parallel (0: this process). With
            ``engine="ray"``: CPUs of the local Ray cluster started when none runs (0: all).
        progress: show a tqdm bar over shards.
        dtype_bits: 8 or 16 to store at another depth than the dataset's pipeline (the images
            are then encoded afresh, without the cache, and equal ``ds[i]`` of a dataset built
            with ``DefaultTransform(bits=dtype_bits)``); None keeps the pipeline's.
        on_error: what to do with samples whose image is missing or corrupt. ``"raise"``:
            every shard is still written (without them), the manifest lists them, then an
            :class:`ExportError` names them. ``"skip"``: they are left out, listed in the
            manifest and a :class:`RowsDroppedWarning` names them. Never silently dropped.
        engine: ``"local"`` (this process or ``num_workers`` processes) or ``"ray"``: one Ray
            task per shard on the cluster at ``address`` (None: the running one, else a local
            one); the shards are byte-identical to the local writer's.
        address: with ``engine="ray"``, the cluster to join (``"auto"``, ``"ray://head:10001"``).
        shared_fs: with ``engine="ray"``, whether ``out_dir`` (and the dataset's cache folder)
            are the same folders on every node: then the tasks write the shards (and use the
            cache); else they return the shard bytes and this process writes them. None: True
            on a local cluster, False on one with other nodes.

    Resuming: a shard whose file matches the SHA-256 the manifest recorded for the same
    dataset fingerprint, shard size and range is kept; shards that had failures are redone.

    Returns:
        the manifest (also written to ``out_dir/manifest.json``).

    Example:
        >>> from radharmony.export import to_webdataset  # doctest: +SKIP
        >>> manifest = to_webdataset(ds, "export/", num_workers=8)  # doctest: +SKIP
        >>> manifest["num_samples"], manifest["shards"][0]["name"]  # doctest: +SKIP
        (979, 'xraydar_multimodal-000000.tar')
    """
    if getattr(ds, "user_transform", None) is not None:
        raise ExportError(f"{type(ds).__name__} uses its own transform and cannot be exported",
                          expected="the built-in pipeline (transform=None or a "
                          "DefaultTransform)", found=type(ds.user_transform).__name__,
                          fix="build the dataset with transform=None (or "
                              "DefaultTransform(...)) for the export")
    if isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1:
        raise ExportError("shard_size must be a positive integer", expected="e.g. 1000",
                          found=repr(shard_size), fix="pass shard_size=1000")
    if on_error not in ("raise", "skip"):
        raise ExportError("on_error must be 'raise' or 'skip'", expected="'raise' (error "
                          "after writing, listing the failed samples) or 'skip' (record and "
                          "warn)", found=repr(on_error), fix="pass on_error='skip'")
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ExportError("num_workers must be 0 or a positive integer", expected="e.g. 8",
                          found=repr(num_workers), fix="pass num_workers=0 (in-process)")
    check_choice("engine", engine, ("local", "ray"), error=ExportError)
    if engine == "local" and (address is not None or shared_fs is not None):
        raise ExportError("address and shared_fs need engine='ray'", expected="engine='ray' "
                          "with them", found="engine='local'", fix="pass engine='ray'")
    transform = ds.default_transform
    own_cache = True
    if dtype_bits is not None and dtype_bits != transform.bits:
        if dtype_bits not in (8, 16):
            raise ExportError("dtype_bits must be 8, 16 or None", expected="8 or 16",
                              found=repr(dtype_bits), fix="pass dtype_bits=16 or leave None")
        transform, own_cache = dataclasses.replace(transform, bits=dtype_bits), False
    if split is not None and (not isinstance(split, str) or not split or "/" in split):
        raise ExportError("split must be a short name", expected="e.g. 'train' or 'valid'",
                          found=repr(split), fix="pass split='train'")
    prefix = prefix or (ds.spec.key if split is None else f"{ds.spec.key}-{split}")
    if "/" in prefix or "." in prefix:
        raise ExportError("prefix must be a file name stem", expected="no '/' and no '.'",
                          found=repr(prefix), fix="pass e.g. prefix='nih-train'")

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ids = ds.harmonized_df["sample_id"].tolist()
    fp = fingerprint(ds, transform)
    plan = [(f"{prefix}-{k:06d}.tar", s, min(s + shard_size, len(ds)))
            for k, s in enumerate(range(0, len(ds), shard_size))]
    old = _previous(out_dir, fp, prefix, shard_size)
    done: dict[str, dict] = {}
    for entry in plan:
        kept = _reusable(old, entry, out_dir)
        if kept is not None:
            done[entry[0]] = kept
    todo = [p for p in plan if p[0] not in done]

    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "prefix": prefix,
                "split": split, "shard_size": shard_size, "fingerprint": fp,
                "complete": False, "num_samples": 0, "shards": [], "failures": []}

    def save(complete: bool = False) -> dict:
        shards = [done[p[0]] for p in plan if p[0] in done]
        manifest.update(shards=shards, num_samples=sum(s["count"] for s in shards),
                        failures=[f for s in shards for f in s["failed"]], complete=complete)
        _write_manifest(out_dir, manifest)
        return manifest

    from tqdm.auto import tqdm

    bar = tqdm(total=len(plan), initial=len(plan) - len(todo), unit="shard",
               desc=f"exporting {prefix}", disable=not progress)
    save()
    try:
        if engine == "ray" and todo:
            for entry in _on_ray(ds, transform, own_cache, out_dir, todo, ids, address=address,
                                 num_workers=num_workers, shared_fs=shared_fs):
                done[entry["name"]] = entry
                save()
                bar.update(1)
        elif num_workers == 0 or len(todo) <= 1:
            _init_worker(ds, transform, own_cache)
            try:
                for name, s, e in todo:
                    done[name] = _write_shard(str(out_dir), name, s, e, ids[s:e])
                    save()
                    bar.update(1)
            finally:
                _STATE.clear()
        else:
            with cf.ProcessPoolExecutor(max_workers=min(num_workers, len(todo)),
                                        initializer=_init_worker,
                                        initargs=(ds, transform, own_cache)) as pool:
                futures = [pool.submit(_write_shard, str(out_dir), name, s, e, ids[s:e])
                           for name, s, e in todo]
                for fut in cf.as_completed(futures):
                    entry = fut.result()
                    done[entry["name"]] = entry
                    save()
                    bar.update(1)
    finally:
        bar.close()
    failures = [f for p in plan for f in done[p[0]]["failed"]]
    manifest = save(complete=not failures or on_error == "skip")
    if failures:
        listing = "; ".join(f"{f['sample_id']} ({f['error'][:120]})"
                            for f in failures[:FIRST_N])
        more = f" and {len(failures) - FIRST_N} more" if len(failures) > FIRST_N else ""
        if on_error == "raise":
            raise ExportError(f"{len(failures)} of {len(ds)} samples could not be exported to "
                              f"{out_dir} (all are listed under 'failures' in {MANIFEST})",
                              expected="every image readable", found=listing + more,
                              fix="repair or remove those images and export again (intact "
                                  "shards are kept), or pass on_error='skip'")
        warnings.warn(f"to_webdataset: {len(failures)} of {len(ds)} samples were left out of "
                      f"the export in {out_dir} (listed under 'failures' in {MANIFEST}): "
                      f"{listing}{more}", RowsDroppedWarning, stacklevel=2)
    return manifest


__all__ = ["MANIFEST", "fingerprint", "read_manifest", "sample_key", "shard_keys",
           "to_webdataset"]
