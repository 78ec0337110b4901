"""Reliability: bad metadata (hand-written cases), path safety, nothing executes on load,
nothing lost. The randomized metadata cases are in test_metadata_fuzz.py, images in
test_images_bad.py."""

from __future__ import annotations

import ast
import inspect
import json
import os
import pickle
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import radharmony
import radharmony.table.schema
from radharmony.table.harmonizer import BaseHarmonizer
from radharmony.datasets.rexgradient import ReXGradientValidDataset, ReXGradientValidHarmonizer
from radharmony.errors import (MetadataError, PathSafetyError, RadHarmonyError, RowsDroppedWarning,
                               SavedFileError, SchemaError)
from radharmony.fake import FAKES, _load_all
from radharmony.fake.rexgradient import make_metadata, write_rexgradient
from radharmony.imaging.read import safe_path, sniff
from radharmony.registry import get_harmonizer_class, list_datasets
from radharmony.spec import REQUIRED_COLUMNS
from radharmony.table.schema import check_relative_path
from radharmony.table.guard import locate_entry

SHARED = Path(__file__).resolve().parents[3] / "shared"
PACKAGE = Path(radharmony.__file__).parent


# -- bad metadata, hand-written: the message names file, entry, expected, found, fix --------------
@pytest.fixture
def rex(tmp_path):
    """A ReXGradient valid replica without images; returns (metadata path, its JSON)."""
    root = write_rexgradient(tmp_path, studies={"valid": 6}, images=False)
    path = root.parent / "download" / "metadata" / "valid_metadata_view_position.json"
    return path, json.loads(path.read_text())


def _harmonize(path: Path) -> pd.DataFrame:
    return ReXGradientValidHarmonizer(csv_path=path).harmonize()


def _four_parts(msg: str, *fragments: str) -> None:
    for part in ("Expected:", "Found:", "Fix:", *fragments):
        assert part in msg, f"{part!r} not in {msg!r}"


def _first_key(meta: dict) -> str:
    return next(iter(meta))


def test_unequal_parallel_lists_name_the_entry(rex):
    path, meta = rex
    key = next(k for k, e in meta.items() if len(e["ImagePath"]) > 1)
    meta[key]["ImageViewPosition"] = meta[key]["ImageViewPosition"][:-1]
    path.write_text(json.dumps(meta))
    with pytest.raises(MetadataError) as info:
        _harmonize(path)
    _four_parts(str(info.value), path.name, key, "ImageViewPosition")


@pytest.mark.parametrize("value,error", [(None, SchemaError), (12, SchemaError),
                                         ({"a": 1}, SchemaError), ("", SchemaError),
                                         ("/etc/passwd", PathSafetyError),
                                         ("../deid_png/../../secret.png", PathSafetyError)])
def test_bad_image_path_names_the_entry(rex, value, error):
    path, meta = rex
    key = list(meta)[2]
    meta[key]["ImagePath"][0] = value
    path.write_text(json.dumps(meta))
    with pytest.raises(error) as info:
        _harmonize(path)
    _four_parts(str(info.value), path.name, key)


@pytest.mark.parametrize("value", [None, float("nan"), ["x"], {"id": 1}, True, ""])
def test_bad_patient_id_names_the_entry(rex, value):
    path, meta = rex
    key = list(meta)[3]
    meta[key]["PatientID"] = value
    path.write_text(json.dumps(meta))
    with pytest.raises(SchemaError) as info:
        _harmonize(path)
    _four_parts(str(info.value), path.name, key, "patient_id")


@pytest.mark.parametrize("value", ["yesterday", 10 ** 30, True, [20200101], 2020.5, "inf"])
def test_bad_study_date_names_entry_and_field(rex, value):
    path, meta = rex
    key = _first_key(meta)
    meta[key]["StudyDate"] = value
    path.write_text(json.dumps(meta))
    with pytest.raises(MetadataError) as info:
        _harmonize(path)
    _four_parts(str(info.value), path.name, key, "StudyDate", repr(value))


