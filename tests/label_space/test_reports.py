"""Report labeler: hand-written snippets pin negation, scope, uncertainty, sections and
aggregation; the OpenI test pins F1 on the held-out (odd) report ids."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from radharmony.reports import (FINDINGS, LABELER_VERSION, ReportInputError, RuleError, columns,
                                label_reports, labeler_key, load_rules, section_spans,
                                split_sections)

CHEXPERT_14 = ["No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Lesion",
               "Lung Opacity", "Edema", "Consolidation", "Pneumonia", "Atelectasis",
               "Pneumothorax", "Pleural Effusion", "Pleural Other", "Fracture",
               "Support Devices"]


def one(text, col, **kw):
    v = label_reports([text], **kw)[col].iloc[0]
    return None if math.isnan(v) else float(v)


@pytest.mark.parametrize("text, col, value", [
    # negation
    ("No pneumothorax.", "Pneumothorax", 0.0),
    ("The lungs are clear of effusion.", "Pleural Effusion", 0.0),
    ("Lungs are free of consolidation.", "Consolidation", 0.0),
    ("Negative for pneumothorax or pleural effusion.", "Pleural Effusion", 0.0),
    ("No focal consolidation, pleural effusion, or pneumothorax.", "Pneumothorax", 0.0),
    ("Pneumothorax is not seen.", "Pneumothorax", 0.0),
    ("The heart is not enlarged.", "Cardiomegaly", 0.0),
    ("Heart size is normal.", "Cardiomegaly", 0.0),
    ("Heart size is upper limits of normal.", "Cardiomegaly", 0.0),
    ("Heart size is upper limits normal or mildly enlarged.", "Cardiomegaly", -1.0),
    ("There is no focal air space opacity to suggest a pneumonia.", "Pneumonia", 0.0),
    ("There is no focal air space opacity to suggest a pneumonia.", "Lung Opacity", 0.0),
    # positive and pseudo-negation
    ("Mild cardiomegaly.", "Cardiomegaly", 1.0),
    ("Small left pleural effusion.", "Pleural Effusion", 1.0),
    ("No change in the effusion.", "Pleural Effusion", 1.0),
    ("No significant interval change in the left effusion.", "Pleural Effusion", 1.0),
    # scope
    ("No effusion but there is consolidation.", "Consolidation", 1.0),
    ("No effusion but there is consolidation.", "Pleural Effusion", 0.0),
    ("No pneumothorax; small effusion.", "Pleural Effusion", 1.0),
    ("No acute disease other than cardiomegaly.", "Cardiomegaly", 1.0),
    ("Opacity which may represent pneumonia.", "Lung Opacity", 1.0),
    # uncertainty
    ("Pneumonia cannot be excluded.", "Pneumonia", -1.0),
    ("Opacity may represent atelectasis.", "Atelectasis", -1.0),
    ("Atelectasis versus pneumonia.", "Atelectasis", -1.0),
    ("Atelectasis versus pneumonia.", "Pneumonia", -1.0),
    ("Opacity concerning for pneumonia.", "Pneumonia", -1.0),
    ("Findings suggestive of pulmonary edema.", "Edema", -1.0),
    ("Question of a small pneumothorax.", "Pneumothorax", -1.0),
    ("Possible small effusion.", "Pleural Effusion", -1.0),
    ("Hilar prominence which could be due to a nodule.", "Lung Lesion", -1.0),
    ("The opacity might be atelectasis.", "Atelectasis", -1.0),
    # the examination, not the finding
    ("Evaluation for pneumothorax is limited by rotation.", "Pneumothorax", None),
    ("Low lung volumes limit evaluation for an effusion.", "Pleural Effusion", None),
    ("CT can be performed to identify a small nodule.", "Lung Lesion", None),
    ("Bony overlap could obscure a small pulmonary nodule.", "Lung Lesion", None),
    ("Consider oblique images to exclude a true nodule.", "Lung Lesion", None),
    ("Prior films would be helpful to identify the location of the nodule.", "Lung Lesion",
     None),
    # a participle and comma close a negation's scope
    ("No effusion seen, dense nodule in the left lung.", "Lung Lesion", 1.0),
    ("No effusion seen, dense nodule in the left lung.", "Pleural Effusion", 0.0),
    ("Evaluation for pneumothorax is limited; small effusion.", "Pleural Effusion", 1.0),
    # an air-fluid level in the pleural space is a hydropneumothorax; elsewhere it is not
    ("Right pleural effusion with air fluid level.", "Pneumothorax", 1.0),
    ("Two air-fluid levels in the right hemithorax.", "Pneumothorax", 1.0),
    ("No air-fluid level in the right hemithorax.", "Pneumothorax", 0.0),
    ("The stomach is distended with an air-fluid level.", "Pneumothorax", None),
    ("Air-fluid level in the middle mediastinum.", "Pneumothorax", None),
    # "clear" right before the finding ("of" left out) negates it; "clear and" does not
    ("Lungs are expanded and clear airspace disease.", "Lung Opacity", 0.0),
    ("The lungs are clear and the heart is enlarged.", "Cardiomegaly", 1.0),
    ("The lungs are clear bilaterally with a small effusion.", "Pleural Effusion", 1.0),
    # "nodular opacity" is an opacity (with the lesion), not a nodule; "nodule/mass" a nodule
    ("Reticulonodular opacities in the upper lobes.", "nodule", None),
    ("Reticulonodular opacities in the upper lobes.", "lung_opacity", 1.0),
    ("Dominant nodule/mass in the left lung.", "mass", None),
    ("Dominant nodule/mass in the left lung.", "nodule", 1.0),
    # a definite nodule refers back: to a nodule, or to the lesion described before it
    ("Round mediastinal opacity. Recommend CT of this nodule.", "nodule", None),
    ("Calcified granuloma. No other nodules. The upper half of the nodule is calcified.",
     "nodule", 0.0),
    ("Small left lung nodule. The nodule is 8 mm.", "nodule", 1.0),
    ("Possible left lung nodule. The nodule is 8 mm.", "nodule", 1.0),
    ("The previously described nodule is unchanged.", "nodule", 1.0),
    ("The lung has a nodule.", "nodule", 1.0),
    # a hydropneumothorax holds fluid: an effusion too, but "no hydropneumothorax" is silent
    ("Right pleural effusion with air fluid level.", "Pleural Effusion", 1.0),
    ("Small right hydropneumothorax.", "pleural_effusion", 1.0),
    ("No hydropneumothorax.", "Pleural Effusion", None),
    ("No hydropneumothorax.", "pleural_effusion", None),
    # "reticular-nodular ... opacities" is reticulonodular; "nodularity" a lesion, not a nodule
    ("Reticular-nodular pleural-parenchymal opacities.", "nodule", None),
    ("Reticular-nodular pleural-parenchymal opacities.", "lung_opacity", 1.0),
    ("Residual mass/nodularity seen on CT.", "nodule", None),
    ("Residual mass/nodularity seen on CT.", "lung_lesion", 1.0),
    # "unlikely" hedges; "concern is for" hedges
    ("Pneumonia is unlikely.", "Pneumonia", -1.0),
    ("Findings less likely to represent pneumonia.", "Pneumonia", -1.0),
    ("Although this could be scar, concern is for nodule.", "nodule", -1.0),
    # devices OpenI's anonymized text keeps: a tip, leads, clips, a shunt
    ("Right chest XXXX tip in the mid SVC.", "Support Devices", 1.0),
    ("Overlying external cardiac monitor leads.", "Support Devices", 1.0),
    ("Clips overlie the right medial hilum.", "Support Devices", 1.0),
    ("VP shunt tubing is identified.", "Support Devices", 1.0),
    ("Vague density related to the scapular tip.", "Support Devices", None),
    ("Shunt vascularity.", "Support Devices", None),
    ("Pain leads to splinting.", "Support Devices", None),
    # a broken device is not a fracture; a disclaimer about fractures is not one
    ("Left central venous catheter fracture.", "Fracture", None),
    ("Left central venous catheter fracture.", "Support Devices", 1.0),
    ("Fracture of the lateral most fixation screw.", "Fracture", None),
    ("Please note that fractures may not be demonstrated.", "Fracture", None),
    ("Limited exam, for evaluation of fractures.", "Fracture", None),
    ("Old right rib fractures.", "Fracture", 1.0),
    # curvature of the spine; a finding that limits the evaluation is still a finding
    ("Mild dextrocurvature of the thoracic spine.", "scoliosis", 1.0),
    ("S-shaped spine curvature.", "scoliosis", 1.0),
    ("Moderate scoliosis and rotation limits evaluation of the mediastinum.", "scoliosis", 1.0),
    # more hedges
    ("Opacity which may be compatible with pneumonia.", "Pneumonia", -1.0),
    ("Please correlate clinically for pneumonia.", "Pneumonia", -1.0),
    ("A superimposed pneumonia would be a consideration.", "Pneumonia", -1.0),
    # findings beyond CheXpert's 14 (canonical ids)
    ("Hyperinflation consistent with COPD.", "copd", 1.0),
    ("Chronic obstructive pulmonary disease.", "copd", 1.0),
    ("Known interstitial lung disease.", "interstitial_lung_disease", 1.0),
    ("Cylindrical bronchiectasis in the lower lobes.", "bronchiectasis", 1.0),
    ("No evidence of active tuberculosis.", "tuberculosis", 0.0),
    ("Calcified right hilar lymph nodes.", "calcification", 1.0),
    ("The thoracic aorta is tortuous and calcified.", "aortic_calcification", 1.0),
    ("Heavily calcified and mildly tortuous aorta.", "aortic_calcification", 1.0),
    ("Aortic atherosclerosis.", "aortic_calcification", 1.0),
    ("Aortic atherosclerosis.", "calcification", 1.0),  # a child feeds its parent
    ("Calcified granuloma in the left base.", "calcification", None),  # a granuloma
    ("Bilateral nipple piercings.", "foreign_object", 1.0),
    ("Bullet fragments over the left chest.", "foreign_object", 1.0),
    ("Healed fracture of the left clavicle.", "clavicle_fracture", 1.0),
    ("Healed fracture of the left clavicle.", "fracture", 1.0),
    ("No pneumomediastinum.", "pneumomediastinum", 0.0),
    ("No free air under the diaphragm.", "pneumoperitoneum", 0.0),
    ("Free intraperitoneal air.", "pneumoperitoneum", 1.0),
    # exclusions
    ("Small pericardial effusion.", "Pleural Effusion", None),
    ("Subcutaneous emphysema in the neck.", "Pneumothorax", None),
])
def test_snippets(text, col, value):
    kw = {} if col in CHEXPERT_14 else {"vocabulary": "canonical"}
    assert one(text, col, **kw) == value


@pytest.mark.parametrize("text, col, default, positive", [
    # probable hedges: -1 by default (CheXpert), 1 with probable="positive"
    ("Probable small left effusion.", "Pleural Effusion", -1.0, 1.0),
    ("Bibasilar opacity, probably atelectasis.", "Atelectasis", -1.0, 1.0),
    ("Opacity most likely represents atelectasis.", "Atelectasis", -1.0, 1.0),
    ("A small effusion is likely.", "Pleural Effusion", -1.0, 1.0),
    ("Atelectasis versus scarring.", "Atelectasis", -1.0, 1.0),
    ("Infiltrate vs. atelectasis.", "Atelectasis", -1.0, 1.0),
    ("Borderline heart size.", "Cardiomegaly", -1.0, 1.0),
    ("The heart is borderline in size.", "Cardiomegaly", -1.0, 1.0),
    ("Indeterminate right upper lobe nodule.", "Lung Lesion", -1.0, 1.0),
    # the other hedges stay -1
    ("Possible small effusion.", "Pleural Effusion", -1.0, -1.0),
    ("Blunting may represent a small effusion.", "Pleural Effusion", -1.0, -1.0),
    ("Pneumonia cannot be excluded.", "Pneumonia", -1.0, -1.0),
    ("Findings suggestive of pulmonary edema.", "Edema", -1.0, -1.0),
    ("A small effusion is possible.", "Pleural Effusion", -1.0, -1.0),
    ("Pneumonia is unlikely.", "Pneumonia", -1.0, -1.0),
    # an earlier hedge of the clause is not lifted by "versus"
    ("Question left basilar atelectasis versus infiltrate.", "Lung Opacity", -1.0, -1.0),
    ("Question left basilar atelectasis versus infiltrate.", "Atelectasis", -1.0, -1.0),
    ("Opacity may represent atelectasis versus scar.", "Atelectasis", -1.0, -1.0),
    ("No effusion; atelectasis versus scar.", "Atelectasis", -1.0, 1.0),
    # stated and negated mentions do not move
    ("Small left pleural effusion.", "Pleural Effusion", 1.0, 1.0),
    ("No pneumothorax.", "Pneumothorax", 0.0, 0.0),
])
def test_probable_hedges(text, col, default, positive):
    assert one(text, col) == default
    assert one(text, col, probable="uncertain") == default
    assert one(text, col, probable="positive") == positive


def test_probable_evidence_and_errors():
    from radharmony.errors import RadHarmonyError

    text = "IMPRESSION:\nProbable small left effusion. Possible pneumonia."
    labels, ev = label_reports([text], explain=True, probable="positive")
    ev = ev.set_index("label")
    assert ev.loc["Pleural Effusion", "value"] == 1.0
    assert ev.loc["Pleural Effusion", "cue_kind"] == "probable"
    assert ev.loc["Pleural Effusion", "cue"] == "Probable"
    assert ev.loc["Pneumonia", "value"] == -1.0 and ev.loc["Pneumonia", "cue_kind"] == "uncertain"
    # No Finding: a probable finding is abnormal whichever way it is valued
    assert labels["No Finding"].isna().all()
    _, ev = label_reports(["Borderline heart size."], explain=True)
    assert ev.set_index("label").loc["Cardiomegaly", "cue_kind"] == "probable"
    with pytest.raises(RadHarmonyError, match="probable") as err:
        label_reports(["x"], probable="yes")
    assert "'uncertain'" in str(err.value) and "'positive'" in str(err.value)


def test_rule_lookup_follows_the_context_of_each_match():
    """A rule with a lookaround ("catheter fracture" is not a fracture) decides by the text
    around each match, not by what the same words meant in an earlier report."""
    texts = ["Rib fracture.", "Catheter fracture.", "Displaced fracture.", "Lead fracture."]
    assert label_reports(texts)["Fracture"].tolist()[0] == 1.0
    got = label_reports(texts)["Fracture"].tolist()
    assert got[0] == 1.0 and math.isnan(got[1]) and got[2] == 1.0 and math.isnan(got[3])
    got = label_reports(texts[::-1])["Fracture"].tolist()
    assert math.isnan(got[0]) and got[1] == 1.0 and math.isnan(got[2]) and got[3] == 1.0
    leads = label_reports(["Monitor leads.", "This leads to atelectasis.", "ECG leads."])
    assert leads["Support Devices"].tolist()[::2] == [1.0, 1.0]
    assert math.isnan(leads["Support Devices"].iloc[1])


def test_longest_match_wins_whatever_the_pattern_length(tmp_path):
    """At one position the rule matching the most text wins, not the longer-written one: a
    short user cue beats the built-in "could(?: be| represent| ...)?" hedge."""
    f = tmp_path / "cues.tsv"
    f.write_text("kind\tposition\tpattern\nignore\tpre\tcould shadow\n")
    text = "Bony overlap could shadow a small nodule."
    assert one(text, "Lung Lesion") == -1.0  # built-in: "could" hedges
    assert one(text, "Lung Lesion", rules=f) is None  # the longer match drops the mention
    _, ev = label_reports(["Bony overlap could shadow a nodule. Could be a nodule."],
                         explain=True, rules=f)
    assert ev.set_index("label").loc["Lung Lesion", "cue"] == "Could be"


def test_first_chars():
    from radharmony.reports.matcher import _first_chars

    assert _first_chars("no") == {"n"}
    assert _first_chars("(?:could|may) be") == {"c", "m"}
    assert _first_chars("(?:left )?rib") == {"l", "r"}
    assert _first_chars("[a-c]x") == {"a", "b", "c"}
    assert _first_chars(r"(?<!\w)(?:no)") == {"n"}  # a lookbehind has no width
    assert _first_chars(r"\w+") is None  # any word character: every position


def test_strip_lookarounds():
    from radharmony.reports.matcher import _strip_lookarounds

    assert _strip_lookarounds(r"leads?(?! to\b)") == "leads?"
    assert _strip_lookarounds(r"(?:(?<=catheter\s)|(?<=lead\s))fractures?") == "(?:|)fractures?"
    assert _strip_lookarounds(r"clear(?= (?!(?:and|with)\b)[a-z])") == "clear"
    assert _strip_lookarounds(r"a[(?=]b") == r"a[(?=]b"  # in a class: literal characters
    assert _strip_lookarounds(r"x\(?=y") == r"x\(?=y"  # an escaped bracket


def test_canonical_ids_are_vocabulary_findings():
    from radharmony import vocabulary
    from radharmony.reports.findings import CANONICAL_CHILDREN

    emitted = set(columns("canonical")) | set(CANONICAL_CHILDREN)
    assert emitted <= set(vocabulary.FINDINGS), emitted - set(vocabulary.FINDINGS)
    assert "hiatal_hernia" in columns("canonical") and "hernia" not in columns("canonical")
    assert one("Small hiatal hernia.", "hiatal_hernia", vocabulary="canonical") == 1.0


def test_aggregation_positive_beats_uncertain_beats_negative():
    texts = ["No effusion. Possible effusion. Large effusion.",
             "No effusion. Possible effusion.", "No effusion.", "Clear lungs."]
    assert label_reports(texts)["Pleural Effusion"].tolist()[:3] == [1.0, -1.0, 0.0]
    assert math.isnan(label_reports(texts)["Pleural Effusion"].iloc[3])


def test_no_finding():
    df = label_reports(["No pneumothorax. Normal heart size.",
                        "Endotracheal tube in place. No pneumothorax.",
                        "Possible pneumonia.", "Cardiomegaly."])
    assert df["No Finding"].iloc[0] == 1.0
    assert df["No Finding"].iloc[1] == 1.0  # support devices do not count
    assert df["No Finding"].iloc[[2, 3]].isna().all()  # CheXpert never writes 0
    canon = label_reports(["Cardiomegaly.", "Clear."], vocabulary="canonical")
    assert canon["no_finding"].tolist() == [0.0, 1.0]


def test_sections_indication_never_labels():
    text = "INDICATION:\nrule out pneumonia, evaluate for pneumothorax\n\nCOMPARISON:\nNone."
    df = label_reports([text, "INDICATION:\nPneumonia.\n\nFINDINGS:\nNo effusion."])
    assert df.iloc[0].isna().all()
    assert math.isnan(df["Pneumonia"].iloc[1]) and df["Pleural Effusion"].iloc[1] == 0.0


def test_mimic_headers_and_plain_text():
    mimic = ("                                 FINAL REPORT\n EXAMINATION:  CHEST (PA AND LAT)\n"
             " \n INDICATION:  ___F with cough, r/o pneumonia\n \n COMPARISON:  ___\n \n"
             " FINDINGS: \n \n No pleural effusion or\n pneumothorax.\n \n IMPRESSION: \n \n"
             " Cardiomegaly.\n")
    df = label_reports([mimic, "Cardiomegaly. No pneumothorax."])
    assert df["Pneumothorax"].tolist() == [0.0, 0.0]
    assert df["Cardiomegaly"].tolist() == [1.0, 1.0]
    assert math.isnan(df["Pneumonia"].iloc[0])
    assert [s[0] for s in section_spans(mimic)] == ["preamble", "examination", "indication",
                                                    "comparison", "findings", "impression"]


def test_openi_mapping_sections():
    sections = {"COMPARISON": None, "INDICATION": "Pneumonia?", "FINDINGS": None,
                "IMPRESSION": "No pneumothorax."}
    df = label_reports([sections])
    assert df["Pneumothorax"].iloc[0] == 0.0 and math.isnan(df["Pneumonia"].iloc[0])
    assert split_sections(sections) == {"indication": "Pneumonia?",
                                        "impression": "No pneumothorax."}


@pytest.mark.parametrize("value", [None, "", "   ", float("nan"), pd.NA,
                                   "INDICATION:\nrule out pneumonia",
                                   {"INDICATION": "cough"}])
def test_empty_gives_all_nan(value):
    df = label_reports(pd.Series([value], dtype=object))
    assert df.shape == (1, 14) and df.iloc[0].isna().all()


def test_non_text_names_position():
    with pytest.raises(ReportInputError, match=r"position 2 \(index 'c'\).*int"):
        label_reports(pd.Series(["No effusion.", None, 5], index=["a", "b", "c"]))
    with pytest.raises(ReportInputError, match="DataFrame"):
        label_reports(pd.DataFrame({"report": ["x"]}))


def test_columns_and_index():
    s = pd.Series(["No effusion.", "Cardiomegaly."], index=[10, 20])
    df = label_reports(s)
    assert list(df.columns) == CHEXPERT_14 and list(df.index) == [10, 20]
    assert df.dtypes.eq(np.float32).all()
    canon = label_reports(s, vocabulary="canonical")
    assert list(canon.columns) == ["no_finding", *FINDINGS] == list(columns("canonical"))
    with pytest.raises(Exception, match="vocabulary"):
        label_reports(s, vocabulary="nih")


def test_canonical_hierarchy():
    df = label_reports(["Right rib fracture. Calcified nodule.", "No rib fracture."],
                       vocabulary="canonical")
    assert df.loc[0, ["rib_fracture", "fracture", "nodule", "granuloma", "lung_lesion"]
                  ].tolist() == [1.0, 1.0, 1.0, 1.0, 1.0]
    assert df.loc[1, "rib_fracture"] == 0.0 and math.isnan(df.loc[1, "fracture"])
    chex = label_reports(["No rib fracture."])
    assert chex["Fracture"].iloc[0] == 0.0  # CheXpert: a rib fracture mention is a fracture


def test_explain():
    text = "FINDINGS:\nNo pneumothorax. Pneumonia cannot be excluded."
    labels, ev = label_reports([text], explain=True)
    row = ev.set_index("label").loc["Pneumonia"]
    assert row["value"] == -1.0 and row["cue"] == "cannot be excluded"
    assert row["cue_kind"] == "uncertain" and row["mention"] == "Pneumonia"
    assert row["sentence"] == "Pneumonia cannot be excluded."
    assert text[row["mention_start"]:row["mention_end"]] == "Pneumonia"
    assert text[row["cue_start"]:row["cue_end"]] == "cannot be excluded"
    assert row["mention_rule"].startswith("mentions.tsv:")
    ptx = ev.set_index("label").loc["Pneumothorax"]
    assert ptx["cue"] == "No" and ptx["cue_kind"] == "negation"
    assert set(ev["label"]) == {"Pneumonia", "Pneumothorax"}  # No Finding NaN: no row


def test_user_rules(tmp_path):
    f = tmp_path / "mine.tsv"
    f.write_text("finding\tkind\tpattern\nnodule\tmention\tspot\n")
    assert one("A spot in the left lung.", "Lung Lesion", rules=f) == 1.0
    assert one("A spot in the left lung.", "Lung Lesion") is None
    assert labeler_key(f) != labeler_key()
    assert labeler_key().startswith(f"report-labels-{LABELER_VERSION}-")
    cues = tmp_path / "cues.tsv"
    cues.write_text("kind\tposition\tpattern\nnegation\tpre\tnary a\n")
    assert one("Nary a nodule.", "Lung Lesion", rules=[f, cues]) == 0.0


@pytest.mark.parametrize("body, match", [
    ("finding\tkind\tpattern\nnodule\tmention\tspot(\n", r"line 2.*'spot\('"),
    ("finding\tkind\tpattern\n# c\nnodules\tmention\tspot\n", r"line 3.*unknown finding"),
    ("finding\tkind\tpattern\nnodule\tmention\tx?\n", r"line 2.*empty string"),
    ("finding\tkind\tpattern\nnodule\tmention\t(?P<a>x)\n", r"line 2.*named group"),
    ("kind\tposition\tpattern\nnegation\tbefore\tnope\n", r"line 2.*position"),
    ("foo\tbar\n", r"line 1.*header"),
])
def test_bad_rule_file_names_file_line_pattern(tmp_path, body, match):
    f = tmp_path / "bad.tsv"
    f.write_text(body)
    with pytest.raises(RuleError, match=match) as err:
        load_rules(f)
    assert "bad.tsv" in str(err.value)


def test_openi_odd_ids_f1():
    from radharmony.reports.evaluate_openi import PRIMARY, evaluate
    from tests.txv_data import txv_file

    table = evaluate(txv_file("NLMCXR_reports.tgz"), ids="odd", n_boot=0).set_index("label")
    f1 = table.loc[list(PRIMARY), "f1"]
    # measured (docs/report_labels.md); the nodule floor is below the 0.90 goal
    floors = {"cardiomegaly": 0.92, "pleural_effusion": 0.90, "pneumothorax": 0.90,
              "lung_opacity": 0.97, "nodule": 0.82}
    for label, floor in floors.items():
        assert f1[label] >= floor, (label, f1[label])


def test_openi_odd_ids_f1_graded():
    """The graded protocol: probable hedges labelled 1, and only 1 counted as present."""
    from radharmony.reports.evaluate_openi import PRIMARY, evaluate
    from tests.txv_data import txv_file

    path = txv_file("NLMCXR_reports.tgz")
    table = evaluate(path, ids="odd", n_boot=0, protocol="graded").set_index("label")
    f1 = table.loc[list(PRIMARY), "f1"]
    # measured (docs/report_labels.md): macro 0.9496; nodule below the 0.90 goal
    floors = {"cardiomegaly": 0.94, "pleural_effusion": 0.95, "pneumothorax": 0.95,
              "lung_opacity": 0.98, "nodule": 0.87}
    for label, floor in floors.items():
        assert f1[label] >= floor, (label, f1[label])
    assert f1.mean() >= 0.945
    issue = evaluate(path, ids="odd", n_boot=0).set_index("label")
    assert (table["predicted"] <= issue["predicted"]).all()  # only hedges leave the count


def test_cli_label_reports(tmp_path):
    import argparse

    import pyarrow.parquet as pq

    from radharmony.fake.rexgradient import write_rexgradient
    from radharmony.cli import label_reports as cli

    root = write_rexgradient(tmp_path / "rex", images=False, studies={"train": 12})
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "labels.parquet"
    args = parser.parse_args(["label-reports", "rexgradient_train", "--root", str(root),
                              "-o", str(out), "--explain"])
    assert args.func(args) == 0
    table = pq.read_table(out)
    assert b"radharmony.report_labels" in table.schema.metadata
    df = table.to_pandas()
    assert {"patient_id", "study_id", "image_path", "Cardiomegaly"} <= set(df.columns)
    ev = pd.read_parquet(tmp_path / "labels.explain.parquet")
    assert {"sentence", "mention", "cue"} <= set(ev.columns)
    import json

    assert json.loads(table.schema.metadata[b"radharmony.report_labels"])["probable"] == \
        "uncertain"
    args = parser.parse_args(["label-reports", "rexgradient_train", "--root", str(root),
                              "-o", str(out), "--probable", "positive"])
    assert args.func(args) == 0
    meta = json.loads(pq.read_table(out).schema.metadata[b"radharmony.report_labels"])
    assert meta["probable"] == "positive"


def test_openi_hedging_counts_stated_and_hedged_mentions(tmp_path):
    """Hand-made OpenI archive: which mentions are stated or hedged, and which MeSH tagged."""
    from radharmony.errors import RadHarmonyError
    from tests.openi_reports import write_reports
    from radharmony.reports.evaluate_openi import hedging

    reports = [  # (number, findings, impression, MeSH major)
        (2, "Small left pleural effusion.", "Effusion.", ["Pleural Effusion/left/small"]),
        (4, "Blunting may represent a small effusion.", "No acute disease.",
         ["Costophrenic Angle/left/blunted"]),
        (6, "Lungs are clear.", "Possible cardiomegaly.", ["Cardiomegaly/borderline"]),
        (8, "No pleural effusion.", "Normal.", ["normal"]),
        (10, "Lungs are clear.", "Normal.", ["No Indexing"]),
        (12, "Probable small right effusion.", "No acute disease.",
         ["Pleural Effusion/right/small"]),
        (3, "Large right pleural effusion.", "Effusion.", ["Pleural Effusion/right/large"]),
    ]
    path = write_reports(tmp_path / "NLMCXR_reports.tgz", reports)
    t = hedging(path, ids="even").set_index("label")
    eff, card = t.loc["pleural_effusion"], t.loc["cardiomegaly"]
    assert (eff["positives"], eff["stated"], eff["stated_tagged"]) == (2, 1, 1)
    assert (eff["probable"], eff["probable_tagged"]) == (1, 1)
    assert (eff["hedged"], eff["hedged_tagged"]) == (1, 0)
    assert eff["f1"] == pytest.approx(4 / 5) and eff["f1_stated_only"] == pytest.approx(2 / 3)
    assert eff["f1_graded"] == 1.0
    assert (card["stated"], card["probable"], card["hedged"], card["hedged_tagged"]) == (0, 0, 1, 1)
    assert hedging(path, ids="odd").set_index("label").loc["pleural_effusion", "stated"] == 1
    assert hedging(path, ids="all").set_index("label").loc["pleural_effusion", "stated"] == 2
    with pytest.raises(RadHarmonyError, match="ids"):
        hedging(path, ids="mixed")
    # errors() under each protocol: the hedged effusion is a false positive only when every
    # hedge counts; the hedged ("possible") cardiomegaly a false negative only when graded
    from radharmony.reports.evaluate_openi import errors, evaluate

    assert errors(path, "pleural_effusion")["number"].tolist() == [4]
    assert errors(path, "pleural_effusion", protocol="graded").empty
    assert errors(path, "cardiomegaly").empty
    assert errors(path, "cardiomegaly", protocol="graded")["number"].tolist() == [6]
    graded = evaluate(path, ids="even", n_boot=0, protocol="graded").set_index("label")
    assert graded.loc["pleural_effusion", "f1"] == 1.0
    with pytest.raises(RadHarmonyError, match="protocol"):
        evaluate(path, protocol="strict")


# -- Spanish rules: PadChest's stemmed reports ---------------------------------------------------
@pytest.mark.parametrize("text, col, value", [
    (" derram pleural bilateral .", "pleural_effusion", 1.0),
    (" sin derram pleural .", "pleural_effusion", 0.0),
    (" no se apreci derram pleural ni neumotorax .", "pneumothorax", 0.0),
    (" sen costofren libr .", "pleural_effusion", 0.0),
    (" derram pericard moder .", "pleural_effusion", None),
    (" practic resolucion derram pleural izquierd .", "pleural_effusion", 1.0),
    (" desaparicion derram pleural .", "pleural_effusion", 0.0),
    (" sin cambi respect previ derram pleural .", "pleural_effusion", 1.0),
    (" cardiomegali .", "cardiomegaly", 1.0),
    (" indic cardiotorac limit alto normal .", "cardiomegaly", -1.0),
    (" siluet cardi mediastin dentr normal .", "cardiomegaly", 0.0),
    (" indic cardiotorac dentr limit normal .", "cardiomegaly", 0.0),
    (" despeg pleural sug neumotorax .", "pneumothorax", -1.0),
    (" no se pued descart neumon .", "pneumonia", -1.0),
    (" nodul basal derech correspond pezon .", "nodule", None),
    (" pseudonodul basal .", "nodule", None),
    (" nodul alta densid lsd .", "nodule", None),
    (" nodul alta densid lsd .", "granuloma", 1.0),
    (" atelectasi condensacion basal .", "consolidation", None),
    (" atelectasi condensacion basal .", "atelectasis", 1.0),
    (" enfisem subcutane .", "emphysema", None),
    (" herni desliz hiat .", "hiatal_hernia", 1.0),
    (" fractur acun d12 .", "fracture", None),
    (" call ose arco costal .", "fracture", 1.0),
    (" masa mediastin anterior .", "mass", None),
    (" edem part bland cervical .", "edema", None),
    (" edem agud pulmon .", "edema", 1.0),
])
def test_spanish_snippets(text, col, value):
    from radharmony.reports import builtin_rules

    assert one(text, col, vocabulary="canonical", rules=builtin_rules("es")) == value


def test_spanish_rules_are_their_own_set():
    from radharmony.reports import builtin_rules

    es, en = builtin_rules("es"), builtin_rules()
    assert es.key != en.key and es is builtin_rules("es")
    assert one(" derram pleural .", "Pleural Effusion") is None  # English rules: no stems
    with pytest.raises(RuleError, match="language 'fr'") as err:
        builtin_rules("fr")
    assert "'en'" in str(err.value) and "'es'" in str(err.value)


def test_padchest_gold_is_the_datasets_label_terms():
    from radharmony.datasets.padchest import LABEL_MAP, LABEL_TERMS
    from radharmony.reports.evaluate_padchest import GOLD

    by_finding = {LABEL_MAP[label][0][0]: terms for label, terms in LABEL_TERMS.items()}
    for finding, terms in GOLD.items():
        assert by_finding[finding] == terms, finding


def test_padchest_odd_study_ids_f1():
    """The Spanish rules against PadChest's physician labels, on the held-out (odd) ids."""
    from radharmony.reports.evaluate_padchest import evaluate
    from tests.txv_data import txv_file

    path = txv_file("PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv.gz")
    table = evaluate(path, ids="odd", n_boot=0).set_index("label")
    assert int(table["positives"].sum()) > 0 and table.loc["cardiomegaly", "positives"] == 1167
    # measured (docs/report_labels.md)
    floors = {"cardiomegaly": 0.93, "pleural_effusion": 0.96, "pneumothorax": 0.85,
              "nodule": 0.74, "atelectasis": 0.96, "pneumonia": 0.92, "emphysema": 0.97,
              "hiatal_hernia": 0.96, "fracture": 0.93}
    for label, floor in floors.items():
        assert table.loc[label, "f1"] >= floor, (label, table.loc[label, "f1"])


