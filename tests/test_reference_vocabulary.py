"""Code ported from the reference library finds its names: with the reference's meaning, or an
error that names the radharmony replacement."""

from __future__ import annotations

import pickle
import warnings

import pandas as pd
import pytest

import radharmony
from radharmony.datasets import CATALOG
from radharmony.datasets.rexgradient import (EXTRA_OUTPUT_COLS, ReXGradientValidDataset,
                                             ReXGradientValidHarmonizer)
from radharmony.datasets.xraydar import LABEL_COLS as XRAYDAR_LABELS, XRaydarMultimodalDataset
from radharmony.errors import RegistryError, RowsDroppedWarning, SavedFileError
from radharmony.fake import write_rexgradient


@pytest.fixture(scope="module")
def rex(tmp_path_factory):
    return write_rexgradient(tmp_path_factory.mktemp("rex"), studies={"valid": 12})


def test_label_cols_and_extra_output_cols_on_every_class():
    for cls in CATALOG.values():
        for c in (cls, cls.harmonizer_class):
            assert c.LABEL_COLS == list(cls.spec.label_cols), c
            assert set(c.EXTRA_OUTPUT_COLS) <= set(cls.spec.extra_cols), c
    assert ReXGradientValidDataset.LABEL_COLS == [] == ReXGradientValidHarmonizer.LABEL_COLS
    assert ReXGradientValidHarmonizer.EXTRA_OUTPUT_COLS == list(EXTRA_OUTPUT_COLS) == \
        ["accession_number", "patient_sex", "patient_age", "study_date"]
    assert XRaydarMultimodalDataset.LABEL_COLS == list(XRAYDAR_LABELS)
    assert len(XRAYDAR_LABELS) == 37 and list(XRAYDAR_LABELS) == sorted(XRAYDAR_LABELS)


def test_dataset_get_set_and_verify(rex, tmp_path):
    ds = ReXGradientValidDataset(rex, cache_dir=None)
    df = ds.get_harmonized_df()
    df.loc[0, "report"] = "edited"  # a writable copy
    assert ds.harmonized_df["report"].iloc[0] != "edited"
    ds.set_harmonized_df(df.iloc[:5])
    assert len(ds) == 5 and ds[0]["sample_id"] == df["sample_id"].iloc[0]
    assert ds.verify_images(drop_missing=False).empty
    ds.image_file(1).unlink()
    missing = ds.verify_images(drop_missing=False)
    assert list(missing["sample_id"]) == [df["sample_id"].iloc[1]] and len(ds) == 5
    with pytest.warns(RowsDroppedWarning, match="dropped 1 rows with missing images"):
        ds.verify_images()
    assert len(ds) == 4 and df["sample_id"].iloc[1] not in set(ds.sample_ids)


def test_harmonizer_vocabulary(rex, tmp_path):
    h = ReXGradientValidHarmonizer(base_image_dir=rex)
    full = h.harmonized_df
    assert h.get_label_cols() == [] and len(full) > 3
    pd.testing.assert_frame_equal(h.get_harmonized_df(), full)
    studies, patients = full["study_id"].unique()[:2], full["patient_id"].unique()[:1]
    assert set(h.harmonize(study_ids=studies)["study_id"]) == set(studies)
    assert set(h.harmonize(patient_ids=list(patients))["patient_id"]) == set(patients)
    assert len(h.harmonize(sample_n=3)) == 3 and len(h.harmonize()) == len(full)
    h.harmonized_df = full.iloc[:4]
    assert len(h.harmonize()) == 4
    path = h.save(tmp_path / "h.parquet")
    assert len(ReXGradientValidHarmonizer.load_from_saved(path).harmonize()) == 4
    pickled = tmp_path / "reference.pkl"
    pickled.write_bytes(pickle.dumps({"version": 1, "harmonized_df": None}, protocol=4))
    with pytest.raises(SavedFileError, match=r"is a pickle.*harmonized_df=pd.read_csv"):
        ReXGradientValidHarmonizer.load_from_saved(pickled)
    # harmonizer_path= without base_image_dir: the root is read back from the save
    h2 = ReXGradientValidHarmonizer(base_image_dir=rex)
    ds = ReXGradientValidDataset(None, harmonizer_path=h2.save(tmp_path / "h2.parquet"),
                                 cache_dir=None)
    assert ds.base_image_dir == rex and ds[0]["img"].shape == (1, 224, 224)


