"""torch's default collate on study samples (issue 29 item 4 at study level): a batch of studies
with different image counts and absent sections batches without ``collate_fn``, and equals
``radharmony.collate``'s batch."""

from __future__ import annotations

import warnings

import torch

import radharmony
from radharmony.datasets.rexgradient import ReXGradientTrainDataset
from radharmony.errors import StudyWarning

from study_fixtures import rex_fake  # noqa: F401 (fixture)


def test_default_dataloader_batches_studies(rex_fake, tmp_path):
    images = rex_fake / "deid_png"
    meta = rex_fake / "download" / "metadata" / "train_metadata_view_position.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        ds = ReXGradientTrainDataset(images, meta, level="study", prior=True, cache_dir=tmp_path,
                                     dtype=torch.float32)
    n = min(len(ds), 12)
    plain = next(iter(torch.utils.data.DataLoader(ds, batch_size=n)))
    ours = next(iter(torch.utils.data.DataLoader(ds, batch_size=n,
                                                 collate_fn=radharmony.collate)))
    samples = [ds[i] for i in range(n)]
    # the fixture has studies of different sizes and absent sections: what the default failed on
    assert len({len(s["views"]) for s in samples}) > 1
    assert any(s[k] is None for s in samples for k in ("indication", "comparison", "history"))
    assert plain["img"].shape == ours["img"].shape and torch.equal(plain["img"], ours["img"])
    assert torch.equal(plain["img_mask"], ours["img_mask"])
    for key in ("views", "sample_ids", "indication", "history", "findings", "prior_study_id"):
        assert list(plain[key]) == [s[key] for s in samples], key
    # a split's study transform (train_transform) keeps that: its samples batch the same way
    train = ds.get_datasets(train_transform=lambda sample: sample)
    after = next(iter(torch.utils.data.DataLoader(train, batch_size=n)))
    assert torch.equal(after["img"], plain["img"]) and after["views"] == plain["views"]
    assert list(after["indication"]) == list(plain["indication"])
