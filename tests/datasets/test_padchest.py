"""PadChest: hand-written rows pin exact-term labels, the real table, the fake."""

import gzip

import numpy as np
import pytest

from radharmony.datasets.padchest import (SPEC, LABEL_TERMS, LABELS, PadChestDataset, PadChestHarmonizer,
                                          literal_list)
from radharmony.errors import MetadataError, RadHarmonyError
from radharmony.fake.padchest import FILE, numpy_text, padchest_row, write_padchest, write_table
from radharmony.table.schema import canonical_views, validate

from txv_data import txv_file


def table(tmp_path, label_lists, **kw):
    rows = [padchest_row(f"s{i}_abc.png", i % 2, f"s{i}", f"p{i // 2}", labels=labels,
                         index=i, **kw) for i, labels in enumerate(label_lists)]
    path = write_table(tmp_path / FILE, rows)
    return PadChestHarmonizer(csv_path=path).harmonize()


def positives(row) -> set[str]:
    return {k for k in LABELS if row[k] == 1}


def test_exact_terms_never_substrings(tmp_path):
    df = table(tmp_path, [[" pericardial effusion"], ["pseudonodule"], ["subcutaneous emphysema"],
                          ["pleural effusion", " pneumonia"], ["", " nodule"],
                          ["loculated pleural effusion", "callus rib fracture"], ["normal"]])
    assert [positives(r) for _, r in df.iterrows()] == [
        set(), set(), set(), {"Effusion", "Pneumonia"}, {"Nodule"}, {"Effusion", "Fracture"},
        {"No Finding"}]
    assert df.loc[4, "labels"] == ["nodule"]  # stripped, the empty term dropped
    assert df.loc[0, "labels"] == ["pericardial effusion"]
    assert not df[list(LABELS)].isna().any().any()


def test_missing_labels_report_and_paths(tmp_path):
    rows = [padchest_row("a_1.png", 54, "st", "pt", labels=None, report=None, projection="L"),
            padchest_row("a_2.png", 7, "st", "pt", labels=["normal"], report=" sin hallazg .",
                         projection="AP_horizontal", index=1)]
    df = PadChestHarmonizer(csv_path=write_table(tmp_path / FILE, rows)).harmonize()
    assert df[list(LABELS)].iloc[0].isna().all() and df.loc[0, "labels"] is None
    assert df.loc[1, "No Finding"] == 1  # the other image of the study borrows nothing
    assert df["image_path"].tolist() == ["54/a_1.png", "7/a_2.png"]
    assert df["report"].tolist() == [None, "sin hallazg ."]
    assert df["view_position"].tolist() == ["L", "AP_horizontal"]  # raw; canonical in `view`
    assert list(canonical_views(df["view_position"], SPEC.view_map)) == ["LATERAL", "AP"]
    assert df["projection"].tolist() == ["L", "AP_horizontal"]


def test_labels_are_literals_never_code(tmp_path):
    assert literal_list("['normal', ' nodule']") == ["normal", " nodule"]
    for cell in ["__import__('os').system('true')", "[1, 2]", "['a'"]:
        with pytest.raises(MetadataError, match="not a list of strings"):
            literal_list(cell)
    rows = [padchest_row("a_1.png", 0, "st", "pt", labels=["normal"])]
    rows[0][31] = "__import__('os')"
    with pytest.raises(MetadataError, match="Labels cell"):
        PadChestHarmonizer(csv_path=write_table(tmp_path / FILE, rows)).harmonize()


def test_newlines_inside_quoted_fields(tmp_path):
    text = numpy_text([f"C{i:07d}" for i in range(12)])
    assert "\n" in text and text.startswith("['C0000000' ")
    root = write_padchest(tmp_path, n_patients=3, images=False)
    with gzip.open(root / FILE, "rt") as fh:
        n_lines = fh.read().count("\n")
    df = PadChestHarmonizer(base_image_dir=root).harmonize()
    assert n_lines > len(df) + 1


def test_real_table_counts():
    path = txv_file("PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv.gz")
    h = PadChestHarmonizer(csv_path=path)
    raw = h.read(h.inputs(path))
    df = validate(h.harmonize_raw(raw, source=str(path)), h.spec)  # what harmonize() does
    assert len(df) == h.spec.expected["images"] == 160_861
    assert df["patient_id"].nunique() == h.spec.expected["patients"] == 67_625
    assert df["study_id"].nunique() == h.spec.expected["studies"] == 109_931
    cells = raw["Labels"][raw["Labels"] != "nan"].unique()
    strings = {s.strip() for c in cells for s in literal_list(c)}
    assert len(strings) == h.spec.expected["label_strings"] == 194 and "" in strings
    exploded = df["labels"].explode()
    terms = set(exploded.dropna())
    assert len(terms) == 193
    assert {t for ts in LABEL_TERMS.values() for t in ts} <= terms  # every mapped term exists
    assert df["labels"].isna().sum() == 103 and df[list(LABELS)].isna().all(axis=1).sum() == 103
    for term, label in [("pericardial effusion", "Effusion"), ("pseudonodule", "Nodule")]:
        only = set(exploded.index[exploded == term]) - set(
            exploded.index[exploded.isin(LABEL_TERMS[label])])
        assert len(only) >= 40 and (df.loc[sorted(only), label] == 0).all()
    with gzip.open(path, "rt", newline="") as fh:
        assert sum(1 for _ in fh) == 166_738  # newlines inside quoted fields


def test_fake_replica_yields_samples(tmp_path):
    root = write_padchest(tmp_path, n_patients=3, image_size=(160, 140))
    ds = PadChestDataset(root, output_cls=True, output_report=True, cache_dir=None)
    s = ds[0]
    assert s["img"].shape == (1, 224, 224) and s["cls"].shape == (len(LABELS),)
    assert isinstance(s["report"], str)
    assert all(isinstance(ds[i]["img"].float().mean().item(), float) for i in range(len(ds)))
    assert np.isin(ds.harmonized_df["image_path"].str.split("/").str[0], ["0", "1", "54"]).all()


def test_saved_table_keeps_missing_label_lists(tmp_path):
    root = write_padchest(tmp_path / "data", n_patients=3, images=False)
    h = PadChestHarmonizer(base_image_dir=root)
    loaded = PadChestHarmonizer.load(h.save(tmp_path / "padchest.parquet")).harmonize()
    assert loaded["labels"].tolist() == h.harmonize()["labels"].tolist()
    assert loaded["labels"].isna().sum() == 1  # the row written with Labels "nan"


def test_label_terms_must_be_tuples():
    from radharmony.annotations.labels import term_index

    assert term_index({"Effusion": ("pleural effusion",), "Any": ("pleural effusion",)}) == \
        {"pleural effusion": [0, 1]}
    with pytest.raises(RadHarmonyError, match="one string"):
        term_index({"Nodule": "nodule"})  # would otherwise iterate characters
