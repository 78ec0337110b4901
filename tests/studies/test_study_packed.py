"""Packed study batches (``packed=True``): a study's real images only, one study after another;
the values, order and counts are the padded batch's real slots, whichever way the images
come and whichever collate batches them."""

from __future__ import annotations

import doctest
import warnings

import numpy as np
import pytest
import torch

import radharmony
import radharmony.data.collate as collate_module
from radharmony.data import batches
from radharmony.data.studies import PACKED_SAMPLE_KEYS, PRIOR_KEYS
from radharmony.datasets.rexgradient import ReXGradientTrainDataset
from radharmony.errors import RadHarmonyError, StudyWarning

from study_fixtures import rex_fake  # noqa: F401 (fixture)


def _paths(root):
    return root / "deid_png", root / "download" / "metadata" / "train_metadata_view_position.json"


def _studies(root, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        return ReXGradientTrainDataset(*_paths(root), level="study", max_images=2, prior=True,
                                       **kw)


@pytest.mark.parametrize("where", ["pack", "loose", "uncached", "transform"])
def test_packed_batches_are_the_padded_batches_real_images(rex_fake, tmp_path, where,
                                                           monkeypatch):
    kw = dict(cache_dir=None if where in ("uncached", "transform") else tmp_path)
    if where == "pack":
        ReXGradientTrainDataset(*_paths(rex_fake), **kw).pre_cache(progress=False)
        monkeypatch.setattr(batches, "_gather", None)  # one pack: converted out of its map
    if where == "transform":  # a user transform: each image's own tensor
        def transform(sample):
            level = sum(map(ord, sample["img"])) % 200 / 100 - 1  # one value per file
            return {**sample, "img": np.full((1, 8, 8), level, np.float32)}
        kw["transform"] = transform
    padded, packed = _studies(rex_fake, **kw), _studies(rex_fake, packed=True, **kw)
    order = [*range(len(padded) - 1, -1, -3), 0, 0]  # shuffled, a study twice
    counts = [len(padded.index.rows[s]) for s in order]
    assert 1 in counts and 2 in counts
    assert -1 in padded.prior_of[order] and (padded.prior_of[order] >= 0).any()
    ref = radharmony.collate(padded.__getitems__(order))
    singles = [packed[s] for s in order]
    assert list(singles[0]) == [*PACKED_SAMPLE_KEYS, *(k.replace("img_mask", "num_images")
                                                       for k in PRIOR_KEYS)]
    assert [s["num_images"] for s in singles] == counts
    for single, read in zip(singles, packed.__getitems__(order)):  # each study's own rows
        assert torch.equal(single["img"], read["img"])
        assert torch.equal(single["prior_img"], read["prior_img"])
    for fn in (radharmony.collate, None):  # ours, and torch's default collate
        loader = torch.utils.data.DataLoader(packed, batch_size=len(order), sampler=order,
                                             collate_fn=fn)
        batch = next(iter(loader))
        assert batch["num_images"].tolist() == counts
        assert batch["prior_num_images"].tolist() == ref["prior_img_mask"].sum(1).tolist()
        assert torch.equal(batch["img"], ref["img"][ref["img_mask"]])
        assert torch.equal(batch["prior_img"], ref["prior_img"][ref["prior_img_mask"]])
        assert batch["views"] == ref["views"] and batch["sample_ids"] == ref["sample_ids"]
        back, mask = radharmony.pad_packed(batch["img"], batch["num_images"], max_images=2,
                                           fill=-1)
        assert torch.equal(back, ref["img"]) and torch.equal(mask, ref["img_mask"])
    together = radharmony.collate(singles)  # samples read one by one: concatenated
    assert torch.equal(together["img"], batch["img"])
    assert torch.equal(together["num_images"], batch["num_images"])


def test_a_packed_batch_is_handed_out_without_a_copy(rex_fake, tmp_path):
    ReXGradientTrainDataset(*_paths(rex_fake), cache_dir=tmp_path).pre_cache(progress=False)
    packed = _studies(rex_fake, packed=True, cache_dir=tmp_path)
    samples = packed.__getitems__(list(range(6)))
    n = [s["num_images"] for s in samples]
    batch = radharmony.collate(samples)
    assert batch["img"].shape[0] == sum(n)
    offsets = np.cumsum([0, *n[:-1]]) * batch["img"][0].numel() * batch["img"].element_size()
    assert [s["img"].data_ptr() - batch["img"].data_ptr() for s in samples] == offsets.tolist()
    samples[1] = dict(samples[1], img=samples[1]["img"].clone())  # a value replaced: a new one
    again = radharmony.collate(samples)
    assert torch.equal(again["img"], batch["img"])
    assert again["img"].data_ptr() != batch["img"].data_ptr()


def test_packed_batches_from_a_worker_and_a_study_transform(rex_fake, tmp_path):
    ReXGradientTrainDataset(*_paths(rex_fake), cache_dir=tmp_path).pre_cache(progress=False)
    packed = _studies(rex_fake, packed=True, cache_dir=tmp_path)
    main = next(iter(torch.utils.data.DataLoader(packed, batch_size=7)))
    worker = next(iter(torch.utils.data.DataLoader(packed, batch_size=7, num_workers=1)))
    assert torch.equal(main["img"], worker["img"])
    assert torch.equal(main["num_images"], worker["num_images"])
    seen = []

    def flip(sample):
        seen.append(tuple(sample["img"].shape))
        return {**sample, "img": sample["img"].flip(-1)}
    train, val = packed.get_datasets(3, train_transform=flip)
    assert train.packed and val.packed and "packed=True" in repr(train)
    batch = next(iter(torch.utils.data.DataLoader(train, batch_size=5)))
    assert seen == [(n, 1, 224, 224) for n in batch["num_images"].tolist()]
    assert batch["img"].shape[0] == int(batch["num_images"].sum())
    assert packed.filter(np.arange(len(packed)) % 2 == 0).packed


def test_packed_is_a_study_option_and_pad_packed_checks_its_counts(rex_fake, tmp_path):
    with pytest.raises(RadHarmonyError, match="study-level options"):
        ReXGradientTrainDataset(*_paths(rex_fake), cache_dir=None, packed=True)
    padded, packed = _studies(rex_fake, cache_dir=None), _studies(rex_fake, packed=True,
                                                                  cache_dir=None)
    with pytest.raises(RadHarmonyError, match="1 of 2 samples packed"):
        radharmony.collate([packed[0], padded[1]])
    with pytest.raises(RadHarmonyError, match="mixes packed and padded"):
        torch.utils.data.default_collate([padded[0], packed[1]])
    x = torch.zeros(3, 4)
    with pytest.raises(RadHarmonyError, match="3 rows"):
        radharmony.pad_packed(x, torch.tensor([2, 2]))
    with pytest.raises(RadHarmonyError, match="max_images >= 2"):
        radharmony.pad_packed(x, [2, 1], max_images=1)
    out, mask = radharmony.pad_packed(x[:0], torch.zeros(0, dtype=torch.long))
    assert out.shape == (0, 0, 4) and mask.shape == (0, 0)
    result = doctest.testmod(collate_module)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_cached_loader_reads_study_batches(rex_fake, tmp_path, packed):
    """CachedLoader over a study dataset caches its images first and gives the DataLoader's
    batches, in its threads as well."""
    studies = _studies(rex_fake, packed=packed, cache_dir=tmp_path)
    for workers in (0, 2):
        loader = radharmony.CachedLoader(studies, batch_size=4, num_workers=workers,
                                         progress=False)
        plain = torch.utils.data.DataLoader(studies, batch_size=4,
                                            collate_fn=radharmony.collate)
        got, want = list(loader), list(plain)
        assert len(got) == len(want) == len(loader)
        for a, b in zip(got, want):
            assert torch.equal(a["img"], b["img"]) and a["sample_ids"] == b["sample_ids"]
            assert torch.equal(a["prior_img"], b["prior_img"])
