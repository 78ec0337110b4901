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


# -- DICOMs without a Transfer Syntax UID (real VinDr-CXR v1.0.0 files) ----------------------------
def test_dicom_without_transfer_syntax_is_read_as_implicit_little_endian(tmp_path):
    import pydicom

    from radharmony.fake.dicom import write_dicom
    from radharmony.fake.images import synthetic_cxr
    from radharmony.imaging import dicom as dicom_mod
    from radharmony.imaging import read as read_mod

    img = synthetic_cxr(64, 48, rng=np.random.default_rng(0), bits=16)
    good = write_dicom(tmp_path / "good.dicom", img)
    bad = tmp_path / "bad.dicom"
    ds = pydicom.dcmread(good)
    del ds.file_meta.TransferSyntaxUID
    ds.save_as(bad, implicit_vr=True, little_endian=True)
    assert "TransferSyntaxUID" not in pydicom.dcmread(bad).file_meta
    dicom_mod._syntax_warned = False
    with pytest.warns(UserWarning, match="no Transfer Syntax UID.*Implicit VR Little Endian"):
        arr, _ = read_mod.read_image(bad)
    expected, _ = read_mod.read_image(good)
    np.testing.assert_array_equal(arr, expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        read_mod.read_image(bad)


# -- dependency floors: each one an installable, tested version ---------------------------------
#: dependency -> (the first release with an API radharmony uses, that API)
API_FLOORS = {"pydicom": ("3.0", "pydicom.pixels.apply_voi_lut (imaging/read.py)"),
              "pandas": ("2.0", "pd.api.types.infer_dtype on Arrow-backed strings"),
              "torch": ("2.2", "torch.utils.data.Dataset.__getitems__")}


def test_declared_floors_cover_the_apis_used():
    import importlib.util
    import sys
    from pathlib import Path

    tools = Path(__file__).resolve().parents[1] / "tools" / "min_requirements.py"
    spec = importlib.util.spec_from_file_location("min_requirements", tools)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["min_requirements"] = mod
    spec.loader.exec_module(mod)
    floors = mod.floors("test")
    version = lambda v: tuple(int(p) for p in v.split("."))  # noqa: E731
    for name, (needed, api) in API_FLOORS.items():
        assert version(floors[name]) >= version(needed), f"{name}>={floors[name]} lacks {api}"
    makefile = (tools.parents[1] / "Makefile").read_text()
    assert "test-min:" in makefile and "min_requirements.py" in makefile


# -- the CLI: warns only about what the user asked for; -q silences; help offers what works ----
def _cli(argv):
    from radharmony.cli.main import main

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        code = main(argv)
    return code, [str(w.message) for w in rec], [w.category for w in rec]


def test_cli_warns_only_about_flags_the_user_passed(tmp_path):
    from radharmony.errors import UnsupportedOutputWarning

    images = write_rexgradient(tmp_path, studies={"valid": 3})  # no box file: no 'bbox'
    code, messages, categories = _cli(["cache", "rexgradient_valid", "--root", str(images),
                                       "--cache-dir", str(tmp_path / "cache"), "--json"])
    assert code == 0
    assert UnsupportedOutputWarning not in categories, messages


def test_cli_quiet_silences_warnings(tmp_path, capsys):
    root = write_mimic(tmp_path, images=False)
    code, messages, _ = _cli(["info", "mimic_cxr_jpg", "--root", str(root), "--json"])
    assert code == 0 and any("without a row in the CheXpert label table" in m for m in messages)
    code, messages, _ = _cli(["info", "mimic_cxr_jpg", "--root", str(root), "--json", "-q"])
    assert code == 0 and messages == []


def test_harmonize_help_offers_only_keys_it_accepts(capsys):
    from radharmony.cli.main import main

    with pytest.raises(SystemExit):
        main(["harmonize", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    # a family is accepted (issue 29 item 3): every split, one file each, in an --out folder
    assert "or a dataset family for every split" in text
    assert "FOLDER/<key>.parquet per split" in text
    with pytest.raises(SystemExit):
        main(["info", "--help"])
    assert "or a dataset family" in " ".join(capsys.readouterr().out.split())


# -- layouts users actually have, each found without flags ---------------------------------------
def _same_ids_and_readable(a, b):
    assert list(a.sample_ids) == list(b.sample_ids)
    for i in (0, len(b) - 1):
        assert b[i]["img"].shape == (1, 224, 224)
        assert b.image_file(i).is_file()


def test_nih_kaggle_nesting_is_found(tmp_path):
    from radharmony.datasets.nih import NIHChestXray14Dataset, NIHGoogleDataset
    from radharmony.fake.nih import write_nih

    flat = write_nih(tmp_path / "flat")
    kaggle = write_nih(tmp_path / "kaggle", layout="kaggle")
    assert (kaggle / "images_002" / "images").is_dir()
    for cls in (NIHChestXray14Dataset, NIHGoogleDataset):
        a, b = cls(flat, cache_dir=None), cls(kaggle, cache_dir=None)
        assert b.harmonized_df["image_path"].str.fullmatch(r"images_\d{3}/images/\d+_\d+\.png").all()
        _same_ids_and_readable(a, b)
        assert b.harmonized_df["patient_id"].tolist() == a.harmonized_df["patient_id"].tolist()


def test_padchest_flat_layout_is_found(tmp_path):
    from radharmony.datasets.padchest import PadChestDataset
    from radharmony.fake.padchest import write_padchest

    nested = PadChestDataset(write_padchest(tmp_path / "nested"), cache_dir=None)
    flat = PadChestDataset(write_padchest(tmp_path / "flat", flat=True), cache_dir=None)
    assert not flat.harmonized_df["image_path"].str.contains("/").any()
    assert len(flat) == len(nested)
    assert [p.rsplit("/", 1)[-1] for p in nested.harmonized_df["image_path"]] == \
        flat.harmonized_df["image_path"].tolist()
    for i in (0, len(flat) - 1):
        assert flat[i]["img"].shape == (1, 224, 224)


@pytest.mark.parametrize("fmt", ["png", "jpg"])
def test_rsna_converted_to_png_or_jpeg_is_found(tmp_path, fmt):
    from radharmony.datasets.rsna import RSNAPneumoniaDataset
    from radharmony.fake.rsna import write_rsna

    dcm = RSNAPneumoniaDataset(write_rsna(tmp_path / "dcm"), cache_dir=None)
    conv = RSNAPneumoniaDataset(write_rsna(tmp_path / fmt, image_format=fmt), cache_dir=None)
    assert conv.harmonized_df["image_path"].str.endswith(f".{fmt}").all()
    _same_ids_and_readable(dcm, conv)


# -- documented DataLoaders use radharmony.collate; the troubleshooting names the error -----------
def test_every_documented_dataloader_uses_radharmony_collate():
    import re
    from pathlib import Path

    from torch.utils.data import default_collate

    repo = Path(__file__).resolve().parents[1]
    docs = [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]
    calls = 0
    for doc in docs:
        text = doc.read_text()
        for m in re.finditer(r"DataLoader\(", text):
            depth, j = 1, m.end()
            while depth and j < len(text):
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
            call = text[m.start():j]
            if "DataLoader(ds)" in call or "import" in text[max(0, m.start() - 7):m.start()]:
                continue
            if "# torch's default collate" in text[j:text.find("\n", j)]:
                continue  # shown on purpose: it batches radharmony samples too (issue 29 item 4)
            calls += 1
            assert "collate_fn=" in call or "CachedLoader" in call, f"{doc.name}: {call}"
    assert calls >= 3
    with pytest.raises(TypeError) as info:
        default_collate([{"report": None}, {"report": "a"}])
    trouble = (repo / "docs" / "troubleshooting.md").read_text()
    assert str(info.value).split(";")[0] in trouble and "collate_fn=radharmony.collate" in trouble
    batch = radharmony.collate([{"report": None}, {"report": "a"}])
    assert batch["report"] == [None, "a"]
