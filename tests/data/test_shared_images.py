"""One image file under two patients (a hard link and an in-root symlink): flagged by file
identity (device and inode) -- once per dataset build wherever the identities are read (an
epoch, a split's epoch, the cache keys, ``pre_cache``), and row by row by ``validate()``."""

from __future__ import annotations

import os
import shutil
import warnings

import pytest
import torch

import radharmony

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
    msg = shared[0]  # found at row b, the first row of P2 that reaches P1's file
    assert f"{ds.sample_ids[rows[0]]} (patient_id {p1!r}), {ds.sample_ids[rows[1]]} " \
        f"(patient_id {p2!r})" in msg
    assert str(ds.image_file(rows[1])) in msg and "dataset.validate() lists" in msg


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


# -- the ordinary path: build, iterate, split ----------------------------------------------------
def _one_link(root, kind: str):
    """Row ``b`` (not patient P1's) made to reach row ``a``'s file (P1's) by ``kind``: a hard
    link, a relative symlink inside the root, or ``both``: then a further row ``c`` of
    another patient than P1 reaches it by a symlink too. Returns ``(a, b)``."""
    ds = ReXGradientValidDataset(root)
    pids = ds.harmonized_df["patient_id"].tolist()
    others = [i for i in range(len(pids)) if pids[i] != pids[0]]
    a, b = 0, others[0]
    links = [(b, kind)] if kind != "both" else [(b, "hardlink"), (others[1], "symlink")]
    fa = ds.image_file(a)
    for row, how in links:
        f = ds.image_file(row)
        f.unlink()
        if how == "hardlink":
            os.link(fa, f)
        else:
            os.symlink(os.path.relpath(fa, f.parent), f)
    return a, b


def _epoch(ds) -> int:
    loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=0,
                                         collate_fn=radharmony.collate)
    return sum(len(batch["img"]) for batch in loader)


def _ordinary_use(ds, first: str) -> None:
    """What training does with a dataset, in two orders: an epoch that fills the cache then a
    cached one, or ``pre_cache()`` first; then splits, folds and a filter, each iterated."""
    if first == "pre_cache":
        ds.pre_cache(progress=False)
    assert _epoch(ds) == len(ds) and _epoch(ds) == len(ds)  # the second one is cached
    train, val = ds.get_datasets(2)
    assert _epoch(train) + _epoch(val) == len(ds)
    for train, val in ds.get_folds(2):
        _epoch(train), _epoch(val)
    _epoch(ds.filter(ds.harmonized_df["view"] != "nonexistent"))
    ds.cache_keys()
    ds.pre_cache(progress=False)


@pytest.mark.parametrize("kind", ["hardlink", "symlink", "both"])
@pytest.mark.parametrize("first", ["epoch", "pre_cache"])
def test_ordinary_path_warns_once_naming_both_patients(tmp_path, kind, first):
    root = write_rexgradient(tmp_path / "rex", studies={"valid": 4}, image_size=(96, 80))
    a, b = _one_link(root, kind)
    ds = ReXGradientValidDataset(root, cache_dir=tmp_path / "c")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        _ordinary_use(ds, first)
    _warned_once_naming_both(rec, ds, a, b)


def _warned_once_naming_both(rec, ds, a: int, b: int) -> None:
    """``rec`` holds one SharedImageWarning, naming row ``b``'s file and both rows' patients."""
    shared = [str(w.message) for w in rec if issubclass(w.category, SharedImageWarning)]
    assert len(shared) == 1, shared
    p1, p2 = ds.harmonized_df["patient_id"].iat[a], ds.harmonized_df["patient_id"].iat[b]
    assert shared[0].startswith(f"ReXGradientValidDataset: the image file {ds.image_file(b)} "
                                f"is reachable from rows of two patient_ids: "
                                f"{ds.sample_ids[a]} (patient_id {p1!r}), "
                                f"{ds.sample_ids[b]} (patient_id {p2!r}) (a hard link or a "
                                "symlink inside the dataset)")
    assert "remove the link or the duplicate row" in shared[0]


@pytest.mark.parametrize("kind", ["hardlink", "symlink"])
@pytest.mark.parametrize("transform", [False, True])
def test_an_uncached_epoch_warns_once_naming_both_patients(tmp_path, kind, transform):
    """``cache_dir=None`` (and a user transform, which is handed the file's path): the epoch
    reads each file's identity all the same, and warns as a cached epoch does."""
    root = write_rexgradient(tmp_path / "rex", studies={"valid": 4}, image_size=(96, 80))
    a, b = _one_link(root, kind)
    kw = {"transform": lambda s: {**s, "img": torch.zeros(1, 8, 8)}} if transform else {}
    ds = ReXGradientValidDataset(root, cache_dir=None, **kw)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert _epoch(ds) == len(ds) and _epoch(ds) == len(ds)
        train, val = ds.get_datasets(2)
        _epoch(train), _epoch(val)
    _warned_once_naming_both(rec, ds, a, b)


def test_an_uncached_clean_replica_never_warns(tmp_path):
    root = write_rexgradient(tmp_path / "rex", studies={"valid": 4}, image_size=(96, 80))
    ds = ReXGradientValidDataset(root, cache_dir=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedImageWarning)
        assert _epoch(ds) == len(ds)


def test_a_split_read_alone_still_warns_once(tmp_path):
    """P1 and P2 on either side of a split: each side's epoch reads one of the two rows; the
    split shares its build's file table, so the second side finds the first side's file."""
    root = write_rexgradient(tmp_path / "rex", studies={"valid": 4}, image_size=(96, 80))
    a, b = _one_link(root, "hardlink")
    ds = ReXGradientValidDataset(root, cache_dir=tmp_path / "c")
    ids = ds.sample_ids[a], ds.sample_ids[b]
    sides = next(sides for seed in range(50) for sides in [ds.get_datasets(2, seed=seed)]
                 if (ids[0] in sides[0].sample_ids) != (ids[1] in sides[0].sample_ids))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for side in sides + sides:
            _epoch(side)
    assert sum(issubclass(w.category, SharedImageWarning) for w in rec) == 1


def test_clean_replica_never_warns(tmp_path):
    root = write_rexgradient(tmp_path / "rex", studies={"valid": 4}, image_size=(96, 80))
    ds = ReXGradientValidDataset(root, cache_dir=tmp_path / "c")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedImageWarning)
        _ordinary_use(ds, "epoch")


def test_a_replaced_table_reads_its_own_files(tmp_path):
    """``set_harmonized_df`` after reads: the file table (and its watch) learned the old
    rows, so the new table starts a new one (row 0 was the old row 0's file before)."""
    root = write_rexgradient(tmp_path / "rex", studies={"valid": 4}, image_size=(96, 80))
    ds = ReXGradientValidDataset(root, cache_dir=tmp_path / "c")
    ds[0]
    reversed_rows = ds.get_harmonized_df().iloc[::-1]
    ds.set_harmonized_df(reversed_rows)
    assert ds.image_file(0) == ds.image_root(0) / reversed_rows["image_path"].iat[0]
    assert torch.equal(ds[0]["img"], ReXGradientValidDataset(root, cache_dir=None)[-1]["img"])
