"""Property test: damaged metadata gives a valid table or a radharmony error, for every dataset.

For each registered dataset with a fake writer, the replica's metadata file
(``harmonizer_class(**kwargs).resolve_metadata_path()``) is mutated generically by format --
a JSON tree, JSON Lines, a CSV/TSV table, any of them gzipped, or plain bytes -- and
harmonized. The outcome must be a table that passes ``schema.validate``, or a
``RadHarmonyError`` whose four-part message names the file. A ``KeyError``, ``TypeError`` or
any other exception fails the test. Datasets added later are picked up automatically.
"""

from __future__ import annotations

import csv
import gzip
import inspect
import io
import json
import os
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radharmony.errors import RadHarmonyError
from radharmony.fake import FAKES, _load_all
from radharmony.registry import get_harmonizer_class, list_datasets
from radharmony.spec import REQUIRED_COLUMNS
from radharmony.table.schema import validate

_load_all()
KEYS = list_datasets()
# Per dataset key; deterministic in the suite. RADHARMONY_FUZZ_EXAMPLES=2000 explores further
# (randomly seeded) when hunting bugs.
EXAMPLES = int(os.environ.get("RADHARMONY_FUZZ_EXAMPLES", 25))
DERANDOMIZE = "RADHARMONY_FUZZ_EXAMPLES" not in os.environ

# -- replicas, written once per fake maker ------------------------------------------------------
_REPLICAS: dict = {}


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    def get(key: str):
        maker = FAKES[key]
        if maker not in _REPLICAS:
            _REPLICAS[maker] = maker(tmp_path_factory.mktemp(f"fuzz_{key}"))
        cls = get_harmonizer_class(key)
        params = inspect.signature(cls).parameters
        kwargs = {k: v for k, v in _REPLICAS[maker].items() if k in params}
        path = cls(**kwargs).resolve_metadata_path()
        return cls, kwargs, Path(path)
    return get


# -- generic mutations -------------------------------------------------------------------------
JSON_VALUES = st.sampled_from([None, float("nan"), float("inf"), -1, 0, 3.5, True, "", "x",
                               "../../../etc/passwd", "/etc/passwd", "C:\\x.png", "a\x00b",
                               [], {}, [None], {"a": 1}, 10 ** 30, "ñ-é"])
CSV_VALUES = st.sampled_from(["", "NaN", "nan", "None", "-1", "1e309", "x", "../../x.png",
                              "/abs/x.png", "a,b", '"', "ñ", "0", "1.5", " "])
BYTE_OPS = ("truncate", "empty", "non_utf8", "flip")


def _nodes(tree, limit: int = 3000) -> list[tuple]:
    """Paths (tuples of keys/indices) of the nodes of a JSON tree, root first."""
    out, stack = [], [()]
    while stack and len(out) < limit:
        path = stack.pop()
        out.append(path)
        node = _get(tree, path)
        if isinstance(node, dict):
            stack += [path + (k,) for k in reversed(list(node))]
        elif isinstance(node, list):
            stack += [path + (i,) for i in reversed(range(len(node)))]
    return out


def _get(tree, path):
    for k in path:
        tree = tree[k]
    return tree


def mutate_json(tree, data):
    """One structural change anywhere in a JSON tree (may replace the root)."""
    nodes = _nodes(tree)
    path = nodes[data.draw(st.integers(0, len(nodes) - 1), label="node")]
    op = data.draw(st.sampled_from(["replace", "delete", "shorten", "extend", "duplicate",
                                    "root"]), label="json op")
    if op == "root" or not path:
        return data.draw(JSON_VALUES | st.just([tree]), label="root")
    parent, key, node = _get(tree, path[:-1]), path[-1], _get(tree, path)
    if op == "replace":
        parent[key] = data.draw(JSON_VALUES, label="value")
    elif op == "delete":
        del parent[key]
    elif op == "shorten" and isinstance(node, list) and node:
        node.pop()  # parallel lists of unequal length
    elif op == "extend" and isinstance(node, list):
        node.append(node[-1] if node else data.draw(JSON_VALUES))
    elif op == "duplicate":  # a repeated entry: duplicate image paths
        if isinstance(parent, dict):
            parent[f"{key}_copy"] = json.loads(json.dumps(node))
        else:
            parent.insert(key, json.loads(json.dumps(node)))
    else:
        parent[key] = data.draw(JSON_VALUES, label="value")
    return tree


