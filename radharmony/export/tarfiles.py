"""Writing one shard: its samples encoded, a byte-reproducible tar, written atomically.

Shards are plain POSIX tar files written with the standard library: members sorted by name,
fixed mtime, uid, gid and mode, so the same dataset and pipeline give the same bytes. A shard is
written in this process, in a worker process (:func:`_init_worker` + :func:`_write_shard`) or
by a Ray task (:func:`_on_ray`).
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path
from typing import Any

from ..errors import RadHarmonyError
from .codec import ExportError, encode_members
from .manifest import sample_key

#: the mtime of every tar member (2000-01-01T00:00:00Z), for byte-reproducible shards
MTIME = 946684800


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
