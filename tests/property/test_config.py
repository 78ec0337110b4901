"""Any YAML given to the config loader: a harmonizer (and dataset) class, or a ConfigError
that names the wrong field -- never another exception. The documents are drawn around a valid
config: each field absent, valid, or any YAML value, with the known field names as keys so
that every section's checks (report, labels, label map, boxes, mask, splits) are reached."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from radharmony.custom import ConfigError, load_config

yaml = pytest.importorskip("yaml")
PROFILE = settings.get_profile("radharmony-property")

NAMES = ["column", "columns", "sections", "title", "list", "separator", "labels", "none",
         "unknown", "encoding", "rename", "aggregate", "format", "units", "image_size",
         "width", "height", "label", "annotator", "rle", "png", "path", "missing", "size",
         "start", "order", "template", "regex", "constant", "strip_prefix", "strip_suffix",
         "replace_extension", "map", "group_by", "patient", "study", "image", "row",
         "delimiter", "records", "keyed_by", "list_separator", "Effusion", "A"]
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 10 ** 20), st.floats(),
                   st.sampled_from(["", "A", "B", "x.csv", "t.json", "pleural_effusion",
                                    "{A}/{B}.png", "(", "image", "study", "box", "reader",
                                    "xywh", "percent", "exact", "any", "-1", "ignore"]),
                   st.text(max_size=6))
VALUE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.sampled_from(NAMES) | SCALAR.filter(lambda v: v is None or isinstance(v, (str, int))),
    inner, max_size=4), max_leaves=10)
VALID = {"key": "demo_cxr", "title": "Demo", "table": {"path": "t.csv"},
         "ids": {"patient": "PatientID"}, "image": {"path": "File"},
         "view": {"column": "View", "map": {"PA": "PA"}},
         "report": {"sections": [{"column": "Findings", "title": "FINDINGS"}]},
         "labels": {"columns": ["A", "B"]}, "label_map": {"A": "pleural_effusion"},
         "boxes": {"columns": ["x", "y", "w", "h"], "format": "xywh"},
         "mask": {"rle": {"column": "rle", "size": {"height": 8, "width": 8}}},
         "extras": {"age": "Age"}, "splits": {"column": "Split", "map": {"tr": "train"}}}
REQUIRED = ("key", "title", "table", "ids", "image")
_TMP = tempfile.TemporaryDirectory(prefix="rh-prop-")  # removed at exit


@st.composite
def configs(draw):
    out = {}
    for name, good in VALID.items():
        how = draw(st.sampled_from(["valid", "valid", "absent", "junk"]) if name in REQUIRED
                   else st.sampled_from(["valid", "absent", "absent", "junk"]))
        if how == "valid":
            out[name] = good
        elif how == "junk":
            out[name] = draw(VALUE)
    if draw(st.booleans()):
        out[draw(st.sampled_from(NAMES + ["licence", "license", "expected"]))] = draw(VALUE)
    return out


DOCUMENTS = st.one_of(
    configs().map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
    VALUE.map(lambda v: yaml.safe_dump(v)),
    st.text(max_size=80),
    st.sampled_from(["!!python/object/apply:os.system ['true']", "a: [1, 2", "? [a, b]\n: 1",
                     "&a [*a]", "key: !!binary aGk=", "- - - -", "key: 1e999"]),
)


def _expect_config_error(exc: ConfigError, text: str) -> None:
    if f"field {exc.field!r}" not in str(exc):  # only a file that is not YAML names no field
        assert not exc.field and "is not valid YAML" in str(exc), str(exc)


@PROFILE
@given(DOCUMENTS)
@example(yaml.safe_dump(VALID))
@example(yaml.safe_dump({**VALID, "labels": {"columns": ["A"], "rename": {"A": None}}}))
@example(yaml.safe_dump({**VALID, "expected": {"images": None}}))
@example("? ''")  # an empty key: named as field ''
@example("key: demo\ntitle: T\ntable: {path: t.csv}\nids: {patient: P}\nimage: {path: F}\n"
         "splits: {group_by: [1]}")
def test_config_loader(text):
    path = Path(_TMP.name) / "cfg.yaml"  # rewritten by each example
    path.write_text(text, encoding="utf-8")
    try:
        harmonizer, dataset = load_config(path)
    except ConfigError as exc:
        _expect_config_error(exc, text)
    else:
        assert harmonizer.spec.key == dataset.harmonizer_class.spec.key
