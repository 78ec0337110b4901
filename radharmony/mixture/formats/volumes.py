"""The volumes a 3-D trainer's file names, written at the trainer's preset
(:mod:`radharmony.volumes.presets`) from the source datasets' volume cache, and the manifest
beside them.

Each record's volume (its ``sample_id`` in its source's table) is read by its dataset
(:meth:`radharmony.data.volumes.VolumeDataset.load_volume`: the dataset's own reader and
quirks, the volume cache when ``cache_dir`` is given) at the preset, and written once however
many records name it, as one of:

* ``"npy"``: the preset's output array (``np.save``: M3D-LaMed's and RadFM's ``.npy``, or the
  encoder-input arrays of CT-CHAT);
* ``"nifti"``: the preset's output as a float32 gzip NIfTI, the output's geometry in its
  header (index (d, h, w) -> RAS mm);
* ``"slices"``: one 8-bit PNG per slice along the output's first axis (a video's frames, as
  Qwen2.5-VL takes one), in a folder per volume.

References are ``<source>/<volume>.<ext>`` relative to the volume folder. ``volumes.json``
beside the written file records the preset (spacing, size, orientation, the intensity mapping)
and each volume's shape, spacing and affine. ``workers`` processes (or Ray tasks) write the
volumes; the bytes are the same either way.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from ...export.codec import ExportError
from ...files import atomic_write

KINDS = {"npy": ".npy", "nifti": ".nii.gz", "slices": ""}
MANIFEST = "volumes.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def volume_name(sample_id: str) -> str:
    """A file stem for a volume's ``sample_id`` (``"ct_rate_train:train_1_a_2"`` ->
    ``"train_1_a_2"``): the native id, characters outside ``[A-Za-z0-9._-]`` as ``_``."""
    return _UNSAFE.sub("_", str(sample_id).split(":", 1)[-1]).strip("._") or "volume"


def intensity(preset) -> dict:
    """The preset's intensity mapping as a manifest states it."""
    own = preset.window != "minmax"  # min-max: each volume's own range, no fixed bounds
    return {"window": preset.window, "lo": preset.lo if own else None,
            "hi": preset.hi if own else None, "out": list(preset.out), "clip": preset.clip,
            "pad": preset.pad}


# -- one volume (in this process or a worker) ---------------------------------------------------
_STATE: dict = {}


def _init(sources: dict, preset, cache_dir) -> None:
    _STATE.update(sources=sources, preset=preset, cache_dir=cache_dir, open={})


def _dataset(source: str):
    """The source's dataset at the preset (opened once per process) and its id -> row."""
    got = _STATE["open"].get(source)
    if got is None:
        from ..holdout import open_dataset

        s = _STATE["sources"][source]
        kwargs = {**(s.get("kwargs") or {}), "preset": _STATE["preset"],
                  "cache_dir": _STATE["cache_dir"]}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = open_dataset(s["dataset"], s["root"], kwargs)
        ids = ds.harmonized_df["sample_id"].astype(str).tolist()
        got = _STATE["open"][source] = (ds, {k: i for i, k in enumerate(ids)})
    return got


def write_volume(job: tuple) -> tuple[str, dict]:
    """``job`` = ``(source, sample_id, kind, path)``: the volume written at ``path`` (plus the
    kind's suffix); returns ``(path, its manifest entry)``."""
    source, sample_id, kind, path = job
    ds, index = _dataset(source)
    if sample_id not in index:
        raise ExportError(f"Record volume {sample_id!r} is not in source {source!r}'s table",
                          expected="the table the mixture was built from",
                          found=f"{len(index)} rows without it",
                          fix="rebuild the mixture (the source changed since)")
    array, affine = ds.load_volume(index[sample_id])
    array = np.asarray(array, np.float32)
    spatial = array.shape[1:] if ds.preset.layout == "CDHW" else \
        (array.shape[3], *array.shape[1:3])
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if kind == "npy":
        atomic_write(out, lambda fh: np.save(fh, array))
    elif kind == "nifti":
        import nibabel as nib

        ras = np.diag([-1.0, -1.0, 1.0, 1.0]) @ affine
        img = nib.Nifti1Image(array[0] if array.shape[0] == 1 else np.moveaxis(array, 0, -1),
                              ras)
        img.header.set_xyzt_units("mm")
        tmp = out.with_name(f".{out.name}.tmp{os.getpid()}.nii.gz")
        nib.save(img, tmp)
        os.replace(tmp, out)
    else:
        _slices(array[0] if ds.preset.layout == "CDHW" else np.moveaxis(array[0], -1, 0), out,
                ds.preset)
    spacing = np.linalg.norm(np.asarray(affine)[:3, :3], axis=0)
    return str(out), {"shape": list(array.shape), "spatial": [int(n) for n in spatial],
                      "spacing_mm": [round(float(s), 6) for s in spacing],
                      "affine": np.round(np.asarray(affine), 6).tolist(),
                      "min": float(array.min()), "max": float(array.max())}


