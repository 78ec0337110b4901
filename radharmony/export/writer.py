"""Export a dataset to sharded WebDataset tar files with a manifest.

Each shard holds ``shard_size`` consecutive samples (the last one fewer), written as a
byte-reproducible tar (:mod:`radharmony.export.tarfiles`); ``manifest.json`` beside them
(:mod:`radharmony.export.manifest`) records per shard its sample range, count, size and
SHA-256, the samples that failed, and the dataset fingerprint that decides whether an existing
shard can be kept.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import os
import warnings
from pathlib import Path

from ..errors import RowsDroppedWarning, check_choice
from .codec import ExportError
from .manifest import (FORMAT, FORMAT_VERSION, MANIFEST, _previous, _reusable, _write_manifest,
                       fingerprint, read_manifest, sample_key, shard_keys)
from .tarfiles import _STATE, _init_worker, _on_ray, _write_shard

#: how many failures the raised error and the warning list
FIRST_N = 10


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

    Examples:
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
