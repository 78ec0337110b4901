"""A dataset described in a YAML or JSON file: reading and validating the description.

:func:`read_config` parses the file (YAML needs PyYAML, ``pip install radharmony[config]``;
JSON needs nothing) and :func:`validate_config` checks every field before any table is read:
an unknown field, a wrong type or a value outside its choices raises :class:`ConfigError`
naming the field (``boxes[0].units``), the value found and the fix (with "did you mean" for
misspelt names). The result is the same description with every default filled in, plain JSON
data, which :mod:`radharmony.custom.build` turns into a harmonizer and a dataset class.

>>> cfg = validate_config({"key": "demo_cxr", "title": "Demo", "table": {"path": "t.csv"},
...                        "ids": {"patient": "PatientID"}, "image": {"path": "File"}})
>>> cfg["table"]["row"], cfg["ids"]["patient"], cfg["labels"]
('image', {'column': 'PatientID'}, None)
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from ..errors import RadHarmonyError, shorten

#: row units: what one row of the table describes
ROW_UNITS = ("image", "study", "box", "reader")
FORMATS = ("csv", "tsv", "json", "jsonl")
BOX_FORMATS = ("xyxy", "xywh", "cxcywh")
BOX_UNITS = ("pixel", "normalized", "percent")
AGGREGATES = ("any", "all", "first")
GROUPS = {"patient": "patient_id", "study": "study_id", "image": "image_path"}
RELATIONS = ("exact", "narrower", "broader", "approximate")
#: cell text -> label value used when ``labels.encoding`` is not given
DEFAULT_ENCODING = {"1": 1.0, "1.0": 1.0, "0": 0.0, "0.0": 0.0, "-1": -1.0, "-1.0": -1.0,
                    "": None}
KEY_RE = re.compile(r"[a-z][a-z0-9_]{1,63}\Z")
#: the longest regular expression a config may hold (no backtracking monsters)
MAX_PATTERN = 200
#: columns the harmonized table gives itself; config names may not take them
RESERVED = ("patient_id", "study_id", "image_path", "view_position", "report", "sample_id",
            "view", "boxes", "image_id", "mask_rle", "mask_height", "mask_width", "mask_files",
            "split")


class ConfigError(RadHarmonyError, ValueError):
    """A dataset config file is wrong: names the field, the value found and the fix."""

    def __init__(self, what: str, *, field: str = "", expected: str | None = None,
                 found: str | None = None, fix: str | None = None):
        self.field = field
        super().__init__(what, expected=expected, found=found, fix=fix)


def read_config(path: str | os.PathLike) -> dict:
    """The parsed content of a ``.yaml``/``.yml`` or ``.json`` config file (not validated)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Config file {path} does not exist", expected="a .yaml, .yml or "
                          ".json dataset config", found="no such file",
                          fix="check the path, or draft one with `radharmony new KEY --from "
                              "TABLE`")
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError(f"{path}: reading YAML needs PyYAML", expected="PyYAML installed",
                              found="no module named 'yaml'",
                              fix="pip install radharmony[config], or write the config as "
                                  "JSON") from None
        try:
            data = yaml.safe_load(text)  # data only: no Python tags are constructed
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path} is not valid YAML", expected="a YAML mapping",
                              found=shorten(exc, 200), fix="correct the line named") from None
    elif path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{path} is not valid JSON", expected="a JSON object",
                              found=shorten(exc, 200), fix="correct the position named") from None
    else:
        raise ConfigError(f"{path}: unknown config file type", expected="a .yaml, .yml or "
                          ".json file", found=repr(path.suffix), fix="rename the file")
    return data


