"""Deflated DICOMs: read exactly as pydicom reads them, inflated piece by piece within a budget
derived from the declared image; a decompression bomb is refused naming the file, without
inflating it into memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pydicom
import pytest
import torch

from radharmony.errors import ImageReadError
from radharmony.fake.dicom import write_deflated_dicom
from radharmony.fake.images import synthetic_cxr
from radharmony.imaging import dicom as dicom_mod
from radharmony.imaging.read import check_header, read_head, read_image

TINY = (np.arange(256).reshape(16, 16) * 200).astype(np.uint16)


@pytest.mark.parametrize("size, private", [((16, 16), 0), ((16, 16), 1001),
                                            ((700, 600), 3 << 20)])
def test_deflated_dicom_reads_as_pydicom_does(tmp_path, size, private):
    img = TINY if size == (16, 16) else synthetic_cxr(*size, rng=np.random.default_rng(0),
                                                      bits=16)
    p = write_deflated_dicom(tmp_path / "a.dcm", img, private_bytes=private)
    arr, src = read_image(p)
    want = pydicom.dcmread(p).pixel_array.astype(np.float32)
    assert src == img.shape and np.array_equal(arr, want) and np.array_equal(arr, img)


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("group", [0x0009, 0x7FE1], ids=["before_pixels", "after_pixels"])
def test_deflated_bomb_is_refused_without_inflating_it(tmp_path, group, monkeypatch):
    # 24 MiB of zeros (0.5 MB written in a fraction of a second); the metadata budget lowered
    # to 8 MiB so that the bomb before the pixels is past it, as a 512 MiB one is past 64 MiB
    monkeypatch.setattr(dicom_mod, "MAX_DICOM_METADATA", 8 << 20)
    p = write_deflated_dicom(tmp_path / "bomb.dcm", TINY, private_bytes=24 << 20,
                             private_group=group)
    assert p.stat().st_size < 100_000
    with pytest.raises(ImageReadError, match="bomb.dcm.*deflated DICOM.*inflates past"):
        read_image(p)
    if group == 0x0009:  # the header alone: the size guards refuse it too
        with pytest.raises(ImageReadError, match="bomb.dcm.*inflates past"):
            check_header(p, "dicom", read_head(p))

    def refused():
        with pytest.raises(ImageReadError):
            read_image(p)
    assert _peak(refused) < 4 << 20  # bytes held at once: never the 24 MiB


def test_deflated_bomb_through_a_dataset_names_the_sample(tmp_path):
    from radharmony.datasets.rexgradient import ReXGradientValidDataset
    from radharmony.fake.rexgradient import write_rexgradient

    root = write_rexgradient(tmp_path / "rex", studies={"valid": 1}, image_size=(96, 80))
    ds = ReXGradientValidDataset(root, dtype=torch.float32)
    target = ds.image_file(0)
    write_deflated_dicom(target, TINY, private_bytes=80 << 20)
    with pytest.raises(ImageReadError, match="inflates past") as err:
        ds[0]
    assert ds.sample_ids[0] in str(err.value) or str(target) in str(err.value)
