"""Reading a dataset's images and samples: the image-and-sample half of
:class:`~radharmony.data.dataset.BaseRadiologicalDataset` (a mixin; the class itself builds the
table these methods read through ``self.rows``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from . import batches, precache, sampling
from .filetable import FileTable
from .shared import SharedImageWatch
from ..errors import ImageReadError, PathSafetyError
from ..imaging.geometry import Letterbox


class SampleReads:
    """Images, cache keys and samples of a dataset's rows (see
    :class:`~radharmony.data.dataset.BaseRadiologicalDataset`)."""

    # -- images -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.rows.ids)

    @property
    def sample_ids(self) -> np.ndarray:
        """Every sample's ``sample_id``, in order."""
        return self.rows.ids

    def image_root(self, index: int) -> Path:
        """The folder sample ``index``'s ``image_path`` is relative to."""
        return self.rows.roots[index] if self.rows.roots is not None else self.base_image_dir

    def image_file(self, index: int) -> Path:
        """The absolute path of sample ``index``'s image (refusing paths outside the root;
        directories are resolved once per dataset build, see
        :mod:`radharmony.data.filetable`)."""
        return self._file_table().file(int(self._file_rows[index]))

    def load_image(self, index: int) -> tuple[np.ndarray, Letterbox]:
        """``(quantized (size, size) array, Letterbox)`` through the cache when enabled.
        Cached or not, the file's identity is read first (one ``lstat``), which tells the
        build's :class:`~radharmony.data.shared.SharedImageWatch` which file the row reads."""
        try:
            path, key = batches.identify(self, index)
        except OSError:  # absent, a loop, a name too long: the standard error names it
            return self.pipeline.encode(self.image_file(index))
        if self.image_cache is None:
            return self.pipeline.encode(path)
        return batches.load_one(self, index, path, key)

    def cache_key(self, index: int) -> str:
        """Sample ``index``'s cache key: derived once per dataset build and again only when
        the file's size, mtime, ctime or inode changed (one ``lstat`` per call)."""
        return batches.identify(self, index)[1]

    def cache_keys(self) -> list[str]:
        """The cache key of every sample's image (one ``stat`` each)."""
        return precache.cache_keys(self)

    def pre_cache(self, num_workers: int = 0, *, progress: bool = True, engine: str = "local",
                  address: str | None = None) -> list[str]:
        """Decode and cache every image not cached yet, then consolidate them into a pack
        that :class:`radharmony.CachedLoader` reads a batch at a time.

        Safe to run from several processes at once and to interrupt (finished images are
        kept). Entries are keyed by file identity, so every split and fold of the dataset
        shares them: pre-cache the full dataset once. Returns the samples' cache keys. (For a
        run that records failures instead of stopping, see
        :func:`radharmony.data.precache.pre_cache`.)

        Args:
            num_workers: decoding processes (DataLoader workers); 0 decodes in this process.
                With ``engine="ray"``: CPUs of the local Ray cluster (0: every core).
            progress: show tqdm progress bars.
            engine: ``"local"`` or ``"ray"`` (decode on a Ray cluster, ``pip install
                radharmony[ray]``; same entries and pack, see ``docs/scaling.md``).
            address: with ``engine="ray"``, the cluster to join (None: a local one).
        """
        return precache.pre_cache(self, num_workers=num_workers, progress=progress,
                                  engine=engine, address=address).keys

    # -- samples ------------------------------------------------------------------------------
    def __getitem__(self, index: int) -> dict:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        index = int(index) % len(self)
        sid = self.rows.ids[index]
        try:
            if self.user_transform is None:
                arr, box = self.load_image(index)
                return self.finish(self.assemble(index, self.pipeline.to_tensor(arr, self.dtype),
                                                 box))
            try:  # the watch learns the file here too
                path = batches.identify(self, index)[0]
            except OSError:
                path = str(self.image_file(index))  # the user's transform reports it
            sample = self.assemble(index, path, None)
            sample = self.user_transform(sample)
            sample["img"] = sampling.as_tensor(sample["img"], self.dtype)
            return self.finish(sample)
        except (ImageReadError, PathSafetyError) as exc:
            raise type(exc)(f"Sample {sid}: {exc.what}", expected=exc.expected,
                            found=exc.found, fix=exc.fix) from None
        except Exception as exc:  # e.g. a user transform's own error: keep it, add where
            if hasattr(exc, "add_note"):  # Python 3.11+
                exc.add_note(f"radharmony: while loading sample {sid} "
                             f"({self.image_root(index) / self.rows.paths[index]})")
            raise

    def __getitems__(self, indices) -> list[dict]:
        """The samples of ``indices``, read as one batch: ``DataLoader(ds, batch_size=B)``
        calls this, and the batch's cached images are gathered from the pack at once. The
        samples' ``img`` are views into one batch tensor, which :func:`radharmony.collate`
        returns without copying; the default collate stacks them as usual."""
        n = len(self)
        for i in indices:
            if not -n <= i < n:
                raise IndexError(f"index {i} out of range for {n} samples")
        if self.image_cache is None or self.user_transform is not None or not len(indices):
            return [self[i] for i in indices]
        return batches.read_samples(self, [int(i) % n for i in indices])

    def finish(self, sample: dict) -> dict:
        """Run :attr:`sample_transform` on an assembled sample (MONAI MetaTensors are turned
        back into plain tensors; ``img`` keeps the dataset's dtype)."""
        if self.sample_transform is None:
            return sample
        return sampling.after_transform(self.sample_transform(sample), self.dtype)

    def assemble(self, index: int, img, letterbox: Letterbox | None,
                 given: dict | None = None) -> dict:
        """The sample of row ``index`` around an image tensor (outputs added through
        :meth:`add_outputs`; ``given``: outputs a batched read computed already, from
        :meth:`batch_outputs`)."""
        return sampling.assemble(self, index, img, letterbox, given)

    def batch_outputs(self, indices: np.ndarray) -> dict[str, torch.Tensor]:
        """Outputs a batched read computes for rows ``indices`` at once: one tensor per key,
        whose rows become the samples' values (and collate back to that tensor, no stack);
        :meth:`add_outputs` leaves a key it finds in the sample as it is. The default gives
        ``cls`` and ``cls_mask``; override both methods together, so a batch equals its
        samples read one by one."""
        return sampling.batch_outputs(self, indices)

    def add_outputs(self, index: int, sample: dict, letterbox: Letterbox | None) -> None:
        """Add the requested outputs for row ``index`` (override to add dataset-specific ones;
        ``letterbox`` maps source pixels to output pixels, None under a user transform)."""
        sampling.standard_outputs(self, index, sample, letterbox)

    def source_mask(self, index: int) -> np.ndarray:
        """Row ``index``'s uint8 label mask at source resolution (datasets whose spec lists
        the ``mask`` output implement this; see :mod:`radharmony.annotations.masks`)."""
        raise NotImplementedError(f"{type(self).__name__} declares no source_mask")

    def _file_table(self) -> FileTable:
        """The build's :class:`~radharmony.data.filetable.FileTable` (made on first use), with
        the watch that warns once when one image file serves two patients."""
        files = self.__dict__.get("_files")
        if files is None:
            roots = self.rows.roots if self.rows.roots is not None else \
                np.full(len(self), str(self.base_image_dir), object)
            files = self._files = FileTable(np.array([str(r) for r in roots], object),
                                            self.rows.paths, SharedImageWatch.of(self))
            self._file_rows = np.arange(len(self))
        return files
