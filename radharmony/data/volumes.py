"""The volume dataset: a table of CT or MR volumes -> samples ``{"img": (1, D, H, W), ...}``.

:class:`VolumeDataset` is :class:`~radharmony.data.dataset.BaseRadiologicalDataset` with a
volume inside: the same table, outputs (``cls``, ``cls_mask``, ``report``), splits and folds
grouped by patient (:mod:`radharmony.data.subsets`), filters and ``exclude``. Only the image
path differs. Each row's volume is read by :func:`radharmony.volumes.read_volume` into the
canonical order (``docs/volumes.md``), kept in the volume cache (int16 Hounsfield units, keyed
by the file's identity, the reader's version and every parameter), then given to the model
through a preset (``preset="merlin"``, ``"ct_clip"``, ...; :mod:`radharmony.volumes.presets`),
whose output is cached too.

A sample: ``img`` ``(1, D, H, W)`` (int16 HU without a preset, the preset's output in ``dtype``
with one), ``spacing`` (mm, ``(d, h, w)``), ``affine`` (4x4, voxel index -> world mm, LPS),
``sample_id`` and the requested outputs. The table may carry, per row:

- ``rescale_slope`` / ``rescale_intercept``: a rescale from side metadata that the stored values
  still need (CT-RATE's v1 files); NaN or absent: none. It is applied exactly once: a file
  whose header scales as well is refused by the reader.

Annotations come in the source volume's canonical voxels (a dataset's :meth:`annotations`,
:meth:`source_mask`) and are carried onto the returned volume by geometry alone
(:class:`radharmony.volumes.placement.VolumeGrid`): ``output_bbox3d=True`` adds ``bbox3d``
(float32 ``(N, 6)``, ``x0, y0, z0, x1, y1, z1`` in returned voxels, x along W, z along D),
``bbox3d_mm`` (float64, the LPS envelope in mm) and ``bbox3d_labels``; ``output_points=True``
adds ``points`` (float32 ``(N, 3)``), ``points_mm`` and ``point_labels``; ``output_mask=True``
the label map on the returned grid (nearest label). Bad input is dropped, counted in
:attr:`VolumeDataset.annotation_faults` and named in an
:class:`~radharmony.volumes.placement.AnnotationWarning`.

A dataset module adds dataset-specific geometry by overriding :meth:`VolumeDataset.declared_geometry`.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Callable, ClassVar

import numpy as np
import torch

from . import sampling
from .dataset import BaseRadiologicalDataset
from .volume_annotations import annotation_outputs, slice_label_output, warn_faults
from .volume_choice import chosen_volumes
from ..errors import ImageReadError, PathSafetyError, RadHarmonyError
from ..imaging.pipeline import DefaultTransform


class VolumeDataset(BaseRadiologicalDataset):
    """Samples of a volume dataset (CT, MR): ``img`` ``(1, D, H, W)`` in the canonical order.

    Takes every argument of :class:`~radharmony.data.dataset.BaseRadiologicalDataset` (``dtype``
    is the type of a preset's output; ``transform``, when given, is a callable on the sample
    dict that receives ``img`` as the volume's path, e.g. a MONAI ``Compose`` starting with
    ``LoadImaged``), and:

    Args:
        preset: None (the volume as read: int16 HU, the canonical order, native spacing) or a
            model's input (``"merlin"``, ``"ct_clip"``, ... or a preset object with ``apply``;
            :mod:`radharmony.volumes.presets`).
        one_per_study: keep one volume per study, by
            :func:`~radharmony.data.volume_choice.chosen_volumes`' rule (the thinnest slices,
            then the finest in-plane pixels, then the lowest ``reconstruction``, then the
            first row; the mixtures' CT tasks choose alike): report and study-level tasks
            then count each scan once.
        output_bbox3d, output_points: the boxes and points of :meth:`annotations` on the
            returned volume (module docstring); the dataset's spec lists ``bbox3d`` /
            ``points`` among its outputs.
        output_slice_labels: the dataset's ``slice_labels(index, volume)`` along the returned
            slice axis (a slice takes its nearest source slice's label; padding NaN).
    """

    #: the volumes are CT: each is checked to be in Hounsfield units when read
    #: (:func:`radharmony.volumes.checks.check_hu`); None: DICOM decides from ``Modality``
    ct: ClassVar[bool | None] = None

    def __new__(cls, *args, level: str = "image", max_images: int | None = None,
                view_order=None, prior: bool = False, packed: bool = False, **kwargs):
        """A volume is its study's sample already (``one_per_study=True`` keeps one per scan,
        ``output_report=True`` adds its sections): the 2-D study level does not apply."""
        if level != "image" or max_images is not None or view_order is not None or prior \
                or packed:
            raise RadHarmonyError(f"{cls.__name__} has no study level",
                                  expected="level='image' (a volume per sample)",
                                  found=f"level={level!r}" if level != "image" else
                                  "a study-level argument (max_images, view_order, prior, "
                                  "packed)",
                                  fix="pass one_per_study=True, output_report=True: one volume "
                                      "per scan with its report's sections")
        return super().__new__(cls)

    def __init__(self, base_image_dir: str | os.PathLike | None = None,
                 csv_path: str | os.PathLike | None = None, transform: Callable | None = None,
                 *, preset=None, one_per_study: bool = False, output_bbox3d: bool = False,
                 output_points: bool = False, output_slice_labels: bool = False, **kwargs):
        if isinstance(transform, DefaultTransform):
            raise RadHarmonyError(f"{type(self).__name__} reads volumes",
                                  expected="transform=None (with preset=) or a callable on the "
                                  "sample dict", found="a DefaultTransform (the 2-D pipeline)",
                                  fix="pass preset='merlin' (or another preset) instead")
        super().__init__(base_image_dir, csv_path, transform, **kwargs)
        self.image_cache = None  # the 2-D cache: volumes have their own
        self.outputs = self.outputs | self._supported_outputs(
            bbox3d=output_bbox3d, points=output_points, slice_labels=output_slice_labels)
        #: annotations dropped as bad input so far (in this process), by kind
        self.annotation_faults: Counter = Counter()
        self.preset = _preset(preset)
        self.volume_cache = _volume_cache(self.cache_dir) \
            if self.cache_dir is not None and self.user_transform is None else None
        if one_per_study:  # the mixtures' CT tasks' choice too
            keep = np.sort(chosen_volumes(self.harmonized_df)[0])
            self._set_table(self.harmonized_df.iloc[keep], derived=True)
        self.one_per_study = bool(one_per_study)

    def _load_kernels(self, df) -> None:
        """Nothing to load: the 2-D kernels (8-bit conversion, PNG decoding) serve no volume."""

    # -- reading ----------------------------------------------------------------------------------
    def rescale(self, index: int) -> tuple[float, float] | None:
        """The side-metadata rescale row ``index``'s stored values need (None: none)."""
        df = self.harmonized_df
        if "rescale_slope" not in df.columns:
            return None
        slope, intercept = df["rescale_slope"].iat[index], df["rescale_intercept"].iat[index]
        if slope != slope or intercept != intercept:  # NaN: nothing to apply
            return None
        return float(slope), float(intercept)

    def declared_geometry(self, index: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(expected, declared)`` LPS affines of row ``index``'s file index order when side
        metadata replaces the file's geometry: the header's defaults (their spacing is
        checked; a NIfTI header's own transform is what is replaced) and the metadata's (see
        :func:`radharmony.volumes.geometry.reassign_geometry`), else None (the default: the
        file's header is the geometry)."""
        return None

    def read_params(self, index: int) -> dict:
        """Everything besides the file that decides row ``index``'s volume (the cache keys on
        it): the rescale applied and any declared geometry."""
        geometry = self.declared_geometry(index)
        return {"reader": "read_volume", "ct": self.ct, "rescale": self.rescale(index),
                "geometry": None if geometry is None else
                [np.round(a, 9).tolist() for a in geometry]}

    def job(self, index: int):
        """Row ``index`` as a :class:`~radharmony.volumes.precache.VolumeJob`: its file (what the
        cache keys on), a picklable loader and the read's parameters."""
        from functools import partial

        from ..volumes.precache import VolumeJob

        path = str(self.image_file(index))
        geometry = self.declared_geometry(index)
        return VolumeJob([path], partial(read_row_volume, path, rescale=self.rescale(index),
                                         ct=self.ct, geometry=geometry),
                         self.read_params(index))

    def read_volume(self, index: int):
        """Row ``index``'s :class:`~radharmony.volumes.Volume`, canonical, uncached."""
        return self.job(index).load()

    def load_volume(self, index: int):
        """Row ``index``'s volume, through the cache when there is one: the canonical
        :class:`~radharmony.volumes.Volume`, or with a preset ``(model input, its LPS
        affine)``."""
        if self.preset is None:
            return self.source_volume(index)
        array, info = self.preset_output(index)
        return array, np.asarray(info["affine"], np.float64)

    def source_volume(self, index: int):
        """Row ``index``'s canonical :class:`~radharmony.volumes.Volume`, through the cache
        when there is one."""
        if self.volume_cache is None:
            return self.read_volume(index)
        inputs, load, params = self.job(index)
        return self.volume_cache.get(inputs, params, load)

    def preset_output(self, index: int) -> tuple[np.ndarray, dict]:
        """``(model input, info)`` of row ``index`` through the preset (cached when there is a
        cache): ``info`` holds the output's and the source's geometry
        (:meth:`radharmony.volumes.presets.Preset.geometry`)."""
        if self.volume_cache is None:
            array, info = self.preset.geometry(self.read_volume(index))
            return self.preset.finish(array, info), info
        from ..volumes.presets import preset_array

        inputs, load, params = self.job(index)
        return preset_array(self.volume_cache, self.preset, inputs, params, load,
                            with_info=True)

    def load_grid(self, index: int):
        """``(array, grid)``: row ``index``'s returned array and its
        :class:`~radharmony.volumes.placement.VolumeGrid` (where it lies relative to the
        source volume, which annotations are given on)."""
        from ..volumes.placement import VolumeGrid

        if self.preset is None:
            volume = self.source_volume(index)
            return volume.array, VolumeGrid.same(volume.in_space("LPS").affine, volume.shape,
                                                 volume=volume)
        array, info = self.preset_output(index)
        layout = getattr(self.preset, "layout", "CDHW")
        shape = array.shape[-3:] if layout == "CDHW" else \
            (array.shape[-1], *array.shape[-3:-1])
        return array, VolumeGrid(np.asarray(info["source_affine"], np.float64),
                                 tuple(info["source_shape"]),
                                 np.asarray(info["affine"], np.float64), tuple(shape), layout)

    def cache_key(self, index: int) -> str:
        """Row ``index``'s key in the volume cache (its file's identity and parameters)."""
        if self.volume_cache is None:
            raise RadHarmonyError(f"{type(self).__name__} has no cache",
                                  expected="a cache_dir", found="cache_dir=None",
                                  fix="pass cache_dir='./cache'")
        return self.volume_cache.key([self.image_file(index)], self.read_params(index))

    def cache_keys(self) -> list[str]:
        return [self.cache_key(i) for i in range(len(self))]

    def pre_cache(self, num_workers: int = 0, *, progress: bool = True, engine: str = "local",
                  address: str | None = None) -> list[str]:
        """Read every volume (and its preset's geometry) into the cache, in ``num_workers``
        processes or on Ray (``engine="ray"``, ``address``); returns the cache keys. Raises on
        the first volume that fails (``radharmony cache`` counts failures instead:
        :meth:`pre_cache_volumes`)."""
        return self.pre_cache_volumes(num_workers=num_workers, progress=progress,
                                      engine=engine, address=address).keys

    def pre_cache_volumes(self, *, num_workers: int = 0, progress: bool = True,
                          keep_going: bool = False, engine: str = "local",
                          address: str | None = None, **ray_options):
        """What :func:`radharmony.data.precache.pre_cache` does for images, for volumes
        (:func:`radharmony.volumes.precache.pre_cache_volumes` on every row): a
        :class:`~radharmony.data.precache.PreCacheReport` whose failures name samples."""
        from ..volumes.precache import pre_cache_volumes
        from .precache import PreCacheReport

        del progress
        if ray_options:
            raise RadHarmonyError("Volumes take no Ray options", expected="engine='ray' and "
                                  "address=", found=sorted(ray_options),
                                  fix="drop them (one Ray task per volume)")
        if self.volume_cache is None:
            raise RadHarmonyError(f"{type(self).__name__} has no volume cache",
                                  expected="a dataset built with cache_dir and no transform",
                                  found="cache_dir=None or a user transform",
                                  fix="build it with cache_dir='./cache'")
        jobs = [self.job(i) for i in range(len(self))]
        report = pre_cache_volumes(self.volume_cache, jobs, num_workers=num_workers,
                                   presets=[self.preset] if self.preset is not None else [],
                                   engine=engine, address=address, keep_going=keep_going)
        row = {job.inputs[0]: i for i, job in enumerate(jobs)}
        failed = {row[f["inputs"][0]] for f in report.first_failures}
        first = [{"sample_id": self.rows.ids[row[f["inputs"][0]]], "detail": f["detail"]}
                 for f in report.first_failures]
        keys = [None if i in failed else self.volume_cache.key(job.inputs, job.params)
                for i, job in enumerate(jobs)]
        return PreCacheReport(images=report.volumes, cached=report.cached,
                              failed=report.failed, seconds=report.seconds,
                              first_failures=first, keys=keys)

    # -- samples ----------------------------------------------------------------------------------
    def __getitem__(self, index: int) -> dict:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        index = int(index) % len(self)
        try:
            if self.user_transform is not None:
                sample = self.user_transform(self.assemble(index, str(self.image_file(index)),
                                                           None))
                sample["img"] = sampling.as_tensor(sample["img"], self.dtype)
                return self.finish(sample)
            array, grid = self.load_grid(index)
            sample = self.assemble(index, self.volume_tensor(array), grid)
            sample["spacing"] = torch.from_numpy(np.linalg.norm(grid.affine[:3, :3], axis=0))
            sample["affine"] = torch.from_numpy(np.array(grid.affine, dtype=np.float64))
            return self.finish(sample)
        except (ImageReadError, PathSafetyError) as exc:
            raise type(exc)(f"Sample {self.rows.ids[index]}: {exc.what}", expected=exc.expected,
                            found=exc.found, fix=exc.fix) from None

    def annotations(self, index: int) -> dict:
        """Row ``index``'s boxes and points in the source volume's canonical voxels (the
        contract: ``boxes`` float64 ``(N, 6)``, ``box_labels``, ``points`` ``(N, 3)``,
        ``point_labels``; keys absent when none). Datasets with ``bbox3d`` or ``points`` among
        their outputs override it."""
        return {}

    def add_outputs(self, index: int, sample: dict, letterbox) -> None:
        """The standard outputs (``letterbox``: the sample's
        :class:`~radharmony.volumes.placement.VolumeGrid`; None under a user transform: the
        mask, boxes and points then stay on the source's voxels); the boxes and points; with
        ``report`` also its sections (``indication``, ``history``, ``comparison``,
        ``technique``, ``findings``, ``impression``; None where absent), from the table's
        ``section_*`` columns as study samples take them
        (:func:`radharmony.studies.sections.report_sections`)."""
        super().add_outputs(index, sample, letterbox)
        if self.outputs & {"bbox3d", "points"}:
            annotation_outputs(self.annotations(index), letterbox, sample, self.outputs)
        if "slice_labels" in self.outputs:
            slice_label_output(self, index, letterbox, sample)
        if letterbox is not None and letterbox.faults:
            warn_faults(self, index, letterbox.faults)
        if "report" in self.outputs:
            from ..studies.sections import report_sections

            df = self.harmonized_df
            columns = {c[len("section_"):]: df[c].iat[index] for c in df.columns
                       if c.startswith("section_")}
            sample.update(report_sections(self.rows.reports[index], columns)[0])

    def volume_tensor(self, array: np.ndarray) -> torch.Tensor:
        """The sample's ``img``: ``(1, D, H, W)`` (a preset gives its own channel axis and
        layout); int16 stays int16, floats take ``dtype``."""
        img = torch.from_numpy(np.ascontiguousarray(array))
        if img.ndim == 3:
            img = img[None]
        return img.to(self.dtype) if img.is_floating_point() else img

    def __getitems__(self, indices) -> list[dict]:
        return [self[i] for i in indices]

    def __repr__(self) -> str:
        df = self.harmonized_df
        return (f"{type(self).__name__}({len(df)} volumes, {df['study_id'].nunique()} studies, "
                f"{df['patient_id'].nunique()} patients, preset="
                f"{getattr(self.preset, 'name', None)!r}, outputs={sorted(self.outputs)})")


def _preset(preset):
    """A preset object from a name, an object with ``apply``, or None."""
    if preset is None or hasattr(preset, "apply"):
        return preset
    from ..volumes.presets import get_preset

    return get_preset(preset)


def _volume_cache(cache_dir):
    from ..volumes.cache import VolumeCache

    return VolumeCache(cache_dir)


def read_row_volume(path: str, *, rescale: tuple[float, float] | None = None,
                    ct: bool | None = None, geometry=None):
    """A row's canonical :class:`~radharmony.volumes.Volume`: :func:`~radharmony.volumes.
    read_volume` with the row's side-metadata ``rescale``, and its declared ``geometry``
    (``(expected, declared)`` affines, see :meth:`VolumeDataset.declared_geometry`) in place
    of the header's own transform (a NIfTI header's is read from the file; a header whose
    spacing is not the ``expected`` defaults is refused). Module-level, so a pre-cache job's
    loader pickles without the dataset."""
    from ..volumes import read_volume
    from ..volumes.geometry import reassign_geometry
    from ..volumes.volume import Volume

    if geometry is None:
        return read_volume(path, rescale=rescale, ct=ct)
    volume = read_volume(path, rescale=rescale, ct=ct, check=False)
    expected = np.asarray(geometry[0], dtype=np.float64)
    assumed = header_affine(path) if str(path).endswith((".nii", ".nii.gz")) else expected
    header = volume.in_space("LPS").affine
    spacing = np.linalg.norm(expected[:3, :3], axis=0)  # the header's, axis-aligned, if intact
    if not np.allclose(np.sort(volume.spacing), np.sort(spacing), atol=1e-4) or \
            not np.allclose(np.sort(np.abs(header[:3, :3]), axis=None)[-3:],
                            np.sort(spacing), atol=1e-4):
        raise VolumeHeaderError(
            f"{path}: the header does not hold the defaults its metadata replaces",
            expected="the release's header (geometry from the metadata, values to rescale)",
            found=f"spacing {tuple(round(v, 4) for v in volume.spacing)} mm in the header: a "
                  "rewritten file (e.g. by the dataset's own fix-up script: geometry and "
                  "Hounsfield units already in it)",
            fix="put the rewritten files in the fixed release's folder (read as they are), or "
                "restore the files as released")
    if ct:
        from ..volumes.checks import check_hu

        check_hu(volume.array, path)
    array, affine = reassign_geometry(volume.array, header, assumed, geometry[1])
    return Volume.from_array(array, affine, space="LPS", source=volume.source)


def header_affine(path) -> np.ndarray:
    """The LPS affine a NIfTI file's header gives the file's own (i, j, k) index (the transform
    the reader chose: :func:`radharmony.volumes.nifti.nifti_geometry`), read from its first
    bytes: the geometry that side metadata replaces is the header's own, whatever defaults
    the file was written with."""
    import gzip

    from ..volumes.nifti import HEADER_SIZE, nifti_geometry, parse_header

    with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as fh:
        block = fh.read(HEADER_SIZE)
    return nifti_geometry(parse_header(block, path))[0]


class VolumeHeaderError(ImageReadError):
    """A volume file's header is not the one its table's side metadata was written for."""
