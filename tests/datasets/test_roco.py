"""ROCO: caption/keyword/CUI/link files joined by ROCO id, articles as patients, splits,
the modality and chest flags, and the captioning tasks in a built mixture."""

from __future__ import annotations

import pandas as pd
import pytest

from radharmony.datasets.roco import SPEC, ROCOHarmonizer, modality, parse_lines
from radharmony.errors import MetadataError
from radharmony.fake.roco import write_roco
from radharmony.table.schema import sample_ids, validate

CAPTIONS = ("ROCO_00108\t Chest radiograph obtained after endoscopic submucosal dissection.\n"
            "ROCO_00114\t Ultrasound of anterior leg at rest is normal without any mass.\n"
            "ROCO_00221\t  CT scan of thorax in a patient with IPF showing honeycomb shadowing.\n")
KEYWORDS = ("ROCO_00108\t\tradiograph\tdissection\tchest\n"
            "ROCO_00114\t\tanterior\tmas\tnormal\tleg\n")
LINKS = ("ROCO_00108\twget -r ftp://ftp.ncbi.nlm.nih.gov/pub/pmc/oa_package/2b/34/PMC3856271"
         ".tar.gz -P /path/to/Dir\tce-46-666-g003.jpg\n"
         "ROCO_00221\twget -r ftp://ftp.ncbi.nlm.nih.gov/pub/pmc/oa_package/aa/de/PMC3605326"
         ".tar.gz -P /path/to/Dir\t1745-9974-9-9-3.jpg\n")


def harmonize(**raw):
    return validate(ROCOHarmonizer.harmonize_raw(
        {"validation/captions": CAPTIONS, "validation/keywords": KEYWORDS,
         "validation/dlinks": LINKS, **raw}, source="rows"), SPEC)


def test_rows_pin_ids_texts_articles_and_flags():
    df = harmonize()
    assert df["image_path"].tolist() == [f"data/validation/radiology/images/ROCO_00{n}.jpg"
                                         for n in (108, 114, 221)]
    assert df["patient_id"].tolist() == ["PMC3856271", "ROCO_00114", "PMC3605326"]
    assert df["report"].tolist()[0] == \
        "Chest radiograph obtained after endoscopic submucosal dissection."
    assert df["caption"].tolist()[2].startswith("CT scan of thorax")
    assert df["keywords"].tolist() == [["radiograph", "dissection", "chest"],
                                       ["anterior", "mas", "normal", "leg"], []]
    assert df["figure"].tolist() == ["ce-46-666-g003.jpg", None, "1745-9974-9-9-3.jpg"]
    assert df["modality"].tolist() == ["X-ray", "ultrasound", "CT"]
    assert df["chest"].tolist() == [1, 0, 1] and df["chest_xray"].tolist() == [1, 0, 0]
    assert df["split"].tolist() == ["valid"] * 3 and df["split_raw"].tolist() == ["validation"] * 3
    assert list(sample_ids(df, SPEC))[0] == "roco:data/validation/radiology/images/ROCO_00108"


@pytest.mark.parametrize("caption, expected", [
    ("Axial computed tomography scan of the pelvis.", "CT"),
    ("Preintervention MRCP revealing a stone in the cystic duct.", "MRI"),
    ("Chest X-ray (AP view) after intubation, compared with the prior CT.", "X-ray"),
    ("Left coronary arteriogram in the right anterior oblique projection.", "angiography"),
    ("Barium meal follow through showed dilatation of the duodenum.", "fluoroscopy"),
    ("Physical examination of delivery system after 3 h.", None),
])
def test_modality_is_the_earliest_mentioned(caption, expected):
    assert modality(caption) == expected


def test_a_line_without_a_roco_id_is_an_error():
    with pytest.raises(MetadataError, match="line 2: no ROCO id"):
        parse_lines("ROCO_1\t x\nnot an id\t y\n", source="captions.txt")


def test_release_layout_splits_and_an_article_in_two_figures(tmp_path):
    df = ROCOHarmonizer(base_image_dir=write_roco(tmp_path, images=False)).harmonize()
    assert df["split"].value_counts().to_dict() == {"train": 6, "valid": 2, "test": 1}
    assert (df["patient_id"] == "PMC3856271").sum() == 2
    assert df.loc[df["chest_xray"] == 1, "caption"].str.contains("(?i)chest").all()


def test_caption_and_keyword_tasks_in_a_mixture(tmp_path):
    from radharmony.mixture import build
    from radharmony.mixture.tasks import TASKS, capabilities

    assert {"caption", "keywords"} <= capabilities(SPEC)
    assert not {"report", "findings"} & capabilities(SPEC)  # captions are not reports
    assert TASKS["caption_image"].needs == ("images", "caption")
    root = write_roco(tmp_path / "roco")
    spec = {"name": "roco-mix", "seed": 1, "valid": 0.0, "cache_dir": str(tmp_path / "cache"),
            "sources": [{"dataset": "roco", "root": str(root),
                         "tasks": {"caption_image": "all", "image_keywords": "all"}}]}
    build(spec, tmp_path / "mix", workers=1, progress=False)
    rec = pd.read_parquet(tmp_path / "mix" / "records.parquet")
    caps = rec[rec["task"] == "caption_image"]
    assert len(caps) == 6  # a source draws its train split by default: 6 of the 9 figures
    assert "Chest CT scan showing a left perihilar mass." in set(caps["target"])
    kws = rec[rec["task"] == "image_keywords"]
    assert "mas, scan, chest, perihilar, ct" in set(kws["target"])