def _slices(volume: np.ndarray, folder: Path, preset) -> None:
    """One 8-bit PNG per slice of ``volume`` (D, H, W), the preset's range to 0-255."""
    from ...export.codec import png_bytes

    a, b = min(preset.out), max(preset.out)
    u8 = np.clip(np.rint((volume - a) / (b - a) * 255.0), 0, 255).astype(np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    for k, plane in enumerate(u8):
        data = png_bytes(np.ascontiguousarray(plane), where="volume slices")
        atomic_write(folder / f"{k:03d}.png", lambda fh, d=data: fh.write(d))


def _ray_write(args: tuple, job: tuple):
    if _STATE.get("args") != args:
        _init(*args)
        _STATE["args"] = args
    return write_volume(job)


class VolumeWriter:
    """The volumes of one export: :meth:`ref` names a record's volume (queued once),
    :meth:`flush` writes the queued ones (here, in ``workers`` processes, or as Ray tasks)."""

    def __init__(self, manifest: dict, folder: Path, *, preset, kind: str, cache_dir=None,
                 workers: int = 0, engine: str = "local"):
        self.folder, self.preset, self.kind = Path(folder), preset, kind
        self.sources = {s["name"]: s for s in manifest.get("sources", [])}
        self.args = (self.sources, preset, None if cache_dir is None else str(cache_dir))
        self.workers, self.engine = workers or 0, engine
        self.pending: list[tuple] = []
        self.seen: set = set()
        self.volumes: dict = {}
        self._pool = self._ray = self._session = None

    def ref(self, source: str, sample_id: str) -> str:
        """The record's volume, relative to the volume folder."""
        rel = f"{source}/{volume_name(sample_id)}{KINDS[self.kind]}"
        if rel not in self.seen:
            self.seen.add(rel)
            self.pending.append((source, sample_id, self.kind, str(self.folder / rel)))
        return rel

    def flush(self) -> None:
        todo, self.pending = self.pending, []
        if not todo:
            return
        if self.engine == "ray":
            if self._ray is None:
                from ...data.precache_ray import ray_session

                self._session = ray_session(None, num_cpus=self.workers)
                ray, _ = self._session.__enter__()
                self._ray = (ray, ray.remote(num_cpus=1)(_ray_write))
            ray, task = self._ray
            results = ray.get([task.remote(self.args, j) for j in todo])
        elif self.workers:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(self.workers, initializer=_init,
                                                 initargs=self.args)
            results = self._pool.map(write_volume, todo, chunksize=max(1, len(todo) //
                                                                        (4 * self.workers)))
        else:
            if "open" not in _STATE or _STATE.get("args") != self.args:
                _init(*self.args)
                _STATE["args"] = self.args
            results = map(write_volume, todo)
        for path, meta in results:
            self.volumes[os.path.relpath(path, self.folder)] = meta

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._session is not None:
            self._session.__exit__(None, None, None)
            self._ray = self._session = None

    def write_manifest(self, dest: Path, fmt: str) -> Path:
        """``volumes.json`` beside ``dest``: the format, the preset and every volume."""
        p = self.preset
        doc = {"format": fmt, "folder": str(self.folder), "kind": self.kind,
               "preset": {"name": p.name, "orientation": p.orientation,
                          "spacing_mm": None if p.spacing is None else list(p.spacing),
                          "size": list(p.size), "fit": p.fit, "layout": p.layout,
                          "channels": p.channels, "intensity": intensity(p)},
               "volumes": dict(sorted(self.volumes.items()))}
        path = dest.parent / MANIFEST
        atomic_write(path, lambda fh: fh.write(json.dumps(doc, indent=1).encode()))
        return path


__all__ = ["KINDS", "MANIFEST", "VolumeWriter", "intensity", "volume_name", "write_volume"]
