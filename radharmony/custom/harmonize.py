"""A validated config + the table's text cells -> the standard harmonized table.

:func:`harmonize_table` is a pure function: it checks that every column the config names
exists (:func:`referenced_columns`), derives the ids and image paths, splits study rows that
list several images, groups rows by image (labels aggregated as ``labels.aggregate`` says)
and adds the report, extras, split, mask and box columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import MetadataError
from ..reports.format import section_text
from ..table.read_csv import lists_by
from ..table.schema import check_relative_path
from .config import ConfigError
from .derive import columns_of, derive
from .encodings import row_boxes, row_labels


def referenced_columns(cfg: dict) -> list[tuple[str, str]]:
    """Every ``(table column, config field)`` the config reads, in config order."""
    out: list[tuple[str, str]] = []
    for name, spec in cfg["ids"].items():
        out += [(c, f"ids.{name}") for c in columns_of(spec)]
    out += [(c, "image.path") for c in columns_of(cfg["image"]["path"])]
    if cfg["view"]:
        out.append((cfg["view"]["column"], "view.column"))
    for i, s in enumerate((cfg["report"] or {}).get("sections", [])):
        out.append((s["column"], f"report.sections[{i}].column"))
    labels = cfg["labels"]
    if labels and labels["layout"] == "wide":
        out += [(c, f"labels.columns[{i}]") for i, c in enumerate(labels["columns"])]
    elif labels:
        out.append((labels["list"]["column"], "labels.list.column"))
    for i, b in enumerate(cfg["boxes"] or []):
        out += [(c, f"boxes[{i}].columns[{j}]") for j, c in enumerate(b["columns"])]
        for part in ("label", "annotator"):
            out += [(c, f"boxes[{i}].{part}") for c in columns_of(b[part])]
        out += [(c, f"boxes[{i}].image_size") for c in (b["image_size"] or {}).values()]
    mask = cfg["mask"]
    if mask and mask["kind"] == "rle":
        out.append((mask["column"], "mask.rle.column"))
        out += [(v, f"mask.rle.size.{k}") for k, v in mask["size"].items() if isinstance(v, str)]
    elif mask:
        for i, p in enumerate(mask["paths"]):
            out += [(c, f"mask.png.path[{i}]") for c in columns_of(p)]
    for name, spec in cfg["extras"].items():
        out += [(c, f"extras.{name}") for c in columns_of(spec)]
    if cfg["splits"]["column"]:
        out.append((cfg["splits"]["column"], "splits.column"))
    return out


_ORDER_ANY = (1.0, -1.0, 0.0)  # "any": positive beats uncertain beats negative
_ORDER_ALL = (0.0, -1.0, 1.0)  # "all": one negative makes it negative


def _aggregate(values: np.ndarray, groups: np.ndarray, n: int, how: str) -> np.ndarray:
    """Per-image labels from per-row labels (rows of image ``groups[i]``)."""
    out = np.full((n, values.shape[1]), np.nan, np.float32)
    if how == "first":
        order = np.argsort(groups, kind="stable")[::-1]  # later rows first, so first wins
        out[groups[order]] = values[order]
        return out
    for v in reversed(_ORDER_ANY if how == "any" else _ORDER_ALL):
        rows, cols = np.nonzero(values == v)
        out[groups[rows], cols] = v  # each pass overrides the weaker ones
    other = ~np.isin(values, (1.0, 0.0, -1.0)) & ~np.isnan(values)
    if other.any():  # other numbers: the row's value, max over rows
        rows, cols = np.nonzero(other)
        for r, c in zip(rows, cols):
            cur = out[groups[r], c]
            out[groups[r], c] = values[r, c] if np.isnan(cur) else max(cur, values[r, c])
    return out


def _need(vals: np.ndarray, field: str, table: pd.DataFrame, spec: dict, *,
          source: str, rows: np.ndarray) -> None:
    bad = np.flatnonzero(np.array([v is None for v in vals], bool))
    if bad.size:
        i = int(bad[0])
        cols = columns_of(spec)
        found = ", ".join(f"{c}={table[c].iat[i]!r}" for c in cols) or "nothing"
        raise MetadataError(f"{source}, row {rows[i]}: {field} gives no value ({bad.size} rows)",
                            expected=f"a non-empty value from {cols or spec}",
                            found=found, fix=f"fill the cells, or correct config field {field}")


def _check_columns(cfg: dict, table: pd.DataFrame, *, source: str) -> None:
    import difflib

    have = [str(c) for c in table.columns]
    for column, field in referenced_columns(cfg):
        if column not in table.columns:
            close = difflib.get_close_matches(column, have, n=1)
            raise ConfigError(f"{source}: config field {field} names column {column!r}, "
                              "which the table does not have", field=field,
                              expected=f"one of the table's columns {have[:30]}",
                              found=repr(column), fix=f"did you mean {close[0]!r}?" if close
                              else f"correct {field} in the config")


def harmonize_table(cfg: dict, table: pd.DataFrame, *, source: str = "metadata"
                    ) -> pd.DataFrame:
    """A pure function: the config + the table's text cells -> the standard table."""
    _check_columns(cfg, table, source=source)
    table = table.reset_index(drop=True)
    row_unit = cfg["table"]["row"]
    src_row = np.arange(len(table))
    sep = cfg["image"]["list_separator"]
    if sep:  # a study row lists its images: one row per image, the study's cells repeated
        table, src_row = _explode(table, columns_of(cfg["image"]["path"]), sep, source=source)
    ids = {}
    for name in ("patient", "study", "image"):
        if name in cfg["ids"]:
            ids[name] = derive(cfg["ids"][name], table)
            _need(ids[name], f"ids.{name}", table, cfg["ids"][name], source=source,
                  rows=src_row)
    paths = derive(cfg["image"]["path"], table)
    _need(paths, "image.path", table, cfg["image"]["path"], source=source, rows=src_row)
    for i, p in enumerate(paths):  # refuse escaping paths before anything is grouped
        paths[i] = check_relative_path(p, where=f"{source}, row {src_row[i]} (image.path)")
    if "study" not in ids:
        ids["study"] = ids["patient"] if row_unit != "study" else None
    if ids["study"] is None:
        raise ConfigError(f"{source}: study rows need a study id", field="ids.study",
                          expected="ids.study: {column: ...}", found="no ids.study",
                          fix="add ids.study to the config")
    index = pd.Index(pd.unique(paths))
    groups = index.get_indexer(paths)
    if row_unit == "image" and len(index) < len(paths):
        dup = pd.Series(paths).duplicated(keep=False).to_numpy()
        rows = src_row[dup][:2].tolist()
        raise MetadataError(f"{source}: image {paths[dup][0]!r} is in rows {rows}",
                            expected="one row per image (table.row: image)",
                            found=f"{int(dup.sum())} rows share {len(set(paths[dup]))} images",
                            fix="set table.row to box or reader when rows repeat an image, or "
                                "correct image.path so each row names its own file")
    first = np.full(len(index), -1, np.int64)
    first[groups[::-1]] = np.arange(len(groups))[::-1]  # first row of each image
    for name in ("patient", "study"):
        per = pd.DataFrame({"g": groups, "v": ids[name]}).groupby("g")["v"].nunique()
        if (per > 1).any():
            g = int(per.index[per.to_numpy() > 1][0])
            vals = sorted(set(ids[name][groups == g]))[:3]
            raise MetadataError(f"{source}: image {index[g]!r} has several {name} ids",
                                expected=f"one {name} id per image", found=repr(vals),
                                fix=f"correct ids.{name} or image.path in the config")
    df = pd.DataFrame({"patient_id": ids["patient"][first], "study_id": ids["study"][first],
                       "image_path": np.asarray(index, dtype=object),
                       "view_position": _text_column(table, cfg["view"]["column"], first)
                       if cfg["view"] else None,
                       "report": _reports(cfg["report"], table, first) if cfg["report"]
                       else None})
    labels = cfg["labels"]
    if labels:
        values = row_labels(labels, table, source=source, rows=src_row)
        agg = _aggregate(values, groups, len(index), labels["aggregate"])
        for j, name in enumerate(labels["names"]):
            df[name] = agg[:, j]
    if "image" in ids:
        df["image_id"] = ids["image"][first]
        dup = df["image_id"].duplicated(keep=False)
        if dup.any():
            raise MetadataError(f"{source}: image id {df['image_id'][dup].iloc[0]!r} names "
                                f"{int(dup.sum())} images", expected="one image per ids.image "
                                "value (it is the sample id)", found=repr(
                                    df["image_path"][dup].tolist()[:3]),
                                fix="correct ids.image, or remove it (the image path is then "
                                    "the sample id)")
    for name, spec in cfg["extras"].items():
        df[name] = derive(spec, table)[first]
    if cfg["splits"]["column"]:
        raw = _text_column(table, cfg["splits"]["column"], first)
        smap = cfg["splits"]["map"]
        df["split"] = [smap.get(v, v) if v is not None else None for v in raw]
    mask = cfg["mask"]
    if mask and mask["kind"] == "rle":
        codes = _text_column(table, mask["column"], np.arange(len(table)))
        keep = np.array([c is not None and c not in mask["empty"] for c in codes], bool)
        df["mask_rle"] = lists_by(index, paths[keep], codes[keep])
        for k in ("height", "width"):
            v = mask["size"][k]
            col = np.full(len(index), v, np.int64) if isinstance(v, int) else \
                pd.to_numeric(pd.Series(table[v].to_numpy(object)[first]), errors="coerce")
            if isinstance(col, pd.Series):
                if col.isna().any() or (col <= 0).any():
                    i = int(np.flatnonzero((col.isna() | (col <= 0)).to_numpy())[0])
                    raise MetadataError(f"{source}, row {src_row[first[i]]}: mask size column "
                                        f"{v!r} is not a positive number", expected="the mask's "
                                        f"{k} in pixels", found=repr(table[v].iat[first[i]]),
                                        fix=f"correct mask.rle.size.{k}")
                col = col.to_numpy().astype(np.int64)
            df[f"mask_{k}"] = col
    elif mask:
        files = [derive(p, table) for p in mask["paths"]]
        cells = []
        for i, r in enumerate(first):
            got = [f[r] for f in files]
            if any(g is None for g in got):
                cells.append([])
                continue
            cells.append([check_relative_path(g, where=f"{source}, row {src_row[r]} "
                                              "(mask.png.path)") for g in got])
        df["mask_files"] = cells
    if cfg["boxes"]:
        df["boxes"] = row_boxes(cfg["boxes"], table, index, paths, source=source, rows=src_row)
    return df


