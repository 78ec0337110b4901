"""Label maps of DICOM-series volume datasets (RSNA's cervical spine and abdominal trauma
releases: ``segmentations/<id>.nii`` beside ``train_images/``): each row's series geometry
scanned from its headers once, its NIfTI label map matched to it through geometry, and the
rows whose map lies off their series' grid found from the headers alone."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from ..volumes.series_files import series_geometry


class SeriesLabelMaps:
    """A DICOM-series volume dataset mixin (before the dataset base): each row's series
    geometry scanned from its headers once (:meth:`geometry`), and a NIfTI label map read
    onto the series' canonical grid, matched to it through geometry (:meth:`label_map`); the
    sample's ``mask`` carries it onto the returned grid
    (:class:`~radharmony.volumes.placement.VolumeGrid`). The label maps lie under
    ``base_image_dir / mask_folder`` as ``<id>.nii``, for the rows with ``has_mask``."""

    #: the folder of the label maps under ``base_image_dir`` (RSNA's ``segmentations/``)
    mask_folder = "segmentations"

    def geometry(self, index: int):
        """Row ``index``'s :func:`~radharmony.volumes.series_files.series_geometry`, scanned
        once."""
        cache = self.__dict__.setdefault("_geometries", {})
        if index not in cache:
            cache[index] = series_geometry(self.image_file(index))
        return cache[index]

    def mask_path(self, index: int) -> Path:
        """Row ``index``'s segmentation file (whether or not it exists)."""
        return self.base_image_dir / self.mask_folder / \
            f"{self.harmonized_df[self.spec.id_col].iat[index]}.nii"

    def check_masks(self) -> list[int]:
        """The rows with ``has_mask`` whose segmentation is off its series' grid (shape, or
        affine beyond 1e-3 mm), from the headers alone; counted and named (file, row) in one
        warning, so they can be filtered out before training (reading one is refused)."""
        from ..volumes.masks import MaskGeometryError, check_grid, header_affine
        from ..volumes.geometry import to_canonical

        bad = []
        for index in np.flatnonzero(self.harmonized_df["has_mask"].to_numpy(bool)).tolist():
            path = self.mask_path(index)
            affine, shape = header_affine(path)
            array, canonical = to_canonical(np.broadcast_to(np.zeros((), np.uint8), shape),
                                            affine)
            _, _, image_affine, image_shape = self.geometry(index)
            try:
                check_grid(path, array.shape, canonical, self.image_file(index), image_shape,
                           image_affine)
            except MaskGeometryError as exc:
                bad.append((index, f"row {index}: {path} ({exc.found})"))
        if bad:
            warnings.warn(f"{self.spec.key}: {len(bad)} segmentations off their series' grid "
                          f"({'; '.join(b for _, b in bad[:5])}{' ...' if len(bad) > 5 else ''}"
                          ")", UserWarning, stacklevel=2)
        return [i for i, _ in bad]

    def label_map(self, index: int, path: Path) -> np.ndarray:
        """The label map ``path`` of row ``index`` on its series' canonical grid; refused
        when the row has none (``has_mask``) or it lies off the series' grid."""
        from ..errors import ImageReadError
        from ..volumes.masks import read_label_map

        if not self.harmonized_df["has_mask"].iat[index] or not path.is_file():
            raise ImageReadError(f"{self.rows.ids[index]} has no segmentation {path}",
                                 expected=f"{self.mask_folder}/<id>.nii for the rows with "
                                 "has_mask", found="no such file",
                                 fix="filter to the rows with has_mask")
        _, _, affine, shape = self.geometry(index)
        return read_label_map(path, self.image_file(index), shape, affine)


__all__ = ["SeriesLabelMaps"]
