"""A mixture's images through the pipeline and cache their source datasets use, by path.

A record names its images by ``image_paths`` relative to its source's image root. The build
writes each source's resolved image root and cache key mode into the mixture's columns
(:mod:`radharmony.mixture.columns`), so reading needs no source dataset and no metadata: each
image is looked up in the caller's cache folder (its pack first, then its loose entry) under
the key the source's own dataset gives that file with the mixture's pipeline (one size for
every source), and decoded and stored on a miss. The array is the cache's quantized
``(S, S)`` letterboxed image, so an export's PNG, a source dataset's sample and a
:class:`~radharmony.mixture.dataset.MixtureDataset` tensor are the same pixels.

The key image of a record (LLaVA-1.5's one image, MAIRA-2's frontal) is
:func:`key_frontal`: the first PA, else the first AP, else the first other frontal view.
"""

from __future__ import annotations

import os
import stat
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..errors import RadHarmonyError
from ..imaging.ahead import levels_ahead
from ..imaging.cache import ImageCache
from ..imaging.pipeline import STORAGE, DefaultTransform
from ..imaging.read import safe_path
from ..vqa.images import load_one
from .columns import manifest_reading

#: the default image size when the manifest's images are ``original``
DEFAULT_SIZE = 224


def is_frontal(view) -> bool:
    """A frontal view: ``PA``, ``AP`` or a name beginning with either (``AP SUPINE``), or
    ``FRONTAL``."""
    if not isinstance(view, str):
        return False
    v = view.strip().upper()
    return v == "FRONTAL" or v[:2] in ("PA", "AP")


def key_frontal(views) -> int | None:
    """The position of a record's key image: the first PA, else the first AP, else the first
    other frontal view; a single image whose view is unknown (None) is its own key image;
    None when the record has no frontal image."""
    views = list(views or ())
    for want in ("PA", "AP"):  # canonical views first: one C-speed scan each
        if want in views:
            return views.index(want)
    for want in ("PA", "AP"):
        for j, v in enumerate(views):
            if isinstance(v, str) and v.strip().upper() == want:
                return j
    for j, v in enumerate(views):
        if is_frontal(v):
            return j
    if len(views) == 1 and views[0] is None:
        return 0
    return None


def first_lateral(views) -> int | None:
    """The position of the first lateral view (``LATERAL``, ``LL``, ``RL``), or None."""
    for j, v in enumerate(views or ()):
        if isinstance(v, str) and v.strip().upper() in ("LATERAL", "LL", "RL", "LAT"):
            return j
    return None


def image_size(manifest: dict, images: str | None = None) -> int:
    """The pixel size of the mixture's cached images (``images.size``; 224 when the manifest's
    images are ``original``)."""
    info = manifest.get("images") or {}
    size = info.get("size") if info.get("mode") == "cache" else None
    size = DEFAULT_SIZE if size is None else size
    if isinstance(size, bool) or not isinstance(size, int) or size < 8:
        raise RadHarmonyError("The mixture manifest's image size is not usable",
                              expected="images.size a whole number of pixels (>= 8)",
                              found=repr(size), fix="rebuild the mixture (radharmony mix build)")
    return size


