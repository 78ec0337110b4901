"""Drafting a config from a table's header and first rows (``radharmony new``).

Columns are guessed by name and by value: ids (``patient``, ``subject``, ``mrn``; ``study``,
``accession``), the image path (cells ending in an image extension), the view (``PA``/``AP``/...),
the report (long text), wide label columns (only ``1/0/-1/blank``-like values), a list column
(``A|B`` cells), box coordinates and an official split column (``Split``, ``fold``, ``set``:
drafted as ``splits.column`` with a ``splits.map`` onto train / valid / test). Where a guess is unsure the draft says ``TODO``; the draft
always loads (:func:`radharmony.custom.load_config`), so it can be tried and refined.

>>> import pandas as pd
>>> t = pd.DataFrame({"PatientID": ["p1", "p2"], "file": ["a.png", "b.png"],
...                   "Effusion": ["1", ""]})
>>> text = draft_config("my_cxr", t, table_path="t.csv")
>>> "path: {column: file}" in text, "Effusion: pleural_effusion" in text
(True, True)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from .config import FORMATS, RESERVED

IMAGE_EXT = (".png", ".jpg", ".jpeg", ".dcm", ".dicom", ".tif", ".tiff", ".bmp")
LABEL_VALUES = {"", "0", "1", "-1", "0.0", "1.0", "-1.0", "yes", "no", "true", "false", "y",
                "n", "positive", "negative", "uncertain"}
VIEWS = {"PA", "AP", "LATERAL", "LAT", "LL", "RL", "L", "AP SUPINE", "AP ERECT", "PA LATERAL"}
VIEW_CANON = {"PA": "PA", "AP": "AP", "LATERAL": "LATERAL", "LAT": "LATERAL", "LL": "LATERAL",
              "RL": "LATERAL", "L": "LATERAL", "AP SUPINE": "AP", "AP ERECT": "AP"}
SYNONYMS = {"effusion": "pleural_effusion", "normal": "no_finding", "nofinding": "no_finding",
            "opacity": "lung_opacity", "ptx": "pneumothorax", "tb": "tuberculosis",
            "devices": "support_devices", "lesion": "lung_lesion", "cardiomediastinum":
            "enlarged_cardiomediastinum"}
#: a split column's name (normalized), and split values -> radharmony's split names
SPLIT_COLUMNS = ("split", "splits", "fold", "set", "subset", "partition", "datasplit")
SPLIT_VALUES = {"train": "train", "training": "train", "trn": "train", "tr": "train",
                "val": "valid", "valid": "valid", "validation": "valid", "validate": "valid",
                "dev": "valid", "tune": "valid", "tuning": "valid", "test": "test",
                "testing": "test", "tst": "test", "holdout": "test", "heldout": "test"}
_BOX_NAMES = {"xyxy": (("x_min", "y_min", "x_max", "y_max"), ("xmin", "ymin", "xmax", "ymax"),
                       ("x1", "y1", "x2", "y2")),
              "xywh": (("x", "y", "width", "height"), ("x", "y", "w", "h"),
                       ("bbox_x", "bbox_y", "bbox_w", "bbox_h"))}


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def _q(text) -> str:
    """A YAML scalar (JSON strings are YAML); bare when plainly safe."""
    text = str(text)
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_ .-]*", text) and text.strip() == text and \
            text.lower() not in ("yes", "no", "true", "false", "null", "on", "off", "y", "n"):
        return text
    return json.dumps(text)


def _values(table: pd.DataFrame, col) -> pd.Series:
    s = table[col].map(lambda v: "" if v is None or isinstance(v, float) and v != v else
                       (v if isinstance(v, str) else json.dumps(v) if isinstance(v, list)
                        else str(v)).strip())
    return s


def _finding(label: str) -> str | None:
    from ..vocabulary import FINDINGS, findings

    key = _norm(label)
    by = {_norm(f): f for f in FINDINGS}
    by.update({_norm(n): i for i, n in zip(findings()["id"], findings()["name"])})
    return by.get(key) or SYNONYMS.get(key)


def guess(table: pd.DataFrame) -> dict:
    """Column roles guessed from names and values: ``patient``, ``study``, ``path``, ``view``,
    ``report``, ``labels`` (wide), ``list`` ({column, separator, terms, none}), ``boxes``
    ({format, columns}), ``reader``, ``row``, ``split`` (a column named like
    :data:`SPLIT_COLUMNS`, any case, with at most 20 values)."""
    cols = [str(c) for c in table.columns]
    vals = {c: _values(table, c) for c in cols}
    names = {c: _norm(c) for c in cols}
    out: dict = {"patient": None, "study": None, "path": None, "view": None, "report": None,
                 "labels": [], "list": None, "boxes": None, "reader": None, "row": "image",
                 "split": None}

    def first(pred, exclude=()):
        return next((c for c in cols if c not in exclude and pred(c)), None)

    out["path"] = first(lambda c: (vals[c] != "").any() and vals[c][vals[c] != ""].str.lower()
                        .str.endswith(IMAGE_EXT).mean() > 0.8) or \
        first(lambda c: any(k in names[c] for k in ("path", "file", "image")))
    used = {out["path"]}
    out["patient"] = first(lambda c: any(k in names[c] for k in ("patient", "subject", "mrn"))
                           or names[c] in ("pid", "patid"), used)
    used.add(out["patient"])
    out["study"] = first(lambda c: any(k in names[c] for k in ("study", "accession", "exam")),
                         used)
    used.add(out["study"])
    out["split"] = first(lambda c: names[c] in SPLIT_COLUMNS and
                         0 < vals[c][vals[c] != ""].nunique() <= 20, used)
    used.add(out["split"])
    out["view"] = first(lambda c: "view" in names[c] or "projection" in names[c], used) or \
        first(lambda c: (vals[c] != "").any() and
              vals[c][vals[c] != ""].str.upper().isin(VIEWS).all(), used)
    used.add(out["view"])
    out["report"] = first(lambda c: any(k in names[c] for k in ("report", "impression",
                                                                 "findings", "text"))
                          and vals[c].str.len().mean() > 20, used)
    used.add(out["report"])
    out["reader"] = first(lambda c: any(k in names[c] for k in ("reader", "annotator", "radid",
                                                                 "radiologist")), used)
    used.add(out["reader"])
    lower = {names[c]: c for c in cols}
    for fmt, options in _BOX_NAMES.items():
        for option in options:
            if all(_norm(o) in lower for o in option):
                out["boxes"] = {"format": fmt, "columns": [lower[_norm(o)] for o in option]}
                break
        if out["boxes"]:
            break
    used |= set(out["boxes"]["columns"] if out["boxes"] else ())
    for c in cols:
        if c in used:
            continue
        v = vals[c].str.lower()
        if (v != "").any() and v.isin(LABEL_VALUES).all():
            out["labels"].append(c)
        elif out["list"] is None and v.str.contains("|", regex=False).mean() > 0.05:
            terms = sorted({t.strip() for cell in vals[c] for t in cell.split("|")
                            if t.strip()})
            if len(terms) <= 60:
                none = [t for t in terms if _norm(t) in ("nofinding", "normal", "none")]
                out["list"] = {"column": c, "separator": "|",
                               "terms": [t for t in terms if t not in none], "none": none}
    if out["path"] is not None and vals[out["path"]].duplicated().any():
        out["row"] = "reader" if out["reader"] else "box"
    return out


def draft_config(key: str, table: pd.DataFrame, *, table_path: str, fmt: str | None = None
                 ) -> str:
    """The text of a YAML config for ``table`` (a sample of the export), with TODO comments
    where a guess is unsure."""
    g = guess(table)
    cols = [str(c) for c in table.columns]
    todo = "  # TODO: check"
    lines = [f"# Draft config for {table_path}: check every TODO, then try",
             f"#   radharmony info {key} --config THIS_FILE --root IMAGE_FOLDER",
             "# Every field is described in docs/custom_datasets.md.",
             f"key: {key}",
             f"title: {_q(key.replace('_', ' '))}  # TODO: a human-readable name",
             "access: \"\"  # TODO: where the data comes from, who may use it",
             "licence: \"\"",
             "", "table:", f"  path: {_q(table_path)}"]
    if fmt and fmt in FORMATS:
        lines.append(f"  format: {fmt}")
    lines.append(f"  row: {g['row']}" + ("" if g["row"] == "image" else
                                         "  # TODO: rows repeat an image: box or reader?"))
    lines += ["", "ids:"]
    patient = g["patient"] or cols[0]
    lines.append(f"  patient: {{column: {_q(patient)}}}" + ("" if g["patient"] else
                                                           "  # TODO: the patient id column"))
    if g["study"]:
        lines.append(f"  study: {{column: {_q(g['study'])}}}")
    else:
        lines.append("  # study: {column: StudyID}  # TODO: no study column found; "
                     "each patient counts as one study")
    path = g["path"] or cols[min(1, len(cols) - 1)]
    lines += ["", "image:", f"  path: {{column: {_q(path)}}}" +
              ("" if g["path"] else "  # TODO: the image file, relative to the image folder "
               "(or a template: \"{PatientID}/{File}.png\")")]
    if g["view"]:
        raw = sorted(set(_values(table, g["view"])) - {""})
        vmap = ", ".join(f"{_q(v)}: {VIEW_CANON.get(v.upper(), 'PA')}" for v in raw[:12])
        lines += ["", "view:", f"  column: {_q(g['view'])}", f"  map: {{{vmap}}}" +
                  ("" if all(v.upper() in VIEW_CANON for v in raw) else todo)]
    if g["report"]:
        lines += ["", f"report: {{column: {_q(g['report'])}}}"]
    labels: list[str] = []
    if g["labels"]:
        labels = [c for c in g["labels"] if c not in RESERVED]
        seen = {v for c in labels for v in _values(table, c).str.lower()}
        enc = {"1": 1, "1.0": 1, "0": 0, "0.0": 0, "-1": -1, "-1.0": -1, "": "null"}
        for word, value in (("yes", 1), ("y", 1), ("true", 1), ("positive", 1), ("no", 0),
                            ("n", 0), ("false", 0), ("negative", 0), ("uncertain", -1)):
            for cell in {v for c in labels for v in _values(table, c)}:
                if cell.lower() == word:
                    enc[cell] = value
        lines += ["", "labels:", "  columns: [" + ", ".join(map(_q, labels)) + "]",
                  "  encoding: {" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in enc.items())
                  + "}" + (todo if seen - {"", "0", "1", "-1", "0.0", "1.0", "-1.0"} else "")]
        if g["row"] != "image":
            lines.append("  aggregate: any  # an image is positive when any row says so")
    elif g["list"]:
        lst = g["list"]
        labels = lst["terms"]
        lines += ["", "labels:", "  list:", f"    column: {_q(lst['column'])}",
                  f"    separator: {json.dumps(lst['separator'])}",
                  "    labels: [" + ", ".join(map(_q, labels)) + "]"]
        if lst["none"]:
            lines.append("    none: [" + ", ".join(map(_q, lst["none"])) + "]")
    if labels:
        lines += ["", "# each label -> radharmony.vocabulary.FINDINGS id (exact), "
                  "[id, narrower|broader|approximate], or null (no canonical finding)",
                  "label_map:"]
        for label in labels:
            f = _finding(label)
            lines.append(f"  {_q(label)}: {f if f else 'null'}" +
                         ("" if f else "  # TODO: a finding id, or leave null"))
    if g["boxes"]:
        b = g["boxes"]
        lines += ["", "boxes:", f"  format: {b['format']}",
                  "  units: pixel  # TODO: pixel, normalized ([0, 1]) or percent",
                  "  columns: [" + ", ".join(map(_q, b["columns"])) + "]"]
        if g["reader"]:
            lines.append(f"  annotator: {{column: {_q(g['reader'])}}}")
    lines += ["", "splits:", "  group_by: patient  # no patient is in two folds"]
    if g["split"]:
        raw = sorted(set(_values(table, g["split"])) - {""})
        smap = {v: SPLIT_VALUES.get(_norm(v), v) for v in raw}
        lines += [f"  column: {_q(g['split'])}  # kept as the table's split column",
                  "  map: {" + ", ".join(f"{_q(k)}: {_q(v)}" for k, v in smap.items()) + "}" +
                  ("" if all(_norm(v) in SPLIT_VALUES for v in raw) else
                   "  # TODO: map each value to train, valid or test")]
    lines.append("")
    return "\n".join(lines)


def sample_table(path: str | Path, *, rows: int = 2000) -> tuple[pd.DataFrame, str]:
    """The first ``rows`` rows of a CSV/TSV/JSON/JSONL export and its format."""
    from .reading import read_rows
    from .config import validate_config

    path = Path(path)
    cfg = validate_config({"key": "draft", "title": "draft", "table": {"path": path.name},
                           "ids": {"patient": "x"}, "image": {"path": "x"}})
    fmt = cfg["table"]["format"]
    if fmt in ("csv", "tsv"):
        from ..table.read_csv import read_table

        df = read_table(path, description="the table to draft a config from", dtype=str,
                        keep_default_na=False, sep="\t" if fmt == "tsv" else ",", nrows=rows)
        df.columns = [str(c).strip() for c in df.columns]
        return df, fmt
    return read_rows(path, cfg["table"], description="the table to draft a config from"
                     ).head(rows), fmt