def test_reference_positional_order_beyond_the_first_three(rex):
    """Ported code may pass the reference's whole positional order (base_image_dir, csv_path,
    transform, cache_dir, output_cls, output_mask, output_report, ...): the extra ones are
    read as those keywords; twice or too many is a RadHarmonyError."""
    import torch

    from radharmony.data.dataset import BaseRadiologicalDataset
    from radharmony.errors import RadHarmonyError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = ReXGradientValidDataset(rex, None, None, None, False, False, True, False, None,
                                     None, None, torch.float32)
    assert ds.cache_dir is None and ds.outputs == {"report"} and ds.dtype == torch.float32
    with pytest.raises(RadHarmonyError, match="output_report twice.*argument 7"):
        ReXGradientValidDataset(rex, None, None, None, False, False, True, output_report=True)
    with pytest.raises(RadHarmonyError, match="13 positional arguments"):
        ReXGradientValidDataset(*[None] * 13)

    class Own(BaseRadiologicalDataset):  # a class with its own positional arguments
        def __init__(self, a, b, c, d):
            self.got = (a, b, c, d)

    assert Own(1, 2, 3, 4).got == (1, 2, 3, 4)


def test_registry_vocabulary_and_family_keys():
    assert radharmony.resolve_dataset("rexgradient", split="valid") is ReXGradientValidDataset
    assert radharmony.resolve_dataset("ReXGradientValidDataset") is ReXGradientValidDataset
    assert radharmony.resolve_dataset(ReXGradientValidHarmonizer) is ReXGradientValidDataset
    assert radharmony.resolve_dataset("padchest").spec.key == "padchest"
    with pytest.raises(RegistryError, match="family.*rexgradient_train.*split="):
        radharmony.get_dataset_class("rexgradient")
    with pytest.raises(RegistryError, match="no split 'val'"):
        radharmony.resolve_dataset("rexgradient", split="val")
    assert callable(radharmony.register_dataset)


def test_register_dataset_as_decorator_factory(monkeypatch, rex):
    """``@register_dataset("key")`` (the reference's form) next to ``register_dataset(cls)``,
    on a dataset class or on a harmonizer class alone."""
    import dataclasses

    from radharmony import registry

    monkeypatch.setattr(registry, "_USER", {})

    def harmonizer(key):
        spec = dataclasses.replace(ReXGradientValidHarmonizer.spec, key=key)
        return type(f"H_{key}", (ReXGradientValidHarmonizer,), {"spec": spec})

    @radharmony.register_dataset("site_a")
    class SiteA(ReXGradientValidDataset):
        harmonizer_class = harmonizer("site_a")

    assert isinstance(SiteA, type) and radharmony.get_dataset_class("site_a") is SiteA
    SiteB = type("SiteB", (ReXGradientValidDataset,), {"harmonizer_class": harmonizer("site_b")})
    assert radharmony.register_dataset(SiteB) is SiteB
    assert radharmony.register_dataset()(SiteB) is SiteB
    HC = radharmony.register_dataset("site_c")(harmonizer("site_c"))
    assert issubclass(HC, ReXGradientValidHarmonizer)  # the harmonizer comes back unchanged
    ds = radharmony.get_dataset_class("site_c")(rex, cache_dir=None)
    assert ds.harmonized_df["sample_id"].str.startswith("site_c:").all()
    assert {"site_a", "site_b", "site_c"} <= set(radharmony.list_datasets())
    with pytest.raises(RegistryError, match="spec has key 'site_b'.*register_dataset.'site_b'."):
        radharmony.register_dataset("other")(SiteB)
    with pytest.raises(RegistryError, match="needs a dataset class"):
        radharmony.register_dataset("x")(object)


def test_get_folds_defaults_to_five(rex):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = ReXGradientValidDataset(rex, cache_dir=None)
    assert len(ds.get_folds()) == 5
