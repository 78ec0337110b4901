"""A batch of studies read at once (each real image converted straight into its slot, padding
filled in the same pass) equals, value for value, the single samples collated and each image's
own image-level sample, whichever way the images come: one pack, loose entries, no cache."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import radharmony
from radharmony.data import batches
from radharmony.datasets.rexgradient import ReXGradientTrainDataset
from radharmony.errors import StudyWarning

from study_fixtures import rex_fake  # noqa: F401 (fixture)


def _expected(ds, ref, study: int) -> torch.Tensor:
    """``(K, 1, S, S)`` of ``study`` from the uncached image-level samples, padding -1."""
    size = ds.images.pipeline.size
    out = torch.full((ds.max_images, 1, size, size), -1.0, dtype=ds.images.dtype)
    if study >= 0:
        for i, row in enumerate(ds.index.rows[study]):
            out[i] = ref[int(row)]["img"]
    return out


@pytest.fixture(params=[1, 2], ids=["1 thread", "2 threads"])
def threads(request):
    """torch's thread count (2: the conversion is split over two threads)."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.mark.parametrize("where", ["pack", "loose", "uncached"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_batched_studies_equal_single_samples_collated(rex_fake, tmp_path, where, dtype,
                                                       threads, monkeypatch):
    images = rex_fake / "deid_png"
    meta = rex_fake / "download" / "metadata" / "train_metadata_view_position.json"
    kw = dict(cache_dir=None if where == "uncached" else tmp_path, dtype=dtype)
    if where == "pack":
        ReXGradientTrainDataset(images, meta, **kw).pre_cache(progress=False)
        monkeypatch.setattr(batches, "_gather", None)  # one pack: converted out of its map
    ref = ReXGradientTrainDataset(images, meta, cache_dir=None, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        ds = ReXGradientTrainDataset(images, meta, level="study", max_images=2, prior=True,
                                     **kw)
    assert ds.images.sample_ids.tolist() == ref.sample_ids.tolist()
    order = [*range(len(ds) - 1, -1, -3), 0, 0]  # shuffled, a study twice
    counts = [len(ds.index.rows[s]) for s in order]
    assert 1 in counts and ds.max_images in counts  # padded slots and full studies
    assert -1 in ds.prior_of[order] and (ds.prior_of[order] >= 0).any()
    img = torch.stack([_expected(ds, ref, s) for s in order])
    prior = torch.stack([_expected(ds, ref, int(ds.prior_of[s])) for s in order])
    singles = [ds[s] for s in order]
    for fn in (radharmony.collate, None):  # ours, and torch's default collate
        loader = torch.utils.data.DataLoader(ds, batch_size=len(order), sampler=order,
                                             collate_fn=fn)
        batch = next(iter(loader))
        assert batch["img"].dtype == dtype and batch["img"].shape == img.shape
        assert torch.equal(batch["img"], img) and torch.equal(batch["prior_img"], prior)
        assert batch["img_mask"].tolist() == [[i < n for i in range(2)] for n in counts]
        assert torch.equal(batch["prior_img_mask"], torch.stack([s["prior_img_mask"]
                                                                 for s in singles]))
        assert batch["sample_ids"] == [s["sample_ids"] for s in singles]
    assert torch.equal(radharmony.collate(singles)["img"], img)
    for s, single in zip(order, singles):  # one study alone: the same values
        assert torch.equal(single["img"], _expected(ds, ref, s))
    assert (ds._images([-1, -1]) == -1).all()  # no study at all: padding only


def test_sixteen_bit_storage_pads_and_converts_the_same(rex_fake, tmp_path):
    """16-bit storage converts by arithmetic rather than a table: padding slots are -1 too."""
    from radharmony.imaging.pipeline import DefaultTransform

    images = rex_fake / "deid_png"
    meta = rex_fake / "download" / "metadata" / "train_metadata_view_position.json"
    kw = dict(transform=DefaultTransform(size=64, bits=16), dtype=torch.float32)
    ReXGradientTrainDataset(images, meta, cache_dir=tmp_path, **kw).pre_cache(progress=False)
    ref = ReXGradientTrainDataset(images, meta, cache_dir=None, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        ds = ReXGradientTrainDataset(images, meta, level="study", max_images=2,
                                     cache_dir=tmp_path, **kw)
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=len(ds))))
    assert not batch["img_mask"].all()  # there is padding
    assert torch.equal(batch["img"], torch.stack([_expected(ds, ref, s) for s in range(len(ds))]))