def mutate_jsonl(text: str, data) -> str:
    lines = text.splitlines()
    i = data.draw(st.integers(0, max(0, len(lines) - 1)), label="line")
    op = data.draw(st.sampled_from(["tree", "delete", "duplicate", "cut", "garbage", "blank"]),
                   label="jsonl op")
    if not lines:
        return "{}\n"
    if op == "tree":
        lines[i] = json.dumps(mutate_json(json.loads(lines[i]), data))
    elif op == "delete":
        del lines[i]
    elif op == "duplicate":
        lines.insert(i, lines[i])
    elif op == "cut":
        lines[i] = lines[i][:data.draw(st.integers(0, len(lines[i])), label="cut at")]
    elif op == "garbage":
        lines[i] = data.draw(st.sampled_from(["null", "[]", "42", "{", "NaN", '"x"']))
    else:
        lines.insert(i, "")
    return "\n".join(lines) + "\n"


def mutate_csv(text: str, data) -> str:
    delim = "\t" if text.split("\n", 1)[0].count("\t") > text.split("\n", 1)[0].count(",") \
        else ","
    rows = list(csv.reader(io.StringIO(text), delimiter=delim))
    if not rows:
        return text
    r = data.draw(st.integers(0, len(rows) - 1), label="row")
    c = data.draw(st.integers(0, max(0, len(rows[r]) - 1)), label="column")
    op = data.draw(st.sampled_from(["cell", "cell", "drop_cell", "add_cell", "dup_row",
                                    "del_row", "del_column", "rename_header"]), label="csv op")
    if op == "cell" and rows[r]:
        rows[r][c] = data.draw(CSV_VALUES, label="value")
    elif op == "drop_cell" and rows[r]:
        del rows[r][c]
    elif op == "add_cell":
        rows[r].append(data.draw(CSV_VALUES, label="value"))
    elif op == "dup_row":
        rows.insert(r, list(rows[r]))
    elif op == "del_row":
        del rows[r]
    elif op == "del_column":
        rows = [row[:c] + row[c + 1:] for row in rows]
    elif op == "rename_header" and rows[0]:
        rows[0][min(c, len(rows[0]) - 1)] += "_renamed"
    out = io.StringIO()
    csv.writer(out, delimiter=delim, lineterminator="\n").writerows(rows)
    return out.getvalue()


def mutate_bytes(raw: bytes, data) -> bytes:
    op = data.draw(st.sampled_from(BYTE_OPS), label="byte op")
    at = data.draw(st.integers(0, max(0, len(raw) - 1)), label="at")
    if op == "truncate":
        return raw[:at]
    if op == "empty":
        return b""
    if op == "non_utf8":
        return raw[:at] + b"\xff\xfe\x80\xc3" + raw[at:]
    return raw[:at] + bytes([raw[at] ^ 0x5A]) + raw[at + 1:] if raw else raw


def text_format(raw: bytes) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes"
    try:
        json.loads(text)
        return "json"
    except ValueError:
        pass
    lines = [ln for ln in text.splitlines() if ln.strip()]
    try:
        if lines and all(isinstance(json.loads(ln), (dict, list)) for ln in lines[:50]):
            return "jsonl"
    except ValueError:
        pass
    return "csv" if lines else "bytes"


def mutate(original: bytes, data) -> bytes:
    """A damaged version of a metadata file, chosen by its format."""
    gz = original[:2] == b"\x1f\x8b"
    inner = gzip.decompress(original) if gz else original
    fmt = text_format(inner)
    kind = data.draw(st.sampled_from(["structure", "structure", "bytes"]), label="layer")
    if kind == "bytes" or fmt == "bytes":
        inner = mutate_bytes(inner, data)
    elif fmt == "json":
        inner = json.dumps(mutate_json(json.loads(inner), data), indent=1).encode()
    elif fmt == "jsonl":
        inner = mutate_jsonl(inner.decode(), data).encode()
    else:
        inner = mutate_csv(inner.decode(), data).encode()
    out = gzip.compress(inner, mtime=0) if gz else inner
    if gz and data.draw(st.booleans(), label="truncate gzip"):
        out = out[:data.draw(st.integers(0, len(out)), label="gzip cut")]
    return out


# -- the property ----------------------------------------------------------------------------------
def assert_table_or_clear_error(cls, kwargs: dict, path: Path) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # warnings are allowed; what counts is the outcome
            df = cls(**kwargs).harmonize()
    except RadHarmonyError as exc:
        msg = str(exc)
        assert path.name in msg, f"error does not name the file: {msg}"
        for part in ("Expected:", "Found:", "Fix:"):
            assert part in msg, f"error lacks {part!r}: {msg}"
        return
    again = validate(df, cls.spec, source="fuzz")
    assert tuple(again.columns[:5]) == REQUIRED_COLUMNS
    unique = "question_id" if cls.spec.row_unit == "question" else "image_path"
    assert again[unique].is_unique  # one row per image, or per question (VQA)