class SourceImages:
    """The images of a mixture's records as quantized arrays, read by path (see the module
    doc) with no source dataset opened: each source's image root and cache key mode come
    from the mixture's columns (:mod:`radharmony.mixture.columns`, written at build time).

    Args:
        manifest: the mixture's ``mixture.json``
            (:func:`~radharmony.mixture.records.read_manifest`).
        reading: source name -> ``{"image_root", "cache_key"}`` (the columns' ``sources``;
            None: :func:`~radharmony.mixture.columns.manifest_reading`).
        size: the pipeline's output size (default: the manifest's, else 224).
        cache_dir: the image cache folder (None: no cache, every image decoded on each read).
        dtype: the dtype of the tensors.
    """

    def __init__(self, manifest: dict, reading: dict | None = None, *, size: int | None = None,
                 cache_dir=None, dtype=None):
        import torch

        self.reading = manifest_reading(manifest) if reading is None else reading
        self.pipeline = DefaultTransform(size=image_size(manifest) if size is None else size)
        self.cache_dir = None if cache_dir is None else os.fspath(cache_dir)
        self.dtype = torch.float32 if dtype is None else dtype
        self._readers: dict[str, SimpleNamespace] = {}

    def reader(self, name: str) -> SimpleNamespace:
        """Source ``name``'s ``image_cache`` (None without a cache folder), ``pipeline`` and
        ``root``: what :func:`~radharmony.vqa.images.load_one` reads an image with, the cache
        the source's own dataset keys (its pipeline's parameters and key mode)."""
        found = self._readers.get(name)
        if found is None:
            try:
                src = self.reading[name]
            except KeyError:
                raise RadHarmonyError(f"A record names the source {name!r}, which the "
                                      "mixture's columns do not list", expected=f"one of "
                                      f"{sorted(self.reading)}", found=repr(name),
                                      fix="rebuild the mixture: its files come from one build"
                                      ) from None
            cache = None if self.cache_dir is None else ImageCache(
                self.cache_dir, self.pipeline.params(), key=src.get("cache_key", "identity"))
            found = SimpleNamespace(image_cache=cache, pipeline=self.pipeline,
                                    root=src["image_root"], dirs={}, packs_stamp=-1)
            self._readers[name] = found
        return found

    def quantized(self, items: list[tuple[str, str]]) -> np.ndarray:
        """The quantized ``(n, S, S)`` images of ``items`` (``(source, image_path)`` pairs),
        in order, each through the cache (decoded and stored on a miss): the images lying in
        the cache's packs are found with one lookup per batch and copied out of the packs."""
        out = np.empty((len(items), self.pipeline.size, self.pipeline.size),
                       STORAGE[self.pipeline.bits])
        by_source: dict[str, list[int]] = {}
        for j, (name, _) in enumerate(items):
            by_source.setdefault(name, []).append(j)
        for name, where in by_source.items():
            r = self.reader(name)
            missed = where if r.image_cache is None else \
                _from_packs(r, [items[j][1] for j in where], where, out)
            for j in missed:  # a loose entry, or decoded and stored
                out[j] = load_one(r, r.root, items[j][1])
        return out

    def tensor(self, items: list[tuple[str, str]], *, meanwhile=None) -> "torch.Tensor":
        """``(n, 1, S, S)`` in [-1, 1] of ``items``, in one of this process's reused batch
        buffers (a DataLoader worker's: a shared-memory slot, :mod:`radharmony.data.handoff`).
        ``meanwhile()``: the caller's work that reads no pixel, run while the batch of one pack
        is converted on the process's helper thread (:func:`~radharmony.imaging.ahead.
        levels_ahead`, as the image-level reader does), else after the conversion."""
        import torch

        s = self.pipeline.size
        shape = (len(items), 1, s, s)
        out = self._batch(shape) if items else torch.empty(shape, dtype=self.dtype)
        whole = self._one_pack(items)
        join = None if whole is None else levels_ahead(whole[0], self.dtype, whole[1], out)
        try:
            if join is not None and meanwhile is not None:
                meanwhile()
        finally:
            if join is not None:
                join()  # the caller's share, then the helper's last piece
        if join is None:
            if whole is not None:  # converted straight out of the pack's memory map
                self.pipeline.to_tensor(whole[0], self.dtype, rows=whole[1], out=out)
            elif items:
                self.pipeline.to_tensor(self.quantized(items), self.dtype, out=out)
            if meanwhile is not None:
                meanwhile()
        return out

    def _one_pack(self, items: list[tuple[str, str]]):
        """``(pack records, rows)`` when every image of ``items`` is a sound record of one
        pack of one source's cache (the usual batch of a packed cache), else None."""
        names = {name for name, _ in items}
        if len(names) != 1:
            return None
        r = self.reader(names.pop())
        if r.image_cache is None:
            return None
        packs, pack_of, row_of = _locate(r, [rel for _, rel in items])
        if not len(packs) or (pack_of != pack_of[0]).any() or pack_of[0] < 0:
            return None
        pack = packs[int(pack_of[0])]
        return (pack.data, row_of) if pack.check(row_of).all() else None

    def _batch(self, shape: tuple) -> "torch.Tensor":
        """This process's next reused batch buffer (a DataLoader worker's: a shared-memory
        slot, else a new tensor)."""
        import torch

        from ..data import handoff

        out = handoff.own_batch(shape, self.dtype) if \
            torch.utils.data.get_worker_info() is None else handoff.worker_batch(shape,
                                                                                 self.dtype)
        return torch.empty(shape, dtype=self.dtype) if out is None else out  # no slot: new

    def file(self, name: str, rel: str) -> Path:
        """The absolute path of source ``name``'s image ``rel`` (refused outside its root)."""
        return safe_path(self.reader(name).root, rel)