def test_batches_stream_past_the_caches_unless_a_sample_transform_reads_them(
        rex_fake, tmp_path, monkeypatch):
    """Large batches are written with non-temporal stores; with a per-sample transform, which
    reads each image at once, with ordinary ones (it finds them in the caches); same values."""
    pytest.importorskip("numba")
    from radharmony.imaging import ahead, convert, jit

    images = rex_fake / "deid_png"
    meta = rex_fake / "download" / "metadata" / "train_metadata_view_position.json"
    ds = ReXGradientTrainDataset(images, meta, cache_dir=tmp_path, dtype=torch.bfloat16)
    ds.pre_cache(progress=False)
    fn, view = convert._kernel(torch.bfloat16)
    asked = []
    monkeypatch.setitem(jit._loaded, ("convert", "bfloat16"),
                        (lambda *a: asked.append(a[4]) or fn(*a), view))
    helper = ahead._helper()  # and the conversions started ahead (batches after the first)

    class Spy:
        def __getattr__(self, name):
            return getattr(helper, name)

        def post(self, *args):
            asked.append(args[5])
            return helper.post(*args)
    monkeypatch.setattr(ahead, "_helper", Spy)
    monkeypatch.setattr(convert, "MIN_KERNEL_PIXELS", 0)
    monkeypatch.setattr(convert, "STREAM_MIN_BYTES", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        studies = ReXGradientTrainDataset(images, meta, level="study", max_images=2,
                                          cache_dir=tmp_path, dtype=torch.bfloat16)
    got = {}
    for name, d in (("images", ds), ("studies", studies)):
        for flip in (False, True):
            asked.clear()
            if flip:
                d = copy.copy(d)
                d.sample_transform = lambda sample: sample
            got[name, flip] = next(iter(torch.utils.data.DataLoader(
                d, batch_size=4, collate_fn=radharmony.collate)))["img"]
            assert asked and set(asked) == {not flip}, (name, flip)
        assert torch.equal(got[name, False], got[name, True])


def test_a_study_batch_converted_ahead_is_dropped_when_a_file_changed(rex_fake, tmp_path,
                                                                      monkeypatch):
    """A packed study batch is converted on a helper thread while its files are checked; a
    file rewritten in between is served from the file, not from the pack."""
    import os
    import shutil

    import numpy as np

    from radharmony.fake.images import synthetic_cxr, write_png
    from radharmony.imaging import convert

    if not convert.accelerated(torch.float32):
        pytest.skip("the early conversion uses the compiled kernel (numba)")
    root = tmp_path / "rex"
    shutil.copytree(rex_fake, root)
    images = root / "deid_png"
    meta = root / "download" / "metadata" / "train_metadata_view_position.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        ds = ReXGradientTrainDataset(images, meta, level="study", max_images=2,
                                     cache_dir=tmp_path / "cache", dtype=torch.float32)
    ds.images.pre_cache(progress=False)
    started = []
    ahead = batches.levels_ahead
    monkeypatch.setattr(batches, "levels_ahead",
                        lambda *a, **k: started.append(ahead(*a, **k)) or started[-1])
    monkeypatch.setattr(convert, "MIN_KERNEL_PIXELS", 0)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        order = list(range(len(ds)))
        first = ds._images(order).clone()  # this process checks the records
        assert torch.equal(ds._images(order), first) and started[-1] is not None
        study = next(s for s in order if len(ds.index.rows[s]) == 2)
        row = int(ds.index.rows[study][1])
        path, st = ds.images.image_file(row), os.stat(ds.images.image_file(row))
        write_png(path, synthetic_cxr(300, 280, rng=np.random.default_rng(5)))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime restored
        started.clear()
        again = ds._images(order)
        assert started and started[-1] is not None  # started, then dropped
        fresh = ReXGradientTrainDataset(images, meta, cache_dir=None, dtype=torch.float32)
        assert torch.equal(again[study, 1], fresh[row]["img"])
        assert not torch.equal(again[study, 1], first[study, 1])
        assert torch.equal(again[:study], first[:study])
    finally:
        torch.set_num_threads(before)