def test_padchest_table_faults_name_the_file_and_study(tmp_path):
    from radharmony.errors import MetadataError
    from radharmony.reports.evaluate_padchest import read_padchest_reports

    p = tmp_path / "padchest.csv"
    p.write_text('StudyID,Report,MethodLabel,Labels\n'
                 '1, derram pleural .,Physician,"[\'pleural effusion\']"\n'
                 '2, sin hallazg .,Physician,"[\'normal\'"\n')
    with pytest.raises(MetadataError, match=r"study 2: Labels is not a list"):
        read_padchest_reports(p)
    p.write_text("StudyID,Report\n1,x\n")
    with pytest.raises(MetadataError, match="not a readable PadChest table"):
        read_padchest_reports(p)
    p.write_text('StudyID,Report,MethodLabel,Labels\n'
                 '1, derram pleural .,Physician,"[\'pleural effusion\', \'\']"\n'
                 '1, derram pleural .,Physician,"[\'pleural effusion\']"\n'
                 '3, x .,RNN_model,"[\'normal\']"\n')
    got = read_padchest_reports(p)
    assert got["study_id"].tolist() == ["1"] and got["terms"].tolist() == [["pleural effusion"]]


def test_report_labels_doc_examples_run():
    """The ``>>>`` examples of docs/report_labels.md give what they show."""
    import doctest
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "report_labels.md"
    result = doctest.testfile(str(doc), module_relative=False)
    assert result.attempted >= 4 and result.failed == 0
