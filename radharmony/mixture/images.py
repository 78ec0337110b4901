"""A mixture's images through each source dataset's own pipeline and cache.

A record names its images by ``image_paths`` relative to its source's root. The pixels are
those of the source's image-level dataset, rebuilt from ``mixture.json`` (``sources[i]``:
``dataset`` key, ``root``, ``kwargs``) with the mixture's pipeline (one size for every
source) and the caller's cache folder: an image that is a row of the source's table is read
the way that dataset reads it (batched, out of the cache's pack when it has one); an image
the table has no row for (a VQA question's second view) goes through the same pipeline and
cache by path. Either way the array is the cache's quantized ``(S, S)`` letterboxed image,
so an export's PNG and a :class:`~radharmony.mixture.dataset.MixtureDataset` tensor are the
same pixels.

The key image of a record (LLaVA-1.5's one image, MAIRA-2's frontal) is
:func:`key_frontal`: the first PA, else the first AP, else the first other frontal view.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from ..errors import RadHarmonyError
from ..imaging.pipeline import STORAGE, DefaultTransform
from ..imaging.read import safe_path
from ..vqa.images import load_one

#: constructor arguments the mixture sets itself (a source's recorded ones are replaced)
OWN_KWARGS = frozenset({"base_image_dir", "transform", "cache_dir", "dtype", "level",
                        "max_images", "view_order", "prior", "packed", "output_cls",
                        "output_mask", "output_report", "output_bbox"})
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
    """The images of a mixture's sources as quantized arrays (see the module doc).

    Args:
        manifest: the mixture's ``mixture.json``
            (:func:`~radharmony.mixture.records.read_manifest`).
        size: the pipeline's output size (default: the manifest's, else 224).
        cache_dir: the image cache folder each source's dataset uses (None: no cache, every
            image decoded on each read).
        dtype: the dtype of the source datasets' tensors.
    """

    def __init__(self, manifest: dict, *, size: int | None = None, cache_dir=None,
                 dtype=None):
        import torch

        self.sources = {s["name"]: s for s in manifest.get("sources", [])}
        self.pipeline = DefaultTransform(size=image_size(manifest) if size is None else size)
        self.cache_dir = None if cache_dir is None else os.fspath(cache_dir)
        self.dtype = torch.float32 if dtype is None else dtype
        self._datasets: dict[str, object] = {}
        self._rows: dict[str, dict[str, int]] = {}
        self._paths: dict[str, list[str]] = {}  # each source's table paths, by row

    def source(self, name: str) -> dict:
        try:
            return self.sources[name]
        except KeyError:
            raise RadHarmonyError(f"A record names the source {name!r}, which the mixture "
                                  "manifest does not list", expected=f"one of "
                                  f"{sorted(self.sources)}", found=repr(name),
                                  fix="rebuild the mixture: records.parquet and mixture.json "
                                      "come from one build") from None

    def dataset(self, name: str):
        """Source ``name``'s image-level dataset (built once, from the manifest's entry)."""
        ds = self._datasets.get(name)
        if ds is None:
            from ..registry import get_dataset_class

            src = self.source(name)
            kwargs = {k: v for k, v in (src.get("kwargs") or {}).items() if k not in OWN_KWARGS}
            with warnings.catch_warnings():  # the build warned about the table already
                warnings.simplefilter("ignore")
                ds = get_dataset_class(src["dataset"])(
                    src["root"], **kwargs, transform=self.pipeline, cache_dir=self.cache_dir,
                    dtype=self.dtype)
            self._datasets[name] = ds
            rows: dict[str, int] = {}
            paths = ds.rows.paths.tolist()
            for j, p in enumerate(paths):
                rows.setdefault(p, j)
            self._rows[name], self._paths[name] = rows, paths
        return ds

    def one_path_each(self, name: str, rows: np.ndarray) -> list[list[str]]:
        """``[[path]]`` of source ``name``'s table rows ``rows``: the ``image_paths`` of
        records of one image each that :meth:`table_rows` found at those rows (the path
        found is the row's own text)."""
        paths = self._paths[name]
        return [[paths[r]] for r in rows.tolist()]

    def quantized(self, items: list[tuple[str, str]]) -> np.ndarray:
        """The quantized ``(n, S, S)`` images of ``items`` (``(source, image_path)`` pairs),
        in order."""
        out = np.empty((len(items), self.pipeline.size, self.pipeline.size),
                       STORAGE[self.pipeline.bits])
        by_source: dict[str, list[int]] = {}
        for j, (name, _) in enumerate(items):
            by_source.setdefault(name, []).append(j)
        for name, where in by_source.items():
            ds = self.dataset(name)
            rows = self._rows[name]
            listed = [j for j in where if items[j][1] in rows]
            if listed:
                idx = np.array([rows[items[j][1]] for j in listed], np.int64)
                out[listed] = self._table_rows(ds, idx)
            for j in where:
                if items[j][1] not in rows:
                    out[j] = self._by_path(ds, name, items[j][1])
        return out

    def tensor(self, items: list[tuple[str, str]], meanwhile=None) -> "torch.Tensor":
        """``(n, 1, S, S)`` in [-1, 1] of ``items``, in one of this process's reused batch
        buffers (a DataLoader worker's: a shared-memory slot, :mod:`radharmony.data.handoff`).
        A batch whose images are all rows of one source's table, lying in one pack, is
        converted straight out of the pack's memory map, on a helper thread while
        ``meanwhile(out)`` (the caller's work that does not read the pixels, given the tensor
        they are going to) runs, as the image-level batched read does; any other is gathered
        first. ``meanwhile`` is called once."""
        import torch

        s = self.pipeline.size
        shape = (len(items), 1, s, s)
        out = self._batch(shape) if items else torch.empty(shape, dtype=self.dtype)
        once = _once(meanwhile, out)
        names = {name for name, _ in items}
        if len(names) == 1:
            name = names.pop()
            ds, rows = self.dataset(name), self._rows[name]
            if ds.image_cache is not None and all(p in rows for _, p in items):
                return self._cached(ds, np.array([rows[p] for _, p in items], np.int64), out,
                                    once)
        if items:
            self.pipeline.to_tensor(self.quantized(items), self.dtype, out=out)
        once()
        return out

    def rows_tensor(self, name: str, rows: np.ndarray, meanwhile=None) -> "torch.Tensor":
        """:meth:`tensor` of source ``name``'s table rows ``rows`` (positions in its
        dataset, e.g. from :meth:`table_rows`)."""
        ds = self.dataset(name)
        if ds.image_cache is None or not len(rows):
            paths = ds.rows.paths
            return self.tensor([(name, paths[int(r)]) for r in rows], meanwhile)
        out = self._batch((len(rows), 1, self.pipeline.size, self.pipeline.size))
        return self._cached(ds, np.asarray(rows, np.int64), out, _once(meanwhile, out))

    def table_rows(self, names: list, codes: np.ndarray, paths) -> np.ndarray:
        """Each image's row in its source's table, -1 where the table has none (read by
        path): ``paths`` an Arrow array of image paths, ``codes`` each one's source as a
        position in ``names``. Vectorized, for a whole mixture at once."""
        import pyarrow as pa
        import pyarrow.compute as pc

        out = np.full(len(paths), -1, np.int64)
        for c, name in enumerate(names):
            where = np.flatnonzero(codes == c)
            if name is None or not len(where):
                continue
            self.dataset(name)
            rows = self._rows[name]
            found = pc.index_in(paths.take(pa.array(where)),
                                value_set=pa.array(list(rows), pa.string()))
            found = pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)
            table = np.fromiter(rows.values(), np.int64, len(rows))
            out[where] = np.where(found >= 0, table[np.maximum(found, 0)], -1)
        return out

    def _batch(self, shape: tuple) -> "torch.Tensor":
        """This process's next reused batch buffer (a DataLoader worker's: a shared-memory
        slot, else a new tensor)."""
        import torch

        from ..data import handoff

        out = handoff.own_batch(shape, self.dtype) if \
            torch.utils.data.get_worker_info() is None else handoff.worker_batch(shape,
                                                                                 self.dtype)
        return torch.empty(shape, dtype=self.dtype) if out is None else out  # no slot: new

    def _cached(self, ds, idx: np.ndarray, out, once) -> "torch.Tensor":
        """Table rows ``idx`` of ``ds`` (with a cache) into ``out``, converted straight out
        of the pack when they lie in one, ``once()`` run meanwhile."""
        from ..data import batches

        source, records, _, done = batches.cached_rows_ahead(
            ds, idx, out, stream=None, boxes=False, meanwhile=once)
        if done is None:
            self.pipeline.to_tensor(source, self.dtype, rows=records, out=out)
        once()
        return out

    @staticmethod
    def _table_rows(ds, idx: np.ndarray) -> np.ndarray:
        if ds.image_cache is not None:
            from ..data import batches

            return batches.read_quantized(ds, idx)[0]
        return np.stack([ds.load_image(int(i))[0] for i in idx])

    def _by_path(self, ds, name: str, rel: str) -> np.ndarray:
        """An image the source's table has no row for: the same pipeline and cache, by path."""
        return load_one(ds, self.source(name)["root"], rel)

    def file(self, name: str, rel: str) -> Path:
        """The absolute path of source ``name``'s image ``rel`` (refused outside its root)."""
        return safe_path(self.source(name)["root"], rel)


def _once(meanwhile, out):
    """``meanwhile(out)`` the first time the result is called, nothing after."""
    ran = []

    def once() -> None:
        if meanwhile is not None and not ran:
            ran.append(meanwhile(out))
    return once


__all__ = ["DEFAULT_SIZE", "SourceImages", "first_lateral", "image_size",
           "is_frontal", "key_frontal"]
