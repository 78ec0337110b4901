"""The DICOM scan benchmark runs end to end on a small study: both scans find the same series
and files (the benchmark checks it), the axial series split into their three stacks."""

import pytest

from benchmarks.dicom_scan import TARGET, bench, radharmony_scan, report, write_study

pytest.importorskip("SimpleITK")


def test_the_dicom_scan_benchmark_runs_on_a_small_study(tmp_path):
    out = bench(tmp_path, slices=40, runs=1)
    assert out["slices"] == 40 and out["series"] == 4 and out["stacks"] == 2 + 3 + 3
    assert out["ratio"]["cpu"] > 0 and f"bar {TARGET:g}x" in report(out)
    stacks = radharmony_scan(write_study(tmp_path, 40))      # written once, then reused
    axial = stacks["1.2.826.0.1.3680043.10.7.3"]
    assert [[int(f.rsplit("/", 1)[1][:-4]) for f in s] for s in axial] == \
        [[1, 2, 3, 4], [8, 9, 10], [5, 6, 7]]   # in slice order; stacks in the order their
    # first file comes in the folder's sorted names (1, 10, 2, ...: "10.dcm" before "5.dcm")


def test_mr_like_headers_are_scanned_to_the_same_stacks(tmp_path):
    import pydicom

    out = bench(tmp_path, slices=12, runs=1, mr_headers=True)
    assert out["headers"] == "MR-like" and out["stacks"] == 8 and "MR-like headers" in report(out)
    header = pydicom.dcmread(tmp_path / "study-12-mr" / "1000" / "1.dcm")
    assert header.EchoTime == 90 and header.Manufacturer == "ACME"