def _explode(table: pd.DataFrame, columns: list[str], sep: str, *, source: str):
    """One row per listed image: the cells of ``columns`` split on ``sep`` (equal counts per
    row); returns the new table and each new row's source row."""
    parts = {c: [[p.strip() for p in str(v).split(sep) if p.strip()]
                 for v in table[c].to_numpy(object)] for c in columns}
    counts = np.array([max(1, max((len(parts[c][i]) for c in columns), default=1))
                       for i in range(len(table))], np.int64)
    for c in columns:
        for i, ps in enumerate(parts[c]):
            if not ps:
                ps.append("")  # an empty cell stays empty: image.path then names the row
            if len(ps) == 1 and counts[i] > 1:
                ps *= int(counts[i])  # a single value (a folder) applies to every image
            elif len(ps) != counts[i]:
                raise MetadataError(f"{source}, row {i}: column {c!r} lists {len(ps)} values "
                                    f"where another image.path column lists {counts[i]}",
                                    expected="the same number of images in every listed column",
                                    found=repr(table[c].iat[i]), fix="correct the row")
    src = np.repeat(np.arange(len(table)), counts)
    out = table.iloc[src].reset_index(drop=True)
    for c in columns:
        out[c] = pd.Series([p for ps in parts[c] for p in ps], dtype=object)
    return out, src


def _text_column(table: pd.DataFrame, column: str, rows: np.ndarray) -> np.ndarray:
    return derive({"column": column}, table)[rows]


def _reports(report: dict, table: pd.DataFrame, rows: np.ndarray) -> list:
    parts = [(s["title"], table[s["column"]].to_numpy(object)[rows]) for s in report["sections"]]
    out = []
    for i in range(len(rows)):
        texts = []
        for title, col in parts:
            t = section_text(col[i] if col[i] != "" else None)
            if t is not None:
                texts.append(f"{title}:\n{t}" if title else t)
        out.append("\n\n".join(texts) if texts else None)
    return out