def test_study_date_as_text_or_float_is_read(rex):
    path, meta = rex
    a, b = list(meta)[:2]
    meta[a]["StudyDate"], meta[b]["StudyDate"] = "20200131", 20190101.0
    path.write_text(json.dumps(meta))
    df = _harmonize(path).set_index("study_id")
    assert df.loc[meta[a]["StudyInstanceUid"], "study_date"].iloc[0] == 20200131
    assert df.loc[meta[b]["StudyInstanceUid"], "study_date"].iloc[0] == 20190101


def test_nan_and_null_in_optional_fields_give_a_valid_table(rex):
    path, meta = rex
    for e in meta.values():
        for f in ("Findings", "Impression", "PatientAge", "PatientSex", "StudyDate",
                  "AccessionNumber", "ImageViewPosition"):
            e[f] = float("nan") if f != "ImageViewPosition" else None
    path.write_text(json.dumps(meta))
    df = _harmonize(path)
    assert len(df) == sum(len(e["ImagePath"]) for e in meta.values())
    assert df["view_position"].isna().all() and df["study_date"].isna().all()


@pytest.mark.parametrize("content,found", [
    (b"", "empty file"), (b"[]", "wrong top-level type"), (b'"text"', "wrong top-level type"),
    (b'{"a": 1', "line 1 column"), (b'{"a": "\xe9"}', "not UTF-8"),
    (b"\xff\xfe{\x00", "invalid JSON")])  # a UTF-16 BOM: read as UTF-16
def test_broken_files(rex, content, found):
    path, _ = rex
    path.write_bytes(content)
    with pytest.raises(MetadataError) as info:
        _harmonize(path)
    _four_parts(str(info.value), path.name, found)


@pytest.mark.parametrize("content", [b"{}", b"\xff\xfe{\x00}\x00"])  # UTF-8; UTF-16 + BOM
def test_metadata_without_entries_gives_empty_table_and_warning(rex, content):
    path, _ = rex
    path.write_bytes(content)
    with pytest.warns(UserWarning, match="no image references"):
        df = _harmonize(path)
    assert len(df) == 0 and list(df.columns[:5]) == list(REQUIRED_COLUMNS)


def test_truncated_file_names_the_line(rex):
    path, _ = rex
    text = path.read_text()
    path.write_text(text[:len(text) // 2])
    with pytest.raises(MetadataError, match=r"at line \d+ column \d+") as info:
        _harmonize(path)
    _four_parts(str(info.value), path.name)


def test_non_utf8_byte_names_its_line(rex):
    path, _ = rex
    lines = path.read_bytes().split(b"\n")
    i = next(i for i, line in enumerate(lines) if i > 8 and b'"' in line)
    lines[i] = lines[i].replace(b'"', b'"\xe9', 1)  # a Latin-1 byte inside a string
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(MetadataError, match=rf"at line {i + 1} \(byte \d+\)"):
        _harmonize(path)


def test_unexpected_exception_becomes_metadata_error_naming_entry(tmp_path):
    class Naive(BaseHarmonizer):
        spec = ReXGradientValidHarmonizer.spec

        def read(self, inputs):
            return json.loads(inputs.metadata.read_text())

        @classmethod
        def harmonize_raw(cls, raw, *, source="metadata"):
            return pd.DataFrame([{"patient_id": e["pid"], "study_id": k,
                                  "image_path": e["path"].lower(), "view_position": None,
                                  "report": None} for k, e in raw.items()])

    path = tmp_path / "meta.json"
    good = {f"s{i}": {"pid": f"p{i}", "path": f"img/{i}.png"} for i in range(9)}
    path.write_text(json.dumps({**good, "s5": {"pid": "p5", "path": None}}))
    with pytest.raises(MetadataError) as info:
        Naive(csv_path=path).harmonize()
    msg = str(info.value)
    _four_parts(msg, path.name, "entry 's5'", "AttributeError")
    assert not isinstance(info.value, (KeyError, TypeError, AttributeError))
    path.write_text(json.dumps({k: {"path": e["path"]} for k, e in good.items()}))
    # every entry lacks the key: a fault of the file's structure, no single entry is named
    with pytest.raises(MetadataError, match="no key or column 'pid'"):
        Naive(csv_path=path).harmonize()


def test_locate_entry_on_tables_and_lists():
    def run(part):
        if isinstance(part, pd.DataFrame):
            part = part.to_dict("records")
        return [r["x"] + 1 for r in part]

    rows = [{"x": i} for i in range(20)]
    rows[13] = {"x": "bad"}
    assert locate_entry(rows, run, TypeError).startswith("item 13")
    assert locate_entry(pd.DataFrame(rows), run, TypeError).startswith("row 13")
    assert locate_entry({"a": pd.DataFrame()}, run, TypeError) is None  # bundles: no entries


# -- path safety --------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["/etc/passwd", "../x.png", "a/../../x.png", "..", "C:\\x.png",
                                 "c:/x.png", "\\\\server\\share\\x.png", "//server/x.png",
                                 "a/\x00.png", "", " ", ".", "./"])
