"""Study-level samples: every image of a study in one sample, with its report's sections.

``XDataset(root, level="study", max_images=K, view_order=(...), prior=False)`` builds the
dataset's image-level table as usual and returns a :class:`StudyDataset` over it (see
:func:`study_dataset`). The image cache is the image-level dataset's own (one entry per image,
shared with image-level use); splits and folds group by patient as at image level, so a
study's patient -- and its prior -- is on one side only.

A sample (:data:`SAMPLE_KEYS`): ``study_id``, ``patient_id``, ``img`` (K, 1, S, S) with
``img_mask`` (K,) bool (True for a real image; padding is -1), ``views`` and ``sample_ids``
of the real images in order (``view_order``, frontal first), ``key_image`` (position of
ReXrank's single-image choice: the first PA, else the first AP, else 0), the sections
``indication``, ``history``, ``comparison``, ``technique``, ``findings``, ``impression``
(None when absent) and ``report``. With ``prior=True`` also ``prior_study_id``,
``prior_img``, ``prior_img_mask``, ``prior_views``, ``prior_findings``, ``prior_impression``
and ``prior_days`` (None / empty / all-False when the study has no prior).

``packed=True`` leaves the padding out: a sample's ``img`` is ``(n, 1, S, S)``, its ``n`` real
images only (n <= K), with ``num_images`` n instead of ``img_mask`` (and ``prior_img``
``(m, 1, S, S)`` with ``prior_num_images``: :data:`PACKED_KEYS`). Collated, a batch's ``img``
is every study's images one after another, ``(sum n, 1, S, S)``, and ``num_images`` ``(B,)``
says whose they are (:func:`radharmony.pad_packed` gives ``(B, K, ...)`` and the mask back,
e.g. for an encoder's features). A batch then holds no padding slot to write, move or encode.
"""

from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import pandas as pd
import torch

from . import batches, handoff, sampling
from .splits import assign_folds
from .subsets import filter_mask
from ..errors import RadHarmonyError, StudyWarning, check_choice
from ..imaging.pipeline import STORAGE
from ..studies.index import build_index, check_max_images, check_view_order
from ..studies.priors import find_priors
from ..studies.sections import SECTION_KEYS

SAMPLE_KEYS = ("study_id", "patient_id", "img", "img_mask", "views", "sample_ids",
               "key_image", *SECTION_KEYS, "report")
#: a packed sample's keys (``packed=True``): ``num_images`` in place of ``img_mask``
PACKED_SAMPLE_KEYS = tuple("num_images" if k == "img_mask" else k for k in SAMPLE_KEYS)
PRIOR_KEYS = ("prior_study_id", "prior_img", "prior_img_mask", "prior_views",
              "prior_findings", "prior_impression", "prior_days")
LEVELS = ("image", "study")


def study_dataset(cls, args: tuple, kwargs: dict, *, level: str, max_images=None,
                  view_order=None, prior: bool = False, packed: bool = False):
    """What ``cls(*args, level=..., ...)`` returns: the image-level dataset itself for
    ``level="image"`` (study options refused), a :class:`StudyDataset` over it for
    ``"study"``."""
    check_choice("level", level, LEVELS)
    if level == "image":
        if max_images is not None or view_order is not None or prior or packed:
            raise RadHarmonyError(f"{cls.__name__}: max_images, view_order, prior and packed "
                                  "are study-level options", expected="level='study' with them",
                                  found="level='image'", fix="pass level='study'")
        return None
    return StudyDataset(cls(*args, **kwargs), max_images=max_images, view_order=view_order,
                        prior=prior, packed=packed)


