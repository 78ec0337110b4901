"""Report sections: the MIMIC-style parser on hand-written reports, OpenI's real XML."""

from __future__ import annotations

import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from radharmony.reports.format import format_report, section_text
from radharmony.studies.index import build_index
from radharmony.studies.sections import parse_sections, report_sections, split_formatted

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from txv_data import txv_file  # noqa: E402

MIMIC = """                                 FINAL REPORT
 EXAMINATION:  CHEST (PA AND LAT)

 INDICATION:  ___F with new onset ascites  // eval for infection

 TECHNIQUE:  Chest PA and lateral

 COMPARISON:  None.

 FINDINGS:
 
 There is no focal consolidation, pleural effusion or pneumothorax.  Bilateral
 nodular opacities that most likely represent nipple shadows.

 IMPRESSION:
 
 No acute cardiopulmonary process.
"""


def test_mimic_report_sections():
    s = parse_sections(MIMIC)
    assert s["indication"] == "___F with new onset ascites  // eval for infection"
    assert s["technique"] == "Chest PA and lateral"
    assert s["comparison"] is None  # "None." is no text
    assert s["findings"].startswith("There is no focal") and s["findings"].endswith("shadows.")
    assert s["impression"] == "No acute cardiopulmonary process."
    assert s["history"] is None
    assert report_sections(MIMIC)[1] == "parser"


def test_repeated_headers_last_wins_and_odd_case():
    text = ("Findings: first read.\nimpression: early.\n\nADDENDUM: called.\n"
            "  FINDINGS :  Final findings.\nIMPRESSION:\nFinal impression.\n"
            "clinical HISTORY: cough")
    s = parse_sections(text)
    assert s["findings"] == "Final findings." and s["impression"] == "Final impression."
    assert s["history"] == "cough" and s["indication"] is None


def test_missing_headers_and_no_headers():
    s = parse_sections("IMPRESSION: No acute disease.")
    assert s["impression"] == "No acute disease." and s["findings"] is None
    assert parse_sections("Lungs are clear. No effusion.") is None
    assert parse_sections("   ") is None and parse_sections(None) is None
    assert report_sections("Lungs are clear.") == (dict.fromkeys(s), "none")


def test_formatted_reports_split_exactly():
    report = format_report("Cough", "Comparison: None.", "Clear.\n\nNo effusion.", None)
    s = split_formatted(report)
    assert (s["indication"], s["comparison"], s["findings"], s["impression"]) == \
        ("Cough", None, "Clear.\n\nNo effusion.", None)
    # a header inside a field would not rejoin to the same text as a parsed report would;
    # out-of-order headers are not radharmony's format
    assert split_formatted("FINDINGS:\nx\n\nINDICATION:\ny") is None
    # the source's own section columns win
    s, src = report_sections("FINDINGS: a\nIMPRESSION: b", {"findings": "A", "impression": None})
    assert (s["findings"], s["impression"], src) == ("A", None, "source")


def test_openi_real_sections_equal_the_xml():
    from radharmony.datasets.openi import OpenIHarmonizer

    path = txv_file("NLMCXR_reports.tgz")
    h = OpenIHarmonizer(csv_path=path)
    raw = h.read(h.inputs(path))
    with pytest.warns(UserWarning, match="1 OpenI images have no row"):
        df = OpenIHarmonizer.harmonize_raw(raw).assign(view=None)
    ix = build_index(df, max_images=None)
    xml = {}
    with tarfile.open(path) as tf:
        for m in tf.getmembers():
            if m.name.endswith(".xml"):
                root = ET.fromstring(tf.extractfile(m).read())
                xml[root.find("uId").get("id")] = {a.get("Label"): a.text
                                                   for a in root.iter("AbstractText")}
    assert len(ix) == 3_851
    checked = 0
    for sid, sec, src in zip(ix.study_ids, ix.sections, ix.section_source):
        x = xml[sid]
        assert sec["findings"] == section_text(x.get("FINDINGS")), sid
        assert sec["impression"] == section_text(x.get("IMPRESSION")), sid
        assert sec["indication"] == section_text(x.get("INDICATION")), sid
        assert sec["comparison"] == section_text(x.get("COMPARISON")), sid
        checked += sec["findings"] is not None
        assert src == ("source" if any(section_text(v) for v in x.values()) else "none")
    assert checked > 3_000
    assert pd.Series(ix.section_source).value_counts().to_dict().get("parser", 0) == 0


def test_source_columns_of_one_key_the_later_with_text_wins():
    # CheXpert-Plus's section_clinical_history and section_history are both the history
    cols = {"clinical_history": "Cough.", "history": None, "comparison": "None."}
    s, src = report_sections("FINDINGS: a", cols)
    assert (s["history"], s["comparison"], s["findings"], src) == ("Cough.", None, "a", "source")
    s, _ = report_sections(None, {"clinical_history": "Cough.", "history": "Fever."})
    assert s["history"] == "Fever."
    s, _ = report_sections(None, {"clinical_history": None, "history": "nan"})
    assert s["history"] is None


def test_index_matches_the_plain_grouping_and_splits_a_shared_report_once():
    import random

    import numpy as np

    from radharmony.studies.index import KEY_VIEWS, VIEW_ORDER

    rng = random.Random(3)
    views = ["PA", "AP", "LATERAL", "LL", None, float("nan"), "OTHER"]
    report = "INDICATION:\nCough\n\nFINDINGS:\nClear."
    n = 400
    df = pd.DataFrame({"study_id": [f"s{rng.randrange(60)}" for _ in range(n)],
                       "view": [rng.choice(views) for _ in range(n)],
                       "report": [rng.choice([report, None, "FINDINGS: other."])
                                  for _ in range(n)],
                       "section_history": [rng.choice([1, 1.0, "1", None]) for _ in range(n)]})
    df["patient_id"] = "p" + df["study_id"]
    for order, k in [(o, k) for o in (VIEW_ORDER, ("LATERAL", "LL", "AP"))
                     for k in (None, 1, 2, 3)]:
        rank = {v: i for i, v in enumerate(order)}
        ix = build_index(df, max_images=k, view_order=order)
        seen = list(dict.fromkeys(df["study_id"]))
        assert ix.study_ids.tolist() == seen
        for sid, rows, key, sec in zip(ix.study_ids, ix.rows, ix.key_image, ix.sections):
            mine = sorted(np.flatnonzero(df["study_id"].to_numpy() == sid),
                          key=lambda r: (rank.get(df["view"][r], len(rank)), r))
            assert rows.tolist() == mine[:k or None]
            listed = df["view"].to_numpy(object)[rows].tolist()
            assert key == next((listed.index(v) for v in KEY_VIEWS if v in listed), 0)
            first = next((r for r in mine if pd.notna(df["report"][r])), mine[0])
            want, _ = report_sections(df["report"][first],
                                      {"history": df["section_history"][first]})
            assert sec == want
    ix = build_index(df.drop(columns="section_history"), max_images=None)
    same = [s for s, r in zip(ix.sections, ix.reports) if r == report]
    same[0]["findings"] = "changed"  # each study has its own dict
    assert same[1]["findings"] == "Clear."