def test_check_relative_path_refuses(bad):
    with pytest.raises((PathSafetyError, SchemaError)) as info:
        check_relative_path(bad, where="meta.json, row 3")
    assert "meta.json, row 3" in str(info.value)


@pytest.mark.parametrize("good,norm", [("a/b.png", "a/b.png"), ("a/./b.png", "a/b.png"),
                                       ("a\\b.png", "a/b.png"), ("a/x/../b.png", "a/b.png")])
def test_check_relative_path_accepts(good, norm):
    assert check_relative_path(good, where="x") == norm


def test_symlink_escaping_the_root_is_refused(tmp_path):
    root = write_rexgradient(tmp_path / "data", studies={"valid": 3}, image_size=(64, 48))
    secret = tmp_path / "outside" / "secret.png"
    secret.parent.mkdir()
    secret.write_bytes(b"\x89PNG\r\n\x1a\nsecret")
    ds = ReXGradientValidDataset(root, cache_dir=None)
    target = root / ds.harmonized_df["image_path"][0]
    target.unlink()
    target.symlink_to(secret)
    with pytest.raises(PathSafetyError) as info:
        ds[0]
    msg = str(info.value)
    assert ds.harmonized_df["sample_id"][0] in msg and "outside base_image_dir" in msg
    report = ds.validate(progress=False)
    assert report.paths("unsafe_path") == [ds.harmonized_df["image_path"][0]]
    # a symlinked folder leading out is refused too; one staying inside is followed
    folder = target.parent.parent
    moved = tmp_path / "outside" / "moved"
    folder.rename(moved)
    folder.symlink_to(moved)
    with pytest.raises(PathSafetyError):
        ds.image_file(0)
    folder.unlink()
    moved.rename(folder)
    inside = root / "alias.png"
    inside.symlink_to(root / ds.harmonized_df["image_path"][1])
    assert safe_path(root, "alias.png") == (root / ds.harmonized_df["image_path"][1]).resolve()


def test_safe_path_refuses_absolute_and_nul(tmp_path):
    for bad in ("/etc/passwd", "a\x00b", "", str(tmp_path / "x")):
        with pytest.raises(PathSafetyError):
            safe_path(tmp_path, bad)


def test_harmonized_df_with_escaping_path_is_refused(tmp_path):
    root = write_rexgradient(tmp_path, studies={"valid": 2}, images=False)
    df = ReXGradientValidHarmonizer(base_image_dir=root).harmonize()
    df.loc[0, "image_path"] = "../../../../etc/passwd"
    with pytest.raises(PathSafetyError, match="harmonized_df, row 0"):
        ReXGradientValidDataset(root, harmonized_df=df, cache_dir=None)


