"""The volume reading benchmark runs end to end at a small scale: every contender reads the
same voxels (the benchmark checks their sums agree) and each target gets its ratio."""

import numpy as np
import pytest

from benchmarks.volumes_read import TARGETS, bench, report

pytest.importorskip("SimpleITK")


def test_the_volume_reading_benchmark_runs_on_small_volumes(tmp_path):
    out = bench(tmp_path, scale=0.06, runs=1)   # 31^2 x (9, 18, 27) voxels; series of 18
    assert out["side"] == 31 and out["slices"] == 18
    assert set(out["times"]) == {"nifti", "dicom", "folder"}
    for key in TARGETS:
        if key != "nifti_vs_monai" or "monai" in out["times"]["nifti"]:
            assert out["ratios"][key]["wall"] > 0, key
    text = report(out)
    assert "| dicom | radharmony |" in text and "folder vs simpleitk" in text
    again = bench(tmp_path, scale=0.06, runs=1)   # the data is written once, then reused
    assert again["side"] == 31


def test_only_the_reads_are_timed_not_the_checksums(monkeypatch):
    """A contender that times its own reads (several files) reports those times."""
    from benchmarks import volumes_read

    def reads():
        return np.arange(4), None, (0.25, 0.125)

    assert volumes_read._timed(reads) == (0.25, 0.125, 6)
