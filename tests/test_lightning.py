"""radharmony.lightning: the DataModule's splits, loaders, rank slices and errors."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest

pl = pytest.importorskip("pytorch_lightning")

import torch  # noqa: E402

import radharmony  # noqa: E402
from radharmony.errors import RadHarmonyError  # noqa: E402
from radharmony.fake import make_fake  # noqa: E402
from radharmony.lightning import RadHarmonyDataModule  # noqa: E402


@pytest.fixture(scope="module")
def nih(tmp_path_factory):
    return make_fake("nih_cxr14", tmp_path_factory.mktemp("nih"))["base_image_dir"]


def test_folds_are_the_datasets_folds(nih):
    dm = RadHarmonyDataModule("nih_cxr14", root=nih, fold=1, n_splits=3, batch_size=4,
                              output_cls=True)
    dm.setup("fit")
    ds = radharmony.get_dataset_class("nih_cxr14")(nih, output_cls=True)
    train, val = ds.get_folds(3)[1]
    assert list(dm.val_ds.harmonized_df["sample_id"]) == list(val.harmonized_df["sample_id"])
    assert set(dm.train_ds.harmonized_df["patient_id"]).isdisjoint(
        dm.val_ds.harmonized_df["patient_id"])
    batch = next(iter(dm.val_dataloader()))
    assert batch["img"].shape[1:] == (1, 224, 224) and batch["cls"].shape[1] == 14
    assert len(dm.train_dataloader().dataset) == len(train)


def test_balanced_training_gives_each_rank_a_disjoint_slice(nih):
    merged = [radharmony.get_dataset_class("nih_cxr14")(nih, output_cls=True)]
    slices = []
    for rank in range(2):
        dm = RadHarmonyDataModule(merged, n_splits=3, batch_size=4, balance="source", seed=3)
        dm.trainer = SimpleNamespace(world_size=2, global_rank=rank)
        sampler = dm.train_dataloader().sampler
        # a DistributedSampler to Lightning: not dealt by rank a second time, and Lightning
        # calls its set_epoch each epoch
        assert isinstance(sampler, torch.utils.data.DistributedSampler)
        sampler.set_epoch(1)
        slices.append(list(sampler))
    draw = dm.train_dataloader().sampler.sampler
    draw.set_epoch(1)
    whole = draw.draw().tolist()
    assert slices[0] == whole[0::2] and slices[1] == whole[1::2]
    assert len(slices[0]) == len(slices[1]) > 0


def test_a_trainer_fits_one_epoch(nih):
    class Probe(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(224 * 224, 14)
            self.seen = 0

        def training_step(self, batch, _):
            self.seen += len(batch["img"])
            logits = self.head(batch["img"].float().flatten(1))
            return torch.nn.functional.binary_cross_entropy_with_logits(
                logits, batch["cls"], weight=batch["cls_mask"])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    dm = RadHarmonyDataModule("nih_cxr14", root=nih, n_splits=3, batch_size=4, output_cls=True)
    model = Probe()
    before = model.head.weight.detach().clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pl.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                   enable_progress_bar=False, enable_model_summary=False).fit(model, datamodule=dm)
    assert model.seen == len(dm.train_ds)
    assert not torch.equal(before, model.head.weight)


def test_level_is_passed_to_the_dataset_class(nih, monkeypatch):
    seen = {}
    cls = radharmony.get_dataset_class("nih_cxr14")
    monkeypatch.setattr("radharmony.registry.get_dataset_class",
                        lambda key: lambda root, **kw: seen.update(kw) or cls(root))
    RadHarmonyDataModule("nih_cxr14", root=nih, level="study").setup("fit")
    assert seen["level"] == "study"


@pytest.mark.parametrize("kwargs, words", [
    ({"source": "nih_cxr14"}, "needs root="),
    ({"source": "nih_cxr14", "fold": 5}, "fold is out of range"),
    ({"source": "nih_cxr14", "level": "patient"}, "unknown level"),
    ({"source": 3}, "not a dataset"),
])
def test_mistakes_read_well(kwargs, words):
    with pytest.raises(RadHarmonyError, match=words):
        RadHarmonyDataModule(**kwargs).setup("fit")


def test_no_test_set_says_how_to_give_one(nih):
    dm = RadHarmonyDataModule("nih_cxr14", root=nih, n_splits=3)
    with pytest.raises(RadHarmonyError, match="test="):
        dm.test_dataloader()
