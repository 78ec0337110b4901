"""One image file under two patients (a hard link and an in-root symlink): flagged by file
identity (device and inode), once per file, by the cache keys and by ``validate()``."""

from __future__ import annotations

import os
import shutil
import warnings

import pytest

from radharmony.datasets.rexgradient import ReXGradientValidDataset
from radharmony.errors import SharedImageWarning
from radharmony.fake.rexgradient import write_rexgradient


@pytest.fixture
def linked(tmp_path_factory):
    """Three rows for one inode: row ``a`` of patient P1 holds the file, rows ``b`` (a hard
    link) and ``c`` (a relative symlink inside the root) belong to patient P2."""
    root = write_rexgradient(tmp_path_factory.mktemp("rex"), studies={"valid": 4},
                             image_size=(96, 80))
    ds = ReXGradientValidDataset(root)
    pids = ds.harmonized_df["patient_id"].tolist()
    a = 0
    b, c = [i for i in range(len(pids)) if pids[i] != pids[a] and
            pids[i] == next(p for p in pids if p != pids[a])][:2]
    fa, fb, fc = (ds.image_file(i) for i in (a, b, c))
    fb.unlink()
    os.link(fa, fb)
    fc.unlink()
    os.symlink(os.path.relpath(fa, fc.parent), fc)
    assert len({os.stat(f).st_ino for f in (fa, fb, fc)}) == 1
    return root, (a, b, c), (pids[a], pids[b])


def test_cache_keys_flag_one_file_naming_both_patients(linked, tmp_path):
    root, rows, (p1, p2) = linked
    ds = ReXGradientValidDataset(root, cache_dir=tmp_path / "c")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        ds.cache_keys()
    shared = [str(w.message) for w in rec if issubclass(w.category, SharedImageWarning)]
    assert len(shared) == 1
    msg = shared[0]
    assert ": 1 image file(s)" in msg and p1 in msg and p2 in msg
    assert all(ds.sample_ids[i] in msg for i in rows)


def test_validate_reports_every_row_of_the_shared_file(linked):
    root, rows, (p1, p2) = linked
    ds = ReXGradientValidDataset(root)
    for decode in (False, True):
        report = ds.validate(decode=decode, progress=False)
        assert report.counts()["shared_image"] == 3
        got = report.problems[report.problems["problem"] == "shared_image"]
        assert sorted(got["sample_id"]) == sorted(ds.sample_ids[i] for i in rows)
        assert all(p1 in m and p2 in m for m in got["message"])
        assert not report.ok


def test_same_patient_links_are_not_flagged(tmp_path):
    root = write_rexgradient(tmp_path, studies={"valid": 2}, image_size=(96, 80))
    ds = ReXGradientValidDataset(root)
    pids = ds.harmonized_df["patient_id"].tolist()
    b = next(i for i in range(1, len(pids)) if pids[i] == pids[0])
    ds.image_file(b).unlink()
    os.link(ds.image_file(0), ds.image_file(b))
    assert ds.validate(decode=False, progress=False).ok
    shutil.rmtree(tmp_path / "c", ignore_errors=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedImageWarning)
        ReXGradientValidDataset(root, cache_dir=tmp_path / "c").cache_keys()
