"""Merged samples read by their source: a merge of volume datasets (CT-RATE, RSNA PE, the
spine and trauma sets, ...) cannot read a row's image the way a radiograph merge does (one
file, one 2-D pipeline): a volume row is a NIfTI file, a DICOM series or one stack of it,
with its source's reader, rescale, preset and cache. :class:`SourceSamples` gives
:class:`radharmony.combine.MergedDataset` the sample of the row's own source dataset
(``img``, ``spacing``, ``affine`` and whatever else that source returns) with the merge's
label outputs put over it: ``cls`` / ``cls_mask`` in the merged label space (a finding the
source does not say is masked), ``grade`` / ``reg`` / ``side`` with their masks, ``report``
and ``source``.

A row finds its source sample by the source's key and the row's ``sample_id`` (unique in a
merge), so splits, folds and ``filter()`` of the merged dataset read the right volume.
"""

from __future__ import annotations

import numpy as np


def volume_sources(datasets) -> bool:
    """Whether the merge's sources hold volumes (every one of them: a mix of radiographs and
    volumes is refused by :func:`radharmony.combine.merge`)."""
    return any(ds.spec.row_unit == "volume" for ds in datasets)


class SourceSamples:
    """A merged dataset mixin: :meth:`source_sample` reads row ``index`` through its
    source dataset and puts the merge's outputs over the source's own."""

    def _source_rows(self) -> dict:
        found = self.__dict__.get("_source_rows_of")
        if found is None:
            found = {ds.spec.key: (ds, {sid: j for j, sid in enumerate(ds.rows.ids)})
                     for ds in self.sources}
            self._source_rows_of = found
        return found

    def source_sample(self, index: int) -> dict:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        index = int(index) % len(self)
        source, rows = self._source_rows()[self.source_of[index]]
        sample = source[rows[self.rows.ids[index]]]
        merged: dict = {}
        self.add_outputs(index, merged, None)
        for key in [k for k in sample if k.startswith(("cls", "grade", "reg", "side"))]:
            del sample[key]  # the source's own label space: replaced by the merge's
        sample.update(merged)
        return sample

    def source_samples(self, indices) -> list[dict]:
        return [self.source_sample(i) for i in np.asarray(indices, dtype=np.int64).tolist()]


__all__ = ["SourceSamples", "volume_sources"]