# -- small checkers ------------------------------------------------------------------------------
class _Checker:
    """Checks one config; every error names ``where`` (the file) and the field path."""

    def __init__(self, where: str):
        self.where = where

    def fail(self, field: str, problem: str, value: Any, *, expected: str, fix: str):
        raise ConfigError(f"{self.where}: field {field!r} {problem}", field=field,
                          expected=expected, found=shorten(repr(value), 120), fix=fix)

    def mapping(self, value, field: str, allowed: dict[str, bool]) -> dict:
        """``value`` as a dict with only ``allowed`` keys (name -> required)."""
        if not isinstance(value, dict):
            self.fail(field, "is not a mapping", value, expected=f"a mapping with keys "
                      f"{sorted(allowed)}", fix=f"write {field}: {{...}}")
        for k in value:
            if k not in allowed:
                close = difflib.get_close_matches(str(k), list(allowed), n=1)
                self.fail(f"{field}.{k}" if field else str(k), "is not a known field", k,
                          expected=f"one of {sorted(allowed)}",
                          fix=f"did you mean {close[0]!r}?" if close else "remove it")
        for k, required in allowed.items():
            if required and value.get(k) is None:
                self.fail(f"{field}.{k}" if field else k, "is required", None,
                          expected="a value", fix=f"add {k}: ...")
        return value

    def text(self, value, field: str, *, empty: bool = False) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or \
                isinstance(value, float) and not math.isfinite(value):
            self.fail(field, "is not text", value, expected="a string",
                      fix="quote the value")
        value = str(value)
        if not empty and not value.strip():
            self.fail(field, "is empty", value, expected="non-empty text", fix="fill it in")
        return value

    def texts(self, value, field: str, *, empty: bool = False) -> list[str]:
        """One string or a list of strings -> list."""
        if isinstance(value, (list, tuple)):
            return [self.text(v, f"{field}[{i}]", empty=empty) for i, v in enumerate(value)]
        return [self.text(value, field, empty=empty)]

    def choice(self, value, field: str, choices) -> str:
        if value not in choices:
            close = difflib.get_close_matches(str(value), list(choices), n=1)
            self.fail(field, "has an unknown value", value, expected=f"one of {list(choices)}",
                      fix=f"did you mean {close[0]!r}?" if close else
                      f"write {field}: {list(choices)[0]}")
        return value

    def boolean(self, value, field: str) -> bool:
        if not isinstance(value, bool):
            self.fail(field, "is not true/false", value, expected="true or false",
                      fix=f"write {field}: true")
        return value

    def integer(self, value, field: str, *, low: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            self.fail(field, "is not a whole number", value, expected=f"an integer >= {low}",
                      fix=f"write {field}: {max(low, 1)}")
        return value

    def number(self, value, field: str) -> float | None:
        """A label value: a finite number, or null for "not labelled"."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value):
            self.fail(field, "is not a label value", value, expected="1, 0, -1 (uncertain), "
                      "another finite number, or null (not labelled)", fix="write 1, 0, -1 or "
                      "null")
        return float(value)

    # -- derivations: how a value (an id, a path) is made from a row ---------------------------
    def value(self, spec, field: str, *, constant: bool = False) -> dict:
        """A value spec: a column name, or ``{column|template|regex|constant, strip_prefix,
        strip_suffix, replace_extension}``; returns the normalized dict."""
        if isinstance(spec, (str, int)) and not isinstance(spec, bool):
            return {"column": self.text(spec, field).strip()}
        keys = {"column": False, "template": False, "regex": False, "strip_prefix": False,
                "strip_suffix": False, "replace_extension": False}
        if constant:
            keys["constant"] = False
        spec = self.mapping(spec, field, keys)
        sources = [k for k in ("column", "template", "regex", "constant") if k in spec]
        if len(sources) != 1:
            self.fail(field, "needs exactly one source", sorted(spec), expected="one of "
                      "column, template, regex" + (", constant" if constant else ""),
                      fix=f"write {field}: {{column: NAME}} or {{template: \"{{A}}/{{B}}.png\"}}")
        out: dict = {}
        kind = sources[0]
        if kind == "column":
            out["column"] = self.text(spec["column"], f"{field}.column").strip()
        elif kind == "constant":
            out["constant"] = self.text(spec["constant"], f"{field}.constant")
        elif kind == "template":
            from .derive import template_fields

            t = self.text(spec["template"], f"{field}.template")
            try:
                fields = template_fields(t)
            except ValueError as exc:
                self.fail(f"{field}.template", "is not a valid template", t,
                          expected="text with {COLUMN} placeholders ('{{' for a brace)",
                          fix=str(exc))
            if not fields:
                self.fail(f"{field}.template", "names no column", t, expected="at least one "
                          "{COLUMN} placeholder", fix="write {constant: ...} for a fixed value"
                          if constant else "add a {COLUMN} placeholder")
            out["template"] = t
        else:
            r = self.mapping(spec["regex"], f"{field}.regex",
                             {"column": True, "pattern": True, "group": False})
            pattern = self.text(r["pattern"], f"{field}.regex.pattern")
            if len(pattern) > MAX_PATTERN:
                self.fail(f"{field}.regex.pattern", "is too long", pattern,
                          expected=f"at most {MAX_PATTERN} characters",
                          fix="capture with a shorter pattern")
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                self.fail(f"{field}.regex.pattern", "is not a regular expression", pattern,
                          expected="a Python regular expression with a capture group",
                          fix=f"correct it ({exc})")
            if compiled.groups < 1:
                self.fail(f"{field}.regex.pattern", "has no capture group", pattern,
                          expected="a pattern with ( ... ) around the part to keep",
                          fix="wrap the wanted part in parentheses")
            group = r.get("group", 1)
            if isinstance(group, str):
                if group not in compiled.groupindex:
                    self.fail(f"{field}.regex.group", "names no group of the pattern", group,
                              expected=f"one of {sorted(compiled.groupindex)} or a number",
                              fix="name a group of the pattern")
            else:
                self.integer(group, f"{field}.regex.group", low=0)
                if group > compiled.groups:
                    self.fail(f"{field}.regex.group", "is past the pattern's groups", group,
                              expected=f"0 to {compiled.groups}", fix="write group: 1")
            out["regex"] = {"column": self.text(r["column"], f"{field}.regex.column").strip(),
                            "pattern": pattern, "group": group}
        for op in ("strip_prefix", "strip_suffix"):
            if op in spec:
                out[op] = self.texts(spec[op], f"{field}.{op}")
        if "replace_extension" in spec:
            m = spec["replace_extension"]
            if not isinstance(m, dict) or not m:
                self.fail(f"{field}.replace_extension", "is not a mapping", m,
                          expected="old -> new extension, e.g. {.jpg: .png}",
                          fix="write replace_extension: {'.jpg': '.png'}")
            out["replace_extension"] = {}
            for k, v in m.items():
                k = self.text(k, f"{field}.replace_extension")
                v = self.text(v, f"{field}.replace_extension.{k}", empty=True)
                for ext, f in ((k, k), (v, f"{k}: {v}")):
                    if ext and (not ext.startswith(".") or "/" in ext or "\\" in ext):
                        self.fail(f"{field}.replace_extension", "holds a bad extension", f,
                                  expected="extensions like '.jpg' (no folders)",
                                  fix="write {'.jpg': '.png'}")
                out["replace_extension"][k] = v
        return out


# -- the whole config ----------------------------------------------------------------------------
TOP = {"key": True, "title": True, "description": False, "access": False, "licence": False,
       "license": False, "expected": False, "table": True, "ids": True, "image": True,
       "view": False, "report": False, "labels": False, "label_map": False, "boxes": False,
       "mask": False, "extras": False, "splits": False}


def validate_config(data: Any, *, where: str = "config") -> dict:
    """Check a parsed config (see the module docs) and return it normalized, defaults filled.

    Raises :class:`ConfigError` naming the first wrong field."""
    c = _Checker(where)
    data = c.mapping(data, "", TOP)
    if "licence" in data and "license" in data:
        c.fail("license", "repeats 'licence'", data["license"], expected="one of them",
               fix="keep one")
    key = c.text(data["key"], "key")
    if not KEY_RE.match(key):
        c.fail("key", "is not a valid key", key, expected="2-64 characters: a lower-case "
               "letter, then lower-case letters, digits or '_'",
               fix=f"write key: {re.sub(r'[^a-z0-9_]', '_', key.lower()).strip('_') or 'my_cxr'}")
    out: dict = {"key": key, "title": c.text(data["title"], "title"),
                 "description": c.text(data.get("description", ""), "description", empty=True),
                 "access": c.text(data.get("access", ""), "access", empty=True),
                 "licence": c.text(data.get("licence", data.get("license", "")), "licence",
                                   empty=True)}
    expected = data.get("expected") or {}
    if not isinstance(expected, dict):
        c.fail("expected", "is not a mapping", expected, expected="counts such as {images: "
               "1200, patients: 400}", fix="write expected: {images: N}")
    out["expected"] = {str(k): c.integer(v, f"expected.{k}") for k, v in expected.items()}
    out["table"] = _table(c, data["table"])
    row = out["table"]["row"]

    ids = c.mapping(data["ids"], "ids", {"patient": True, "study": False, "image": False})
    out["ids"] = {name: c.value(ids[name], f"ids.{name}") for name in ids if ids[name] is not None}

    image = c.mapping(data["image"], "image", {"path": True, "list_separator": False})
    out["image"] = {"path": c.value(image["path"], "image.path"), "list_separator": None}
    if image.get("list_separator") is not None:
        if row != "study":
            c.fail("image.list_separator", "only applies to study rows", image["list_separator"],
                   expected="table.row: study (one row lists a study's images)",
                   fix="remove list_separator, or set table.row: study")
        out["image"]["list_separator"] = c.text(image["list_separator"], "image.list_separator",
                                                empty=True) or None

    out["view"] = None
    if data.get("view") is not None:
        v = c.mapping(data["view"], "view", {"column": True, "map": False})
        vmap = v.get("map") or {}
        if not isinstance(vmap, dict):
            c.fail("view.map", "is not a mapping", vmap, expected="raw view -> canonical view, "
                   "e.g. {PA: PA, AP: AP, LAT: LATERAL}", fix="write map: {PA: PA}")
        out["view"] = {"column": c.text(v["column"], "view.column").strip(),
                       "map": {c.text(k, "view.map").strip().upper():
                               c.text(val, f"view.map.{k}").strip() for k, val in vmap.items()}}

    out["report"] = _report(c, data.get("report"))
    out["labels"] = _labels(c, data.get("labels"), row)
    out["label_map"] = _label_map(c, data.get("label_map"), out["labels"])
    out["boxes"] = _boxes(c, data.get("boxes"))
    out["mask"] = _mask(c, data.get("mask"))

    extras = data.get("extras") or {}
    if not isinstance(extras, dict):
        c.fail("extras", "is not a mapping", extras, expected="output column -> source column "
               "or value spec, e.g. {age: PatientAge}", fix="write extras: {age: PatientAge}")
    out["extras"] = {}
    label_names = list(out["labels"]["names"]) if out["labels"] else []
    for name, spec in extras.items():
        name = c.text(name, "extras").strip()
        if name in RESERVED or name in label_names:
            c.fail(f"extras.{name}", "takes a name the table already uses", name,
                   expected=f"a name other than {list(RESERVED)} and the label names",
                   fix=f"rename it, e.g. {name}_raw")
        out["extras"][name] = c.value(spec, f"extras.{name}", constant=True)

    splits = c.mapping(data.get("splits") or {}, "splits", {"group_by": False, "column": False,
                                                             "map": False})
    out["splits"] = {"group_by": c.choice(splits.get("group_by", "patient"), "splits.group_by",
                                          tuple(GROUPS)), "column": None, "map": {}}
    if splits.get("column") is not None:
        out["splits"]["column"] = c.text(splits["column"], "splits.column").strip()
        smap = splits.get("map") or {}
        if not isinstance(smap, dict):
            c.fail("splits.map", "is not a mapping", smap, expected="raw value -> split name, "
                   "e.g. {valid: val}", fix="write map: {valid: val}")
        out["splits"]["map"] = {c.text(k, "splits.map"): c.text(v, f"splits.map.{k}")
                                for k, v in smap.items()}
    elif splits.get("map"):
        c.fail("splits.map", "needs splits.column", splits["map"], expected="the column "
               "holding each row's split", fix="add splits.column: NAME")
    return out


def _table(c: _Checker, value) -> dict:
    t = c.mapping(value, "table", {"path": True, "format": False, "delimiter": False,
                                   "encoding": False, "records": False, "keyed_by": False,
                                   "row": False})
    path = c.text(t["path"], "table.path").strip()
    suffixes = [s.lower() for s in Path(path).suffixes if s.lower() not in (".gz", ".zip",
                                                                            ".bz2", ".xz")]
    guess = {".csv": "csv", ".tsv": "tsv", ".txt": "csv", ".json": "json",
             ".jsonl": "jsonl", ".ndjson": "jsonl"}.get(suffixes[-1] if suffixes else "")
    fmt = t.get("format", guess)
    if fmt is None:
        c.fail("table.format", "is needed: the file name does not tell", path,
               expected=f"one of {list(FORMATS)}", fix="write format: csv")
    fmt = c.choice(fmt, "table.format", FORMATS)
    out = {"path": path, "format": fmt, "delimiter": "\t" if fmt == "tsv" else ",",
           "encoding": c.text(t.get("encoding", "utf-8"), "table.encoding"),
           "records": None, "keyed_by": None,
           "row": c.choice(t.get("row", "image"), "table.row", ROW_UNITS)}
    if t.get("delimiter") is not None:
        if fmt not in ("csv", "tsv"):
            c.fail("table.delimiter", "only applies to csv and tsv tables", t["delimiter"],
                   expected="no delimiter for JSON", fix="remove it")
        d = c.text(t["delimiter"], "table.delimiter", empty=True)
        if len(d) != 1:
            c.fail("table.delimiter", "is not one character", d, expected="e.g. ',' ';' or a "
                   "tab", fix="write delimiter: ';'")
        out["delimiter"] = d
    for k in ("records", "keyed_by"):
        if t.get(k) is not None:
            if fmt != "json":
                c.fail(f"table.{k}", "only applies to json tables", t[k], expected="format: "
                       "json", fix=f"remove {k}")
            out[k] = c.text(t[k], f"table.{k}").strip()
    return out


def _report(c: _Checker, value) -> dict | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = {"column": value}
    r = c.mapping(value, "report", {"column": False, "sections": False})
    if ("column" in r) == ("sections" in r):
        c.fail("report", "needs column or sections (one of them)", sorted(r),
               expected="{column: Report} or {sections: [{column: Findings, title: FINDINGS}]}",
               fix="write report: {column: NAME}")
    if "column" in r:
        return {"sections": [{"column": c.text(r["column"], "report.column").strip(),
                              "title": None}]}
    secs = r["sections"]
    if not isinstance(secs, list) or not secs:
        c.fail("report.sections", "is not a non-empty list", secs, expected="a list of "
               "{column, title}", fix="write sections: [{column: Findings, title: FINDINGS}]")
    out = []
    for i, s in enumerate(secs):
        f = f"report.sections[{i}]"
        if isinstance(s, str):
            s = {"column": s}
        s = c.mapping(s, f, {"column": True, "title": False})
        out.append({"column": c.text(s["column"], f"{f}.column").strip(),
                    "title": None if s.get("title") is None else c.text(s["title"],
                                                                        f"{f}.title")})
    return {"sections": out}


def _labels(c: _Checker, value, row: str) -> dict | None:
    if value is None:
        return None
    lab = c.mapping(value, "labels", {"columns": False, "encoding": False, "rename": False,
                                      "list": False, "aggregate": False})
    if ("columns" in lab) == ("list" in lab):
        c.fail("labels", "needs columns or list (one of them)", sorted(lab),
               expected="columns: [A, B] (one column per label) or list: {column, separator, "
               "labels} (one cell listing the findings)", fix="write labels: {columns: [A, B]}")
    out: dict = {"layout": "wide" if "columns" in lab else "list",
                 "aggregate": c.choice(lab.get("aggregate", "any"), "labels.aggregate",
                                       AGGREGATES)}
    if out["layout"] == "wide":
        if not isinstance(lab["columns"], list) or not lab["columns"]:
            c.fail("labels.columns", "is not a non-empty list", lab["columns"],
                   expected="the label columns' names", fix="write columns: [Pneumonia, Edema]")
        out["columns"] = [c.text(v, f"labels.columns[{i}]").strip()
                          for i, v in enumerate(lab["columns"])]
        enc = lab.get("encoding")
        if enc is None:
            out["encoding"] = dict(DEFAULT_ENCODING)
        else:
            if not isinstance(enc, dict) or not enc:
                c.fail("labels.encoding", "is not a mapping", enc, expected="cell text -> "
                       "1, 0, -1 or null, e.g. {'1': 1, '0': 0, '': null}",
                       fix="write encoding: {'1': 1, '0': 0, '-1': -1, '': null}")
            out["encoding"] = {}
            for k, v in enc.items():
                text = "" if k is None else (("true" if k else "false") if isinstance(k, bool)
                                             else c.text(k, "labels.encoding", empty=True))
                out["encoding"][text.strip()] = c.number(v, f"labels.encoding.{k}")
        names = out["columns"]
    else:
        lst = c.mapping(lab["list"], "labels.list", {"column": True, "separator": False,
                                                     "labels": True, "none": False,
                                                     "unknown": False})
        if not isinstance(lst["labels"], list) or not lst["labels"]:
            c.fail("labels.list.labels", "is not a non-empty list", lst["labels"],
                   expected="the finding names the cells use", fix="write labels: [Pneumonia]")
        terms = [c.text(v, f"labels.list.labels[{i}]").strip()
                 for i, v in enumerate(lst["labels"])]
        sep = lst.get("separator")
        out["list"] = {"column": c.text(lst["column"], "labels.list.column").strip(),
                       "separator": None if sep is None else
                       c.text(sep, "labels.list.separator", empty=True),
                       "none": [t.strip() for t in c.texts(lst["none"], "labels.list.none",
                                                            empty=True)]
                       if lst.get("none") is not None else [],
                       "unknown": c.choice(lst.get("unknown", "error"), "labels.list.unknown",
                                           ("error", "ignore"))}
        out["list"]["labels"] = terms
        names = terms
    rename = lab.get("rename") or {}
    if not isinstance(rename, dict):
        c.fail("labels.rename", "is not a mapping", rename, expected="source name -> output "
               "name", fix="write rename: {Effusion: pleural_effusion}")
    for k in rename:
        if k not in names:
            close = difflib.get_close_matches(str(k), names, n=1)
            c.fail(f"labels.rename.{k}", "names no label", k, expected=f"one of {names}",
                   fix=f"did you mean {close[0]!r}?" if close else "remove it")
    out["names"] = [c.text(rename.get(n, n), f"labels.rename.{n}").strip() for n in names]
    seen = set()
    for n in out["names"]:
        if n in seen:
            c.fail("labels", "gives two labels the same name", n, expected="unique label names",
                   fix="rename one of them")
        if n in RESERVED:
            c.fail("labels.rename", "gives a label a reserved name", n,
                   expected=f"a name other than {list(RESERVED)}", fix=f"rename {n!r}")
        seen.add(n)
    return out


def _label_map(c: _Checker, value, labels: dict | None) -> dict:
    from ..vocabulary import FINDINGS

    if value is None:
        return {}
    if not isinstance(value, dict):
        c.fail("label_map", "is not a mapping", value, expected="label -> canonical finding(s)",
               fix="write label_map: {Effusion: pleural_effusion}")
    names = list(labels["names"]) if labels else []
    out = {}
    for label, target in value.items():
        f = f"label_map.{label}"
        if label not in names:
            close = difflib.get_close_matches(str(label), names, n=1)
            c.fail(f, "names no label", label, expected=f"one of the labels {names}",
                   fix=f"did you mean {close[0]!r}?" if close else "remove it")
        if target is None:
            out[label] = None
            continue
        if isinstance(target, str):
            pairs = [[target, "exact"]]
        elif isinstance(target, list) and len(target) == 2 and all(isinstance(t, str)
                                                                   for t in target) \
                and target[1] not in FINDINGS:  # [finding, relation]
            pairs = [target]
        elif isinstance(target, list) and target and all(isinstance(p, (list, str))
                                                         for p in target):
            pairs = [[p, "exact"] if isinstance(p, str) else p for p in target]
        else:
            pairs = None
        if pairs is None or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            c.fail(f, "is not a mapping to findings", target, expected="a finding id, "
                   "[finding, relation], a list of those, or null (unmapped)",
                   fix=f"write {label}: [pleural_effusion, exact]")
        for i, (finding, relation) in enumerate(pairs):
            if finding not in FINDINGS:
                close = difflib.get_close_matches(str(finding), FINDINGS, n=2)
                c.fail(f, "names an unknown finding", finding, expected="an id of "
                       "radharmony.vocabulary.FINDINGS", fix=f"did you mean "
                       f"{' or '.join(map(repr, close))}?" if close else
                       "run python -c 'import radharmony.vocabulary as v; print(v.FINDINGS)'")
            c.choice(relation, f, RELATIONS)  # the relation of finding i
        if len({p[0] for p in pairs}) != len(pairs):
            c.fail(f, "names a finding twice", target, expected="one relation per finding",
                   fix="keep one entry per finding")
        out[label] = [list(p) for p in pairs]
    return out


def _boxes(c: _Checker, value) -> list[dict] | None:
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    if not items:
        c.fail("boxes", "is an empty list", value, expected="one box encoding or a list of "
               "them (e.g. one per reader)", fix="remove boxes or describe one")
    out = []
    for i, b in enumerate(items):
        f = "boxes" if not isinstance(value, list) else f"boxes[{i}]"
        b = c.mapping(b, f, {"columns": True, "format": False, "units": False,
                             "image_size": False, "label": False, "annotator": False})
        fmt = c.choice(b.get("format", "xyxy"), f"{f}.format", BOX_FORMATS)
        cols = b["columns"]
        if not isinstance(cols, list) or len(cols) != 4:
            order = {"xyxy": "[x_min, y_min, x_max, y_max]", "xywh": "[x, y, width, height]",
                     "cxcywh": "[x_center, y_center, width, height]"}[fmt]
            c.fail(f"{f}.columns", "is not four column names", cols, expected=f"the columns "
                   f"of {order}, in that order", fix=f"write columns: {order}")
        units = c.choice(b.get("units", "pixel"), f"{f}.units", BOX_UNITS)
        size = None
        if b.get("image_size") is not None:
            if units != "pixel":
                c.fail(f"{f}.image_size", "only applies to pixel boxes", b["image_size"],
                       expected="units: pixel", fix="remove image_size")
            s = c.mapping(b["image_size"], f"{f}.image_size", {"width": True, "height": True})
            size = {k: c.text(s[k], f"{f}.image_size.{k}").strip() for k in ("width", "height")}
        label = b.get("label")
        out.append({"columns": [c.text(v, f"{f}.columns[{j}]").strip()
                                for j, v in enumerate(cols)],
                    "format": fmt, "units": units, "image_size": size,
                    "label": None if label is None else c.value(label, f"{f}.label",
                                                                constant=True),
                    "annotator": None if b.get("annotator") is None else
                    c.value(b["annotator"], f"{f}.annotator", constant=True)})
    pixel = {bool(b["units"] == "pixel" and b["image_size"] is None) for b in out}
    if len(pixel) > 1:
        c.fail("boxes", "mixes pixel boxes without image_size with normalized ones",
               [b["units"] for b in out], expected="every encoding in one space",
               fix="give the pixel encodings image_size: {width: COL, height: COL}")
    return out


def _mask(c: _Checker, value) -> dict | None:
    if value is None:
        return None
    m = c.mapping(value, "mask", {"rle": False, "png": False})
    if ("rle" in m) == ("png" in m):
        c.fail("mask", "needs rle or png (one of them)", sorted(m), expected="rle: {column, "
               "size, ...} or png: {template: ...}", fix="write mask: {png: {template: "
               "'masks/{File}'}}")
    if "png" in m:
        p = m["png"]
        if isinstance(p, (str, list)):
            p = {"path": p}
        p = c.mapping(p, "mask.png", {"path": True, "missing": False})
        paths = p["path"] if isinstance(p["path"], list) else [p["path"]]
        return {"kind": "png", "paths": [c.value(v, f"mask.png.path[{i}]")
                                         for i, v in enumerate(paths)],
                "missing": c.choice(p.get("missing", "error"), "mask.png.missing",
                                    ("error", "empty"))}
    r = c.mapping(m["rle"], "mask.rle", {"column": True, "size": True, "start": False,
                                         "order": False, "relative": False, "empty": False})
    s = c.mapping(r["size"], "mask.rle.size", {"height": True, "width": True})
    size = {}
    for k in ("height", "width"):
        v = s[k]
        if isinstance(v, int) and not isinstance(v, bool):
            size[k] = c.integer(v, f"mask.rle.size.{k}", low=1)
        else:
            size[k] = c.text(v, f"mask.rle.size.{k}").strip()  # a column name
    start = r.get("start", 0)
    if start not in (0, 1) or isinstance(start, bool):
        c.fail("mask.rle.start", "is not 0 or 1", start, expected="0 (first pixel is 0) or 1 "
               "(first pixel is 1)", fix="write start: 1")
    return {"kind": "rle", "column": c.text(r["column"], "mask.rle.column").strip(),
            "size": size, "start": start,
            "order": c.choice(r.get("order", "row"), "mask.rle.order", ("row", "column")),
            "relative": c.boolean(r.get("relative", False), "mask.rle.relative"),
            "empty": [t.strip() for t in c.texts(r["empty"], "mask.rle.empty", empty=True)]
            if r.get("empty") is not None else ["", "-1"]}
