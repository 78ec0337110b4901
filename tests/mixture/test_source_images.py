"""Reading a mixture's images by path: each directory resolved once per process and every file
``lstat``-ed on each read (a path leaving the root, or a symlink reaching outside, is refused
every time), and the cache's packs folder listed again only when it changed."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest

from radharmony.errors import PathSafetyError
from radharmony.imaging.cache import ImageCache
from radharmony.mixture.images import _locate, _resolved


@pytest.fixture
def reader(tmp_path):
    root = tmp_path / "root"
    (root / "p1" / "s1").mkdir(parents=True)
    for name in ("a.png", ".hidden.png"):
        (root / "p1" / "s1" / name).write_bytes(b"x")
    (tmp_path / "outside.png").write_bytes(b"y")
    return SimpleNamespace(root=str(root), dirs={}, packs_stamp=-1,
                           image_cache=ImageCache(tmp_path / "cache", {"size": 8}))


def test_a_directory_is_resolved_once_and_each_file_lstat_ed_on_every_read(reader):
    real = os.path.realpath(reader.root)
    full, st = _resolved(reader, "p1/s1/a.png")
    assert full == f"{real}/p1/s1/a.png" and st.st_size == 1
    assert reader.dirs == {"p1/s1": f"{real}/p1/s1"}
    os.truncate(full, 3)  # rewritten: the next read sees its new identity
    assert _resolved(reader, "p1/s1/a.png")[1].st_size == 3
    # a hidden name takes the exact route (no lstat handed on), still inside the root
    assert _resolved(reader, "p1/s1/.hidden.png") == (f"{real}/p1/s1/.hidden.png", None)


def test_paths_leaving_the_root_are_refused_even_under_a_resolved_directory(reader, tmp_path):
    _resolved(reader, "p1/s1/a.png")  # the directory is remembered
    with pytest.raises(PathSafetyError, match="outside"):
        _resolved(reader, "p1/s1/../../../outside.png")
    link = os.path.join(reader.root, "p1", "s1", "link.png")
    os.symlink(tmp_path / "outside.png", link)
    with pytest.raises(PathSafetyError, match="outside"):
        _resolved(reader, "p1/s1/link.png")
    with pytest.raises(PathSafetyError, match="not a relative path"):
        _resolved(reader, "/etc/passwd")


def test_the_packs_folder_is_listed_again_only_when_it_changed(reader, monkeypatch):
    listed = []
    packs = reader.image_cache.packs
    monkeypatch.setattr(reader.image_cache, "packs",
                        lambda *, rescan=False: listed.append(rescan) or packs(rescan=rescan))
    folder = reader.image_cache.images / "packs"
    _locate(reader, ["p1/s1/a.png"])  # no packs folder yet: listed (none)
    folder.mkdir(parents=True)
    _locate(reader, ["p1/s1/a.png"])  # it appeared: listed
    _locate(reader, ["p1/s1/a.png"])  # unchanged: not listed
    os.utime(folder, ns=(10**18, 10**18))  # a pack added or removed changes its time
    packs_, pack_of, row_of = _locate(reader, ["p1/s1/a.png"])
    assert listed == [True, True, False, True]
    assert packs_ == [] and pack_of.tolist() == [-1] and row_of.tolist() == [-1]


def test_a_batch_of_one_pack_is_converted_while_the_caller_reads_its_columns(monkeypatch):
    """The helper thread converts the pack's rows while ``meanwhile`` runs (once); without
    the helper the rows are converted first, then ``meanwhile`` runs: the same pixels."""
    import torch

    from radharmony.mixture import images
    from radharmony.mixture.images import SourceImages

    src = SourceImages({"images": {"mode": "cache", "size": 224}}, {}, size=224)
    rng = np.random.default_rng(0)
    q = rng.integers(0, 256, (80, 224, 224), dtype=np.uint8)
    rows = rng.permutation(80)[:64]
    monkeypatch.setattr(src, "_one_pack", lambda items: (q, rows))
    expected = src.pipeline.to_tensor(q[rows], torch.float32).clone()
    started, real = [], images.levels_ahead
    monkeypatch.setattr(images, "levels_ahead",
                        lambda *a, **k: started.append(real(*a, **k)) or started[-1])
    calls = []
    got = src.tensor([("s", "x.png")] * 64, meanwhile=lambda: calls.append(len(started)))
    assert started[0] is not None and calls == [1]  # run while the helper converted
    assert torch.equal(got, expected)
    monkeypatch.setattr(images, "levels_ahead", lambda *a, **k: None)
    order = []
    convert = src.pipeline.to_tensor  # a frozen dataclass's staticmethod: patched on its class
    monkeypatch.setattr(type(src.pipeline), "to_tensor", staticmethod(
        lambda *a, **k: order.append("convert") or convert(*a, **k)))
    got = src.tensor([("s", "x.png")] * 64, meanwhile=lambda: order.append("meanwhile"))
    assert order == ["convert", "meanwhile"] and torch.equal(got, expected)
