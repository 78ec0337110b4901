"""The mixture spec: sampling rules, and every bad spec refused before anything is read, the
line named."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from radharmony.mixture.rules import RuleError, derive_seed, parse_rule
from radharmony.mixture.spec import MixtureSpecError, load_spec

pytest.importorskip("yaml")


@pytest.mark.parametrize("text, n, picks", [
    ("all", 4, [0, 1, 2, 3]),
    ("first:2", 5, [0, 1]),
    ("end:2", 5, [3, 4]),
    ("first:40%", 5, [0, 1]),          # ceil(0.4 * 5) = 2
    ("first:41%", 5, [0, 1, 2]),       # ceil(2.05) = 3
    ("first:10", 3, [0, 1, 2]),        # at most len
    ("x2", 3, [0, 1, 2, 0, 1, 2]),
    (3, 2, [0, 1, 0, 1, 0, 1]),
    (1, 2, [0, 1]),
])
def test_rules_draw_what_llava_users_expect(text, n, picks):
    assert parse_rule(text).pick(n, seed=7).tolist() == picks


def test_random_rule_is_seeded_sorted_and_without_repeats():
    a = parse_rule("random:50%").pick(10, seed=derive_seed(0, "src", "task"))
    b = parse_rule("random:50%").pick(10, seed=derive_seed(0, "src", "task"))
    c = parse_rule("random:50%").pick(10, seed=derive_seed(0, "src", "other_task"))
    assert a.tolist() == b.tolist() and len(a) == 5 and len(set(a.tolist())) == 5
    assert a.tolist() == sorted(a.tolist()) and a.tolist() != c.tolist()
    half = parse_rule("1.5").pick(4, seed=1)  # 4 once, then 2 of them again
    assert half[:4].tolist() == [0, 1, 2, 3] and len(half) == 6


@pytest.mark.parametrize("bad", ["some", "random:0%", "random:150%", "first:1.5", "0.5", True,
                                 "random:"])
def test_bad_rules_are_refused(bad):
    with pytest.raises(RuleError):
        parse_rule(bad)


GOOD = """\
name: demo
seed: 3
valid: 0.1
images: cache
size: 256
boxes: maira2
sources:
  - dataset: mimic_cxr_jpg
    root: mimic
    tasks:
      report_findings: all
      classify_findings: random:25%
  - dataset: rexgradient_train
    root: /data/rex
    name: rex_silver
    labels: report
    tasks: {classify_findings: x2}
    max_records: 10
hold_out:
  - {dataset: mimic_cxr_jpg, root: mimic}
"""


def test_a_good_spec_resolves(tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text(GOOD)
    spec = load_spec(path)
    d = spec.to_dict()
    assert (d["name"], d["seed"], d["valid"], d["images"], d["boxes"]) == \
        ("demo", 3, 0.1, {"mode": "cache", "size": 256}, "maira2")
    mimic, rex = d["sources"]
    assert mimic["root"] == str(tmp_path / "mimic") and mimic["split"] == "train"
    assert mimic["tasks"] == {"report_findings": "all", "classify_findings": "random:25%"}
    assert rex["split"] == "all" and rex["kwargs"]["labels"] == "report"  # one split already
    assert rex["name"] == "rex_silver" and rex["max_records"] == 10
    assert d["hold_out"][0]["split"] == "test"  # the default of a hold-out set


BAD = [  # (change to GOOD, line named, words of the message)
    ("seed: 3", "sed: 3", 2, ["unknown key 'sed'", "did you mean 'seed'"]),
    ("boxes: maira2", "boxes: maira", 6, ["unknown box dialect", "maira2"]),
    ("images: cache", "images: cached", 4, ["unknown images mode"]),
    ("dataset: mimic_cxr_jpg\n    root: mimic", "dataset: mimic_cxr_jgp\n    root: mimic", 8,
     ["sources[0].dataset", "unknown dataset 'mimic_cxr_jgp'", "mimic_cxr_jpg"]),
    ("report_findings: all", "report_findngs: all", 11,
     ["sources[0].tasks.report_findngs", "unknown task", "did you mean 'report_findings'"]),
    ("classify_findings: x2", "vqa_mcq: x2", 17,
     ["rexgradient_train cannot feed task 'vqa_mcq'", "has no questions",
      "can feed report_findings"]),
    ("random:25%", "random:250%", 12, ["bad sampling rule", "at most 100"]),
    ("labels: report", "label: report", 16, ["unknown key 'label' for rexgradient_train",
                                             "did you mean 'labels'"]),
    ("max_records: 10", "max_records: -1", 18, ["max_records is not a positive count"]),
    ("{dataset: mimic_cxr_jpg, root: mimic}", "{dataset: mimic_cxr_jpg, root: mimic, "
     "split: tst}", 20, ["hold_out[0].split", "'tst' cannot be drawn", "did you mean 'test'"]),
    ("size: 256", "size: 8", 5, ["size is not an image side"]),
]


@pytest.mark.parametrize("old, new, line, words", BAD, ids=[b[1][:24] for b in BAD])
def test_bad_specs_are_refused_naming_the_line(tmp_path, old, new, line, words):
    assert old in GOOD
    path = tmp_path / "mix.yaml"
    path.write_text(GOOD.replace(old, new, 1))
    with pytest.raises(MixtureSpecError) as err:
        load_spec(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}:{line}: "), msg
    for w in words:
        assert w in msg, msg


def test_a_dict_spec_names_the_key_path():
    with pytest.raises(MixtureSpecError, match=r"^spec: sources\[0\]: has no 'root'"):
        load_spec({"name": "x", "sources": [{"dataset": "chexpert", "tasks": {"classify_view":
                                                                              "all"}}]})


def test_a_task_the_dataset_cannot_feed_lists_what_it_can():
    with pytest.raises(MixtureSpecError, match="Found: chexpert has no findings[.]") as err:
        load_spec({"name": "x", "sources": [{"dataset": "chexpert", "root": "/d",
                                             "tasks": {"report_findings": "all"}}]})
    assert "chexpert can feed classify_findings, finding_question, classify_view" in \
        str(err.value)


def test_custom_prompts_may_use_only_the_task_slots(tmp_path):
    spec = {"name": "x", "sources": [{"dataset": "chexpert", "root": "/d",
                                      "tasks": {"finding_question": "all"}}],
            "prompts": {"finding_question": ["Any {finding}?"]}}
    assert load_spec(spec).prompts == {"finding_question": ["Any {finding}?"]}
    spec["prompts"] = {"finding_question": ["Any {findng}?"]}
    with pytest.raises(MixtureSpecError, match=r"prompts\.finding_question\[0\]: prompt uses "
                                               r"unknown placeholders \['findng'\]"):
        load_spec(spec)


def test_yaml_errors_name_the_line(tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text(textwrap.dedent("""\
        name: x
        sources:
          - dataset: chexpert
           root: /d
        """))
    with pytest.raises(MixtureSpecError, match=rf"^{path}:4: the spec is not valid YAML"):
        load_spec(path)


def test_two_sources_with_one_name_are_refused():
    src = {"dataset": "chexpert", "root": "/d", "tasks": {"classify_view": "all"}}
    with pytest.raises(MixtureSpecError, match=r"sources\[1\]: two sources are named "
                                               r"'chexpert'"):
        load_spec({"name": "x", "sources": [src, dict(src)]})
    assert np.array_equal(parse_rule("all").pick(0, seed=0), np.zeros(0))