#: resolved directories remembered per source and process (cleared past this many)
MAX_DIRS = 500_000


def _resolved(reader, rel: str) -> tuple[str, os.stat_result | None]:
    """``(real path, lstat)`` of ``rel`` under the source's root, each directory resolved and
    checked to lie inside the root once per process (as a dataset's file table does); the file
    itself is ``lstat``-ed on every read, and a symlinked file, or a path with a part
    beginning with ``.`` (``.``, ``..``, a hidden name), takes
    :func:`~radharmony.imaging.read.safe_path`'s exact route every time."""
    dirs = reader.dirs
    head, _, name = rel.rpartition("/") if isinstance(rel, str) else ("", "", "")
    real_dir = dirs.get(head)
    if real_dir is None and name and "/." not in f"/{rel}":
        if len(dirs) > MAX_DIRS:
            dirs.clear()
        real_dir = dirs[head] = os.path.dirname(os.fspath(safe_path(reader.root,
                                                                    f"{head}/_" if head
                                                                    else "_")))
    if real_dir is not None and name and name[0] != ".":
        full = f"{real_dir}/{name}"
        try:
            st = os.lstat(full)
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            return full, st
    return os.fspath(safe_path(reader.root, rel)), None


def _keys(reader, rels: list[str]) -> list[str]:
    """The cache keys of the images ``rels`` of one source (see :func:`_resolved`)."""
    key = reader.image_cache.key
    return [key(full, resolved=True, st=st) for full, st in map(partial(_resolved, reader),
                                                               rels)]


def _locate(reader, rels: list[str]):
    """:meth:`~radharmony.imaging.cache.ImageCache.locate` of the images ``rels``, the packs
    folder listed again only when it changed since this process last looked (one ``stat``)."""
    cache = reader.image_cache
    stamp = cache.packs_stamp()
    rescan, reader.packs_stamp = stamp != reader.packs_stamp, stamp
    return cache.locate(_keys(reader, rels), rescan=rescan)


def _from_packs(reader, rels: list[str], where: list[int], out: np.ndarray) -> list[int]:
    """Copy the images ``rels`` of one source that lie in its cache's packs into
    ``out[where]``, one lookup and one read per pack for the whole batch (a record whose
    checksum fails is left to the per-image path, which warns); the positions of the rest."""
    packs, pack_of, row_of = _locate(reader, rels)
    where = np.asarray(where, np.int64)
    missed = [int(j) for j in where[pack_of < 0]]
    for p, pack in enumerate(packs):
        hit = np.flatnonzero(pack_of == p)
        if not len(hit):
            continue
        dest = where[hit]
        if len(dest) == len(out) and (np.diff(dest) == 1).all() and dest[0] == 0:
            _, ok = pack.read(row_of[hit], out=out)  # the whole batch: straight into out
        else:
            arr, ok = pack.read(row_of[hit])
            out[dest] = arr  # a record failing its checksum is read again below
        missed.extend(int(j) for j in dest[~ok])
    return missed


__all__ = ["DEFAULT_SIZE", "SourceImages", "first_lateral", "image_size",
           "is_frontal", "key_frontal"]