@pytest.mark.parametrize("key", KEYS)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=DERANDOMIZE,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_mutated_metadata_gives_table_or_clear_error(key, replica, data):
    if key not in FAKES:
        pytest.skip(f"{key} has no fake writer")
    cls, kwargs, path = replica(key)
    if not path.is_file():
        pytest.skip(f"{key}'s metadata is not a single file: {path}")
    original = path.read_bytes()
    try:
        path.write_bytes(mutate(original, data))
        assert_table_or_clear_error(cls, kwargs, path)
    finally:
        path.write_bytes(original)


@pytest.mark.parametrize("key", KEYS)
def test_unmutated_replica_harmonizes(key, replica):
    if key not in FAKES:
        pytest.skip(f"{key} has no fake writer")
    cls, kwargs, path = replica(key)
    assert len(cls(**kwargs).harmonize()) > 0


# -- the same property for metadata formats no built-in dataset uses yet (CSV, gzipped JSON Lines):
# naive harmonizers, written the way a quick dataset module would be, registered nowhere.
from radharmony.table.harmonizer import BaseHarmonizer  # noqa: E402
from radharmony.spec import DatasetSpec  # noqa: E402


class _NaiveCsv(BaseHarmonizer):
    spec = DatasetSpec(key="naive_csv", title="naive CSV", metadata_files=("labels.csv",),
                       label_cols=("effusion",))

    def read(self, inputs):
        import pandas as pd
        return pd.read_csv(inputs.metadata)

    @classmethod
    def harmonize_raw(cls, raw, *, source="metadata"):
        import pandas as pd
        return pd.DataFrame({
            "patient_id": raw["Patient"].map(lambda v: v.split("_")[0]),
            "study_id": raw["Patient"], "image_path": raw["Path"],
            "view_position": raw["View"].map(lambda v: {"PA": "PA", "AP": "AP"}.get(v)),
            "report": None,
            "effusion": raw["Finding"].map(lambda v: 1.0 if "Effusion" in v.split("|") else 0.0)})


class _NaiveJsonlGz(BaseHarmonizer):
    spec = DatasetSpec(key="naive_jsonl", title="naive JSONL", metadata_files=("a.jsonl.gz",))

    def read(self, inputs):
        with gzip.open(inputs.metadata, "rt", encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    @classmethod
    def harmonize_raw(cls, raw, *, source="metadata"):
        import pandas as pd
        rows = [{"patient_id": r["id"], "study_id": r["id"], "image_path": f"images/{r['id']}.png",
                 "view_position": r.get("view"), "report": " ".join(r["report"]["sentences"])}
                for r in raw]
        return pd.DataFrame(rows, columns=["patient_id", "study_id", "image_path",
                                           "view_position", "report"])


def _write_naive(root: Path) -> tuple[Path, Path]:
    rows = [f"P{i}_s{i % 3},images/P{i}.png,{'PA' if i % 2 else 'AP'},"
            f"{'Effusion|Mass' if i % 3 == 0 else 'No Finding'}" for i in range(12)]
    csv_path = root / "labels.csv"
    csv_path.write_text("Patient,Path,View,Finding\n" + "\n".join(rows) + "\n")
    lines = [json.dumps({"id": f"x{i}", "view": "PA", "report": {"sentences": ["Clear.", "Ok."]}})
             for i in range(10)]
    gz_path = root / "a.jsonl.gz"
    gz_path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    return csv_path, gz_path


@pytest.mark.parametrize("which", ["csv", "jsonl_gz"])
@settings(max_examples=EXAMPLES * 2, deadline=None, derandomize=DERANDOMIZE,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_csv_and_jsonl_give_table_or_clear_error(which, tmp_path_factory, data):
    root = tmp_path_factory.mktemp("naive")
    csv_path, gz_path = _write_naive(root)
    cls, path = (_NaiveCsv, csv_path) if which == "csv" else (_NaiveJsonlGz, gz_path)
    assert len(cls(csv_path=path).harmonize()) > 0
    path.write_bytes(mutate(path.read_bytes(), data))
    assert_table_or_clear_error(cls, {"csv_path": path}, path)