# -- nothing executes on load -------------------------------------------------------------------
FORBIDDEN = [(r"\bimport pickle\b|\bfrom pickle\b|\bcPickle\b|\bdill\b|\bshelve\b|\bmarshal\b",
              "pickle-family module"),
             (r"\bread_pickle\s*\(", "pandas.read_pickle"),
             (r"allow_pickle\s*=\s*True", "numpy allow_pickle=True"),
             (r"\byaml\.load\s*\(", "yaml.load (use yaml.safe_load)"),
             (r"joblib\.load\s*\(", "joblib.load")]


#: modules that may import pickle, each with why: none of them reads a file a user hands in
PICKLE_ALLOWED = {
    "mixture/spool.py": "the build's fork-server processes take their arguments as pickles the "
                        "build itself wrote to its private 0700 temporary folder (removed after)",
}


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_package_never_unpickles_or_evals(path):
    text = path.read_text()
    allowed = str(path.relative_to(PACKAGE)) in PICKLE_ALLOWED
    for pattern, what in FORBIDDEN[1:] if allowed else FORBIDDEN:
        assert not re.search(pattern, text), f"{path.name} uses {what}"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            assert name not in ("eval", "exec", "__import__"), f"{path.name} calls {name}"
            if name == "torch.load":
                kw = {k.arg: ast.unparse(k.value) for k in node.keywords}
                assert kw.get("weights_only") == "True", f"{path.name}: torch.load without " \
                    "weights_only=True"


@pytest.fixture
def saved(tmp_path):
    root = write_rexgradient(tmp_path, studies={"valid": 12}, images=False)
    h = ReXGradientValidHarmonizer(base_image_dir=root)
    return h, h.save(tmp_path / "h.parquet")


def test_saved_harmonizer_round_trip(saved):
    h, path = saved
    pd.testing.assert_frame_equal(radharmony.load_harmonizer(path).harmonize(), h.harmonize())


