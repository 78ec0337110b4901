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

import json
import os
import re
from pathlib import Path
from typing import Any

from ..errors import shorten
from .checker import Checker, ConfigError
from .sections import (RESERVED, boxes_section, label_map_section, labels_section,
                       mask_section, report_section)

#: row units: what one row of the table describes
ROW_UNITS = ("image", "study", "box", "reader")
FORMATS = ("csv", "tsv", "json", "jsonl")
GROUPS = {"patient": "patient_id", "study": "study_id", "image": "image_path"}
KEY_RE = re.compile(r"[a-z][a-z0-9_]{1,63}\Z")


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


# -- the whole config ----------------------------------------------------------------------------
TOP = {"key": True, "title": True, "description": False, "access": False, "licence": False,
       "license": False, "expected": False, "table": True, "ids": True, "image": True,
       "view": False, "report": False, "labels": False, "label_map": False, "boxes": False,
       "mask": False, "extras": False, "splits": False, "family": False}


def validate_config(data: Any, *, where: str = "config") -> dict:
    """Check a parsed config (see the module docs) and return it normalized, defaults filled.

    Raises :class:`ConfigError` naming the first wrong field."""
    c = Checker(where)
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

    out["report"] = report_section(c, data.get("report"))
    out["labels"] = labels_section(c, data.get("labels"), row)
    out["label_map"] = label_map_section(c, data.get("label_map"), out["labels"])
    out["boxes"] = boxes_section(c, data.get("boxes"))
    out["mask"] = mask_section(c, data.get("mask"))

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

    out["family"] = _family(c, data.get("family"), out["extras"])
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


def _family(c: Checker, value, extras: dict) -> dict | None:
    """``family: nih_cxr14`` (same patient ids) or ``family: {name, link, column, pattern,
    note}`` (see :class:`radharmony.spec.Identity`; ``column`` is one of ``extras``)."""
    from ..spec import LINKS

    if value is None:
        return None
    if isinstance(value, str):
        value = {"name": value}
    f = c.mapping(value, "family", {"name": True, "link": False, "column": False,
                                    "pattern": False, "note": False})
    out = {"name": c.text(f["name"], "family.name").strip(),
           "link": c.choice(f.get("link", "same"), "family.link", LINKS), "column": None,
           "pattern": None, "note": c.text(f.get("note", ""), "family.note", empty=True)}
    if out["link"] == "column":
        if f.get("column") is None:
            c.fail("family.column", "is needed with link: column", None, expected="the extras "
                   "column naming each row's family image or patient", fix="add column: NAME")
        out["column"] = c.text(f["column"], "family.column").strip()
        if out["column"] not in extras:
            c.fail("family.column", "is not an extras column", out["column"],
                   expected=f"one of {sorted(extras)}", fix="add it under extras: first")
    if f.get("pattern") is not None:
        out["pattern"] = c.text(f["pattern"], "family.pattern")
        try:
            ok = re.compile(out["pattern"]).groups >= 1
        except re.error:
            ok = False
        if not ok:
            c.fail("family.pattern", "is not a regular expression with a group",
                   out["pattern"], expected="e.g. '^(\\d{8})_' (group 1 = the patient)",
                   fix="wrap the patient part in parentheses")
    return out


def _table(c: Checker, value) -> dict:
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