class StudyDataset(torch.utils.data.Dataset):
    """The studies of an image-level dataset ``images`` as samples (see the module doc).

    Args:
        images: an image-level radharmony dataset (built-in pipeline or a user transform).
        max_images: K, images per sample; a study with more keeps its first K in view order
            (one :class:`~radharmony.errors.StudyWarning` counts them). None: the largest study.
        view_order: the order of a study's images by view; other views follow, table order.
        prior: add the patient's previous study (:mod:`radharmony.studies.priors`).
        packed: samples without padding slots (``num_images`` instead of ``img_mask``; see
            the module doc).
    """

    #: a callable run on every study sample (set by get_datasets / get_folds)
    sample_transform: Callable | None = None

    def __init__(self, images, *, max_images: int | None = None, view_order=None,
                 prior: bool = False, packed: bool = False):
        self.images = images
        self.packed = bool(packed)
        self.view_order = check_view_order(view_order)
        self.prior = bool(prior)
        owner = type(images).__name__
        self.index = build_index(images.harmonized_df, max_images=check_max_images(max_images),
                                 view_order=self.view_order, root_col=images.spec.root_col,
                                 owner=owner)
        self.max_images = self.index.max_images
        self.prior_of = self.prior_days = None
        if self.prior:
            first = np.array([r[0] for r in self.index.rows], np.int64)
            self.prior_of, self.prior_days = find_priors(
                first, self.index.patient_ids, self.index.study_ids, images.harmonized_df,
                images.spec, owner=owner)
        views, ids = images.harmonized_df["view"].to_numpy(object), images.rows.ids
        self._views = [views[r].tolist() for r in self.index.rows]
        self._sample_ids = [ids[r].tolist() for r in self.index.rows]
        self._counts = np.array([len(r) for r in self.index.rows] + [0], np.int64)  # [-1]: 0
        ix = self.index  # per study, as Python lists: what every sample reads
        self._heads = list(zip(ix.study_ids.tolist(), ix.patient_ids.tolist(),
                               ix.key_image.tolist(), ix.sections, ix.reports.tolist()))

    # -- the table ---------------------------------------------------------------------------
    @property
    def spec(self):
        return self.images.spec

    @property
    def harmonized_df(self):
        """The image-level table behind the studies (read-only)."""
        return self.images.harmonized_df

    @property
    def studies(self):
        """One row per study: ids, image counts, ``key_image``, sections, ``report``."""
        df = self.index.table()
        if self.prior:
            df["prior_study_id"] = pd.Series([self.index.study_ids[p] if p >= 0 else None
                                              for p in self.prior_of], dtype=object)
            df["prior_days"] = self.prior_days
        return df

    @property
    def study_ids(self) -> np.ndarray:
        return self.index.study_ids

    def __len__(self) -> int:
        return len(self.index)

    def __repr__(self) -> str:
        return (f"StudyDataset({type(self.images).__name__}: {len(self)} studies, "
                f"{sum(len(r) for r in self.index.rows)} images, max_images="
                f"{self.max_images}, prior={self.prior}"
                + (", packed=True)" if self.packed else ")"))

    # -- splits ------------------------------------------------------------------------------
    def _on_images(self, images, transform=None) -> "StudyDataset":
        with warnings.catch_warnings():  # counted once, when the whole dataset was built
            warnings.simplefilter("ignore", StudyWarning)
            new = StudyDataset(images, max_images=self.max_images,
                               view_order=self.view_order, prior=self.prior,
                               packed=self.packed)
        if transform is not None and not callable(transform):
            raise RadHarmonyError("A train_transform / val_transform must be callable",
                                  expected="a callable on the study sample dict",
                                  found=repr(transform), fix="pass a callable (or None)")
        new.sample_transform = transform
        return new

    def get_datasets(self, n_splits: int | None = None, *, seed: int = 0,
                     train_transform=None, val_transform=None):
        """As the image-level :meth:`get_datasets`: ``None``: one dataset; ``n``:
        ``(train, val)`` grouped by patient (the same patients as at image level)."""
        if n_splits is None:
            return self._on_images(self.images.get_datasets(), train_transform)
        return self.get_folds(n_splits, seed=seed, train_transform=train_transform,
                              val_transform=val_transform)[0]

    def get_folds(self, n_splits: int = 5, *, seed: int = 0, train_transform=None,
                  val_transform=None) -> list[tuple]:
        """``n_splits`` ``(train, val)`` pairs grouped by patient; the val sides cover every
        study exactly once."""
        images = self.images
        folds = assign_folds(images.harmonized_df[images.spec.group_col], n_splits, seed=seed)
        return [(self._on_images(images._subset(np.flatnonzero(folds != k)), train_transform),
                 self._on_images(images._subset(np.flatnonzero(folds == k)), val_transform))
                for k in range(n_splits)]

    def filter(self, mask) -> "StudyDataset":
        """The studies where ``mask`` (one bool per study, or a callable on :attr:`studies`)
        is True."""
        mask = filter_mask(mask, self.studies, len(self), unit="study",
                           fix="build it from ds.studies")
        df = self.images.harmonized_df
        keep = df["study_id"].isin(set(self.index.study_ids[mask].tolist())).to_numpy()
        return self._on_images(self.images._subset(np.flatnonzero(keep)), self.sample_transform)

    # -- images --------------------------------------------------------------------------------
    def _quantized(self, rows: np.ndarray) -> np.ndarray:
        """The quantized ``(n, S, S)`` images of image rows ``rows`` (through the cache)."""
        ds = self.images
        if ds.image_cache is not None:
            return batches.read_quantized(ds, rows)[0]
        return np.stack([ds.load_image(int(r))[0] for r in rows])

    def _images(self, studies: list[int], meanwhile: Callable | None = None) -> torch.Tensor:
        """``(len(studies), K, 1, S, S)`` of those studies (-1: no study), padding -1 (packed:
        ``(n, 1, S, S)``, their n real images one after another);
        ``meanwhile(imgs)`` is called once with that tensor, while its conversion still runs
        on a helper thread when it does (for work that does not read the pixels)."""
        ran = []

        def once(imgs: torch.Tensor) -> None:
            if meanwhile is not None and not ran:
                ran.append(meanwhile(imgs))
        if self.images.user_transform is not None:  # its transform gives each image's tensor
            imgs = self._transformed(studies)
        else:
            imgs = self._converted(studies, once)
        once(imgs)
        return imgs

    def _converted(self, studies: list[int], meanwhile: Callable) -> torch.Tensor:
        """:meth:`_images` through the built-in pipeline, in one pass over the batch's
        ``B x K`` image slots: each real image is converted from its cache array straight
        into its slot (out of the pack's memory map when the batch lies in one pack, as the
        image-level batched read does; else gathered first) and each padding slot is filled
        with -1 in the same pass (``to_tensor``'s negative rows). Packed: the real images'
        slots only, one after another."""
        ds, k = self.images, self.max_images
        size = ds.pipeline.size
        counts = self._counts[studies]
        flat = np.concatenate([self.index.rows[s] for s in studies if s >= 0] or
                              [np.empty(0, np.int64)])
        if self.packed:  # slot j holds flat's j-th image
            slots, real = np.arange(len(flat)), np.ones(len(flat), bool)
        else:  # slot j*k+i holds the study's i-th image (position in flat), -1 marks padding
            slots = np.full((len(studies), k), -1, np.int64)
            real = np.arange(k)[None, :] < counts[:, None]
            slots[real] = np.arange(len(flat))
        shape = (slots.size, 1, size, size)
        # the main process reuses its batch buffers (packed: the first rows of one with room
        # for B x K, whatever the batch's count); a DataLoader worker's batch goes PyTorch's
        # usual way (its slices are not a worker slot's whole batch)
        out = handoff.own_batch((len(studies) * k, *shape[1:]), ds.dtype)[:slots.size] \
            if torch.utils.data.get_worker_info() is None else torch.empty(shape, dtype=ds.dtype)
        imgs = out if self.packed else out.view(len(studies), k, 1, size, size)
        source = done = None  # done: the batch converted while its files were checked
        if ds.image_cache is not None and len(flat):
            # the batched read's own lookup: straight out of the pack (its records per slot),
            # converted meanwhile when this process checked these records before
            source, records, _, done = batches.cached_rows_ahead(
                ds, flat, out, stream=sampling.stream_hint(self), slots=slots.reshape(-1),
                boxes=False, meanwhile=lambda: meanwhile(imgs))
            if done is None and records is not None:
                slots[real] = records
        elif len(flat):
            source = self._quantized(flat)
        if done is None:
            if source is None:  # no real image at all: every slot is padding
                source = np.zeros((0, size, size), STORAGE[ds.pipeline.bits])
            ds.pipeline.to_tensor(source, ds.dtype, rows=slots.reshape(-1), out=out,
                                  stream=sampling.stream_hint(self))
        return imgs

    def _transformed(self, studies: list[int]) -> torch.Tensor:
        """:meth:`_images` through the user's transform, image by image."""
        ds, k = self.images, self.max_images
        rows = [self.index.rows[s] if s >= 0 else np.empty(0, np.int64) for s in studies]
        imgs = [[ds[int(i)]["img"] for i in r] for r in rows]
        first = next((im for r in imgs for im in r), None)
        shape = tuple(first.shape) if first is not None else \
            (1, ds.pipeline.size, ds.pipeline.size)
        if self.packed:
            return torch.stack([im for r in imgs for im in r]) if first is not None else \
                torch.empty((0, *shape), dtype=ds.dtype)
        out = torch.full((len(studies), k, *shape), -1.0, dtype=ds.dtype)
        for j, r in enumerate(imgs):
            for i, img in enumerate(r):
                out[j, i] = img
        return out

    def _masks(self, studies: list[int]) -> torch.Tensor:
        return torch.from_numpy(np.arange(self.max_images)[None, :] <
                                self._counts[studies][:, None])

    # -- samples ------------------------------------------------------------------------------
    def _check(self, index) -> int:
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"index {index} out of range for {n} studies")
        return int(index) % n

    def __getitem__(self, index: int) -> dict:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices) -> list[dict]:
        """The studies of ``indices`` read as one batch (``DataLoader(ds, batch_size=B)``
        calls this): one read of all their images, one conversion (see :meth:`_images`)."""
        idx = [self._check(i) for i in indices]
        priors = [int(self.prior_of[i]) for i in idx] if self.prior else []
        made = []

        def samples(imgs: torch.Tensor) -> None:  # while the pixels are converted, if they are
            tensors, rows = self._tensors(imgs, idx, priors)
            made.extend((self._samples(idx, priors, rows), tensors, rows))

        self._images(idx + priors, meanwhile=samples)
        out, tensors, rows = made
        if self.sample_transform is not None:
            return [self._finish(s) for s in out]
        return handoff.mark(out, tensors, rows)

    def _tensors(self, imgs: torch.Tensor, idx: list[int], priors: list[int]
                 ) -> tuple[dict, dict]:
        """The batch tensors of :meth:`_images`' ``imgs`` (``img``, ``img_mask`` or packed,
        and the priors') and each one's per-sample views, in order."""
        if self.packed:  # each study's images: its count of rows (a missing prior's: none)
            n, m = self._counts[idx].tolist(), self._counts[priors].tolist()
            tensors = {"img": imgs[:sum(n)]}
            rows = {"img": tensors["img"].split(n)}
            if self.prior:
                tensors["prior_img"] = imgs[sum(n):]
                rows["prior_img"] = tensors["prior_img"].split(m)
            return tensors, rows
        masks = self._masks(idx + priors)
        tensors = {"img": imgs[:len(idx)], "img_mask": masks[:len(idx)]}
        if self.prior:
            tensors["prior_img"] = imgs[len(idx):]
            tensors["prior_img_mask"] = masks[len(idx):]
        return tensors, {k: v.unbind(0) for k, v in tensors.items()}

    def _samples(self, idx: list[int], priors: list[int], rows: dict) -> list[dict]:
        """The sample dicts of studies ``idx`` (and their ``priors``), whose tensors are
        ``rows`` (each batch tensor's rows, in order)."""
        ix, views, ids = self.index, self._views, self._sample_ids
        out = []
        for j, i in enumerate(idx):
            study, patient, key, sections, report = self._heads[i]
            s = {"study_id": study, "patient_id": patient, "img": rows["img"][j],
                 **({"num_images": len(rows["img"][j])} if self.packed else
                    {"img_mask": rows["img_mask"][j]}), "views": list(views[i]),
                 "sample_ids": list(ids[i]), "key_image": key, **sections, "report": report}
            if self.prior:
                p = priors[j]
                s.update({"prior_study_id": ix.study_ids[p] if p >= 0 else None,
                          "prior_img": rows["prior_img"][j],
                          **({"prior_num_images": len(rows["prior_img"][j])}
                             if self.packed else
                             {"prior_img_mask": rows["prior_img_mask"][j]}),
                          "prior_views": list(views[p]) if p >= 0 else [],
                          "prior_findings": ix.sections[p]["findings"] if p >= 0 else None,
                          "prior_impression": ix.sections[p]["impression"] if p >= 0 else None,
                          "prior_days": None if p < 0 or np.isnan(self.prior_days[i])
                          else int(self.prior_days[i])})
            out.append(s)
        return out

    def _finish(self, sample: dict) -> dict:
        """``sample`` through the split's transform: a :class:`~handoff.Sample` still, so
        torch's default collate batches it as a study (absent sections, views of different
        counts, packed images)."""
        if self.sample_transform is None:
            return sample
        return handoff.Sample(sampling.after_transform(self.sample_transform(sample),
                                                       self.images.dtype))
