"""The checks of a config's optional sections: report, labels, label map, boxes and mask.

Each function takes the :class:`~radharmony.custom.checker.Checker` of the file and the
section's parsed value, and returns the section normalized with its defaults filled (None
when the section is absent).
"""

from __future__ import annotations

import difflib

from .checker import Checker

BOX_FORMATS = ("xyxy", "xywh", "cxcywh")
BOX_UNITS = ("pixel", "normalized", "percent")
AGGREGATES = ("any", "all", "first")
RELATIONS = ("exact", "narrower", "broader", "approximate")
#: cell text -> label value used when ``labels.encoding`` is not given
DEFAULT_ENCODING = {"1": 1.0, "1.0": 1.0, "0": 0.0, "0.0": 0.0, "-1": -1.0, "-1.0": -1.0,
                    "": None}
#: columns the harmonized table gives itself; config names may not take them
RESERVED = ("patient_id", "study_id", "image_path", "view_position", "report", "sample_id",
            "view", "boxes", "image_id", "mask_rle", "mask_height", "mask_width", "mask_files",
            "split")


def report_section(c: Checker, value) -> dict | None:
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


def labels_section(c: Checker, value, row: str) -> dict | None:
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


def label_map_section(c: Checker, value, labels: dict | None) -> dict:
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


def boxes_section(c: Checker, value) -> list[dict] | None:
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


def mask_section(c: Checker, value) -> dict | None:
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
