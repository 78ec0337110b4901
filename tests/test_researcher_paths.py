"""The paths a researcher takes, pinned: read-only tables, discovery by file kind, the
uncertain-label policy everywhere, DICOMs without a transfer syntax, one split vocabulary,
the layouts users have, the CLI's warnings and help."""

from __future__ import annotations

import json
import logging
import shutil
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

import radharmony
from radharmony.errors import ReadOnlyTableError
from radharmony.fake import write_rexgradient
from radharmony.fake.chexpert import write_chexpert
from radharmony.fake.mimic import write_mimic
from radharmony.datasets.chexpert import LABELS, CheXpertDataset
from radharmony.datasets.mimic import MIMICCXRJPGDataset
from radharmony.datasets.rexgradient import ReXGradientValidHarmonizer


# -- one truth: in-place edits of harmonized_df are refused -------------------------------------
@pytest.fixture(scope="module")
def chexpert_base(tmp_path_factory):
    return write_chexpert(tmp_path_factory.mktemp("chexpert"), n_patients=6)


@pytest.mark.parametrize("edit", [
    lambda t: t.loc.__setitem__((0, "Edema"), 1.0),
    lambda t: t.iloc.__setitem__((0, 6), 1.0),
    lambda t: t.at.__setitem__((0, "Edema"), 1.0),
    lambda t: t.__setitem__("Edema", 1.0),
    lambda t: t.fillna(0, inplace=True),
    lambda t: t.drop(index=0, inplace=True),
    lambda t: t.insert(0, "x", 1),
    lambda t: setattr(t, "Edema", 1.0),
])
def test_in_place_edits_of_harmonized_df_are_refused(chexpert_base, edit):
    ds = CheXpertDataset(chexpert_base, output_cls=True, cache_dir=None)
    before = ds.harmonized_df.copy()
    with pytest.raises(ReadOnlyTableError, match=r"filter\(mask\).*harmonized_df=edited"):
        edit(ds.harmonized_df)
    pd.testing.assert_frame_equal(ds.harmonized_df, before)


def test_an_edited_copy_applies_everywhere(chexpert_base):
    ds = CheXpertDataset(chexpert_base, output_cls=True, cache_dir=None)
    edited = ds.harmonized_df.copy()  # an ordinary, writable DataFrame
    edited["Edema"] = 1.0
    j = LABELS.index("Edema")
    for d in (CheXpertDataset(chexpert_base, output_cls=True, cache_dir=None,
                              harmonized_df=edited), ds):
        if d is ds:
            ds.set_harmonized_df(edited)
        assert d[0]["cls"][j] == 1 and d[0]["cls_mask"][j] == 1
        assert (d.filter(np.ones(len(d), bool)).harmonized_df["Edema"] == 1).all()
        train, val = d.get_datasets(2)
        assert val[0]["cls"][j] == 1 and (train.harmonized_df["Edema"] == 1).all()


# -- discovery: the kind of file outranks nearness ----------------------------------------------
def test_view_position_json_outranks_a_nearer_plain_json(tmp_path, caplog):
    images = write_rexgradient(tmp_path, studies={"valid": 3}, images=False)
    meta = tmp_path / "download" / "metadata"
    (tmp_path / "metadata").mkdir()  # a nearer copy of the plain file only
    shutil.copy(meta / "valid_metadata.json", tmp_path / "metadata" / "valid_metadata.json")
    with caplog.at_level(logging.INFO, logger="radharmony"):
        h = ReXGradientValidHarmonizer(base_image_dir=images)
        df = h.harmonize()
    assert h.csv_path == meta / "valid_metadata_view_position.json"
    assert df["view_position"].notna().any()
    assert str(h.csv_path) in caplog.text
    (meta / "valid_metadata_view_position.json").unlink()
    with caplog.at_level(logging.INFO, logger="radharmony"):
        h2 = ReXGradientValidHarmonizer(base_image_dir=images)
        h2.harmonize()
    assert h2.csv_path == tmp_path / "metadata" / "valid_metadata.json"
    assert "no valid_metadata_view_position.json found" in caplog.text


# -- MIMIC-CXR-JPG takes uncertain= like CheXpert -----------------------------------------------
def test_mimic_takes_the_uncertain_policy(tmp_path):
    root = write_mimic(tmp_path)
    table = MIMICCXRJPGDataset(root, cache_dir=None).harmonized_df
    labels = table[list(MIMICCXRJPGDataset.spec.label_cols)].to_numpy()
    i = int(np.flatnonzero((labels == -1).any(axis=1))[0])
    unc = labels[i] == -1
    for policy, value, counted in (("keep", -1, 0), ("ignore", 0, 0), ("zeros", 0, 1),
                                   ("ones", 1, 1)):
        s = MIMICCXRJPGDataset(root, output_cls=True, cache_dir=None, uncertain=policy)[i]
        assert (s["cls"].numpy()[unc] == value).all()
        assert (s["cls_mask"].numpy()[unc] == counted).all()