def test_truncated_saved_file(saved):
    _, path = saved
    data = path.read_bytes()
    for cut in (0, 4, len(data) // 3, len(data) - 9):
        path.write_bytes(data[:cut])
        with pytest.raises(SavedFileError, match=path.name):
            radharmony.load_harmonizer(path)


def test_damaged_saved_file_never_loads_different_data(saved):
    h, path = saved
    data, expected = path.read_bytes(), h.harmonize()
    outcomes = {"error": 0, "same": 0}
    for at in range(8, len(data) - 8, 37):  # flip one bit every 37 bytes, one at a time
        flipped = bytearray(data)
        flipped[at] ^= 0x04
        path.write_bytes(bytes(flipped))
        try:
            loaded = radharmony.load_harmonizer(path).harmonize()
        except SavedFileError as exc:
            assert path.name in str(exc)
            outcomes["error"] += 1
            continue
        pd.testing.assert_frame_equal(loaded, expected)  # unused bytes (statistics, padding)
        outcomes["same"] += 1
    assert outcomes["error"] > 0


def test_tampered_header_is_refused(saved, tmp_path):
    import pyarrow.parquet as pq

    _, path = saved
    table = pq.read_table(path)
    for header in ({"format": "radharmony-harmonizer", "key": "os.system", "arguments": {}},
                   {"format": "radharmony-harmonizer", "key": "rexgradient_valid",
                    "arguments": {"evil": "x"}},
                   {"format": "something-else"}, ["not", "a", "dict"]):
        meta = {**table.schema.metadata, b"radharmony": json.dumps(header).encode()}
        pq.write_table(table.replace_schema_metadata(meta), path)
        with pytest.raises(SavedFileError, match=path.name):
            radharmony.load_harmonizer(path)


def test_pickle_payload_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    blob = pickle.dumps(Payload())
    for name, data in (("h.parquet", blob), ("h.pkl", blob),
                       ("h2.parquet", b"PAR1" + blob + b"PAR1")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(SavedFileError):
            radharmony.load_harmonizer(tmp_path / name)
    root = write_rexgradient(tmp_path / "d", studies={"valid": 2}, images=False)
    with pytest.raises(SavedFileError):
        ReXGradientValidDataset(root, harmonizer_path=tmp_path / "h.parquet")
    assert not marker.exists()


# -- nothing lost ---------------------------------------------------------------------------------
def test_rexgradient_rows_equal_image_references(rex):
    path, meta = rex
    assert len(_harmonize(path)) == sum(len(e["ImagePath"]) for e in meta.values())


def test_rexgradient_real_excerpt_rows_equal_references():
    excerpt = SHARED / "real" / "rexgradient" / "test_metadata_excerpt.json"
    if not excerpt.is_file():
        pytest.skip("shared real samples absent")
    meta = json.loads(excerpt.read_text())
    df = get_harmonizer_class("rexgradient_test")(csv_path=excerpt).harmonize()
    assert len(df) == sum(len(e["ImagePath"]) for e in meta.values()) == 162


def test_identical_repeat_is_merged_with_a_warning(rex):
    path, meta = rex
    key = _first_key(meta)
    meta[key]["ImagePath"].append(meta[key]["ImagePath"][0])
    meta[key]["ImageViewPosition"].append(meta[key]["ImageViewPosition"][0])
    path.write_text(json.dumps(meta))
    refs = sum(len(e["ImagePath"]) for e in meta.values())
    with pytest.warns(RowsDroppedWarning, match=rf"1 repeated image reference.*{refs - 1} rows "
                      rf"for {refs} references"):
        df = _harmonize(path)
    assert len(df) == refs - 1


def test_conflicting_repeat_is_an_error_naming_the_path(rex):
    path, meta = rex
    a, b = list(meta)[:2]
    meta[b]["ImagePath"][0] = meta[a]["ImagePath"][0]  # same image in two studies
    path.write_text(json.dumps(meta))
    with pytest.raises(SchemaError) as info:
        _harmonize(path)
    _four_parts(str(info.value), path.name, meta[a]["ImagePath"][0].split("/")[-1])


def _image_files(root: Path) -> set[str]:
    out = set()
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            with open(p, "rb") as fh:
                if sniff(fh.read(132)):
                    out.add(p.relative_to(root).as_posix())
    return out


def test_every_image_a_fake_writes_is_in_a_table(tmp_path):
    """Generic over every registered dataset: the images a replica ships are all in the
    tables of the keys sharing that replica, or harmonizing warned about the difference."""
    _load_all()
    by_maker: dict = {}
    for key in list_datasets():
        if key in FAKES:
            by_maker.setdefault(FAKES[key], []).append(key)
    for n, (maker, keys) in enumerate(by_maker.items()):
        kwargs = maker(tmp_path / f"r{n}")
        root = Path(kwargs["base_image_dir"])
        in_tables, warned = set(), []
        for key in keys:
            cls = get_harmonizer_class(key)
            with warnings.catch_warnings(record=True) as rec:
                warnings.simplefilter("always")
                params = inspect.signature(cls).parameters
                h = cls(**{k: v for k, v in kwargs.items() if k in params})
                df = h.harmonize()
                inputs = h.inputs(h.csv_path)
            warned += [str(w.message) for w in rec]
            for role, (folder, _) in inputs.folders.items():  # annotation images, e.g. masks
                if folder is not None and role not in ("images", "png_images"):
                    rel = Path(os.path.relpath(folder, root)).as_posix()
                    in_tables |= {p for p in _image_files(root) if p.startswith(rel + "/")}
            in_tables |= set(df["image_path"])
            for col in (c for c in df.columns if c.endswith("_image_path")):  # e.g. priors
                in_tables |= set(df[col].dropna())
            for col in ("image_paths", "ref_image_paths"):  # a VQA question's images
                if col in df.columns:
                    in_tables |= {p for ps in df[col].dropna() for p in ps}
            if cls.spec.row_unit == "volume" and "stack" in df.columns:  # a stack of a
                in_tables |= {p.rsplit("/", 1)[0] for p in df["image_path"]}  # series: its
                # row names its first file, the series is its folder
        series = tuple(p.rstrip("/") + "/" for p in in_tables if (root / p).is_dir())
        missing = {p for p in _image_files(root) - in_tables
                   if not p.startswith(series)}  # a DICOM series row names its folder
        assert not missing or warned, f"{keys}: {len(missing)} images in no table, no warning: " \
            f"{sorted(missing)[:5]}"


# -- schema.validate on hand-made tables ----------------------------------------------------------
def _table(**over) -> pd.DataFrame:
    df = pd.DataFrame({"patient_id": ["p1", "p2"], "study_id": ["s1", "s2"],
                       "image_path": ["a/1.png", "a/2.png"], "view_position": ["PA", None],
                       "report": ["x", None], "effusion": [1.0, np.nan]})
    for k, v in over.items():
        df[k] = v
    return df


SPEC = ReXGradientValidHarmonizer.spec.__class__(key="toy", title="toy", label_cols=("effusion",))


@pytest.mark.parametrize("over,match", [
    ({"effusion": ["yes", "no"]}, "not numeric"), ({"effusion": [np.inf, 0.0]}, "infinity"),
    ({"view_position": [["PA"], None]}, "view_position that is not text"),
    ({"report": [{"a": 1}, None]}, "report that is not text"),
    ({"boxes": ["{not json", None]}, "boxes cell"),
    ({"patient_id": [1.5e300 * 1e10, 2]}, "not an id")])
def test_validate_refuses_bad_cells(over, match):
    with pytest.raises(SchemaError, match=match):
        radharmony.table.schema.validate(_table(**over), SPEC, source="t.csv")


def test_validate_refuses_repeated_columns():
    df = _table()
    df = pd.concat([df, df[["report"]]], axis=1)
    with pytest.raises(SchemaError, match="column names repeat"):
        radharmony.table.schema.validate(df, SPEC)


def test_validate_keeps_integer_ids_from_csv():
    out = radharmony.table.schema.validate(_table(patient_id=[12.0, 13.0]), SPEC)
    assert list(out["patient_id"]) == ["12", "13"]


def test_dataset_error_without_the_file_name_gets_it(tmp_path):
    class Terse(BaseHarmonizer):
        spec = ReXGradientValidHarmonizer.spec

        def read(self, inputs):
            return {"k": 1}

        @classmethod
        def harmonize_raw(cls, raw, *, source="metadata"):
            raise MetadataError("entry 'k' is not an object", expected="an object",
                                found="1", fix="re-download")

    path = tmp_path / "terse.json"
    path.write_text("{}")
    with pytest.raises(MetadataError, match=r"terse\.json: entry 'k' is not an object"):
        Terse(csv_path=path).harmonize()


def test_a_table_read_back_from_the_cache_is_built_with_the_collector_paused(
        rex, tmp_path, monkeypatch):
    """The cached table's nested cells are decoded with the cyclic garbage collector paused
    (its full collections over every live object were half the decode's time), and it is
    running again afterwards."""
    import gc

    import radharmony.table.store as store

    cache = tmp_path / "cache"
    first = ReXGradientValidHarmonizer(csv_path=rex[0]).harmonize(cache_dir=cache)
    seen = []
    decode = store.decode_json_columns
    monkeypatch.setattr(store, "decode_json_columns",
                        lambda df, cols: seen.append(gc.isenabled()) or decode(df, cols))
    again = ReXGradientValidHarmonizer(csv_path=rex[0]).harmonize(cache_dir=cache)
    assert seen == [False] and gc.isenabled()
    pd.testing.assert_frame_equal(again, first)
