"""A validated config -> a harmonizer class and a dataset class, built from the generic bases.

:class:`ConfigHarmonizer` is a :class:`~radharmony.table.harmonizer.BaseHarmonizer` whose
``inputs``, ``read`` and ``harmonize_raw`` follow its class's ``config``;
:class:`ConfigDataset` is a :class:`~radharmony.data.dataset.BaseRadiologicalDataset` whose
``source_mask`` decodes the config's masks. :func:`build_classes` makes one subclass of each per
config (the spec comes from the config), so everything a built-in dataset has -- the table
cache, validation, splits, image cache, CLI and viewer -- works unchanged.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar

import cv2
import numpy as np
import pandas as pd

from ..annotations.labels import UncertainLabelsMixin
from ..annotations.masks import merge_masks, rle_decode
from ..data.dataset import BaseRadiologicalDataset
from ..errors import ImageReadError, MetadataError, MetadataNotFoundError, shorten
from ..imaging.read import safe_path
from ..reports.format import section_text
from ..spec import DatasetSpec
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.locate import discover
from ..table.read_csv import lists_by, read_table
from ..table.read_json import load_json, read_jsonl
from ..table.schema import check_relative_path
from .config import GROUPS, ConfigError
from .derive import columns_of, derive


# -- the spec --------------------------------------------------------------------------------------
def config_spec(cfg: dict) -> DatasetSpec:
    """The :class:`DatasetSpec` a validated config describes."""
    labels = cfg["labels"]
    names = tuple(labels["names"]) if labels else ()
    extra = list(cfg["extras"])
    if "image" in cfg["ids"]:
        extra.insert(0, "image_id")
    if cfg["splits"]["column"]:
        extra.append("split")
    mask = cfg["mask"]
    if mask and mask["kind"] == "rle":
        extra += ["mask_rle", "mask_height", "mask_width"]
    elif mask:
        extra.append("mask_files")
    outputs = set()
    if labels:
        outputs.add("cls")
    if cfg["report"]:
        outputs.add("report")
    if cfg["boxes"]:
        outputs.add("bbox")
    if mask:
        outputs.add("mask")
    boxes = cfg["boxes"] or []
    pixel = any(b["units"] == "pixel" and b["image_size"] is None for b in boxes)
    label_map = {n: None for n in names}
    label_map.update({k: tuple((f, r) for f, r in v) if v else None
                      for k, v in cfg["label_map"].items()})
    access = cfg["access"] + (f" (licence: {cfg['licence']})" if cfg["licence"] else "")
    return DatasetSpec(
        key=cfg["key"], title=cfg["title"], metadata_files=(Path(cfg["table"]["path"]).name,),
        label_cols=names, extra_cols=tuple(extra), outputs=frozenset(outputs),
        view_map=dict(cfg["view"]["map"]) if cfg["view"] else {},
        expected=dict(cfg["expected"]), access=access.strip(),
        group_col=GROUPS[cfg["splits"]["group_by"]],
        id_col="image_id" if "image" in cfg["ids"] else "image_path",
        box_units="pixel" if pixel else "normalized", label_map=label_map)


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


# -- reading ---------------------------------------------------------------------------------------
def _cell_text(v) -> Any:
    """A JSON value as table text: lists stay lists (label lists), None/NaN become ''."""
    if v is None or isinstance(v, float) and v != v:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return [_cell_text(x) for x in v]
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return str(v)


def _flatten(obj: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in obj.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, name + "."))
        else:
            out[name] = _cell_text(v)
    return out


def json_rows(data, table: dict, *, source: str) -> list[dict]:
    """The row objects of a parsed JSON file as ``table`` (records path / keyed_by) says."""
    if table["records"]:
        for part in table["records"].split("."):
            if not isinstance(data, dict) or part not in data:
                found = sorted(data)[:10] if isinstance(data, dict) else type(data).__name__
                raise MetadataError(f"{source}: no {table['records']!r} in the JSON",
                                    expected=f"an object with key {part!r} (config field "
                                    "table.records)", found=repr(found),
                                    fix="correct table.records to the key holding the rows")
            data = data[part]
    if table["keyed_by"]:
        if not isinstance(data, dict):
            raise MetadataError(f"{source}: the JSON is not keyed by id",
                                expected="an object {id: {field: value}} (table.keyed_by)",
                                found=type(data).__name__, fix="remove table.keyed_by")
        rows = []
        for k, v in data.items():
            if not isinstance(v, dict):
                raise MetadataError(f"{source}: entry {shorten(k, 60)!r} is not an object",
                                    expected="{field: value} per id", found=shorten(v, 80),
                                    fix="check table.records and table.keyed_by")
            rows.append({table["keyed_by"]: k, **v})
        data = rows
    if isinstance(data, dict):
        raise MetadataError(f"{source}: the JSON is an object, not a list of rows",
                            expected="a list of row objects", found=f"keys {sorted(data)[:10]}",
                            fix="set table.records to the key holding the rows, or "
                                "table.keyed_by when the keys are ids")
    if not isinstance(data, list):
        raise MetadataError(f"{source}: the JSON holds no rows", expected="a list of row "
                            "objects", found=type(data).__name__, fix="check table.records")
    out = []
    for i, row in enumerate(data):
        if row is None:
            continue
        if not isinstance(row, dict):
            raise MetadataError(f"{source}, row {i}: not an object", expected="{field: value}",
                                found=shorten(repr(row), 80), fix="check table.records")
        out.append(_flatten(row))
    return out


def read_rows(path: Path, table: dict, *, description: str) -> pd.DataFrame:
    """The metadata table as text cells (nothing recoded; empty cells are '')."""
    if table["format"] in ("csv", "tsv"):
        df = read_table(path, description=description, dtype=str, keep_default_na=False,
                        sep=table["delimiter"], encoding=table["encoding"])
        df.columns = [str(c).strip() for c in df.columns]
        return df
    if table["format"] == "jsonl":
        rows = [_flatten(r) if isinstance(r, dict) else r for r in read_jsonl(path)
                if r is not None]
        bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
        if bad is not None:
            raise MetadataError(f"{path}, object {bad}: not a JSON object",
                                expected="one {field: value} object per line",
                                found=shorten(repr(rows[bad]), 80), fix="check the export")
    else:
        try:
            data = load_json(path)
        except (ValueError, UnicodeDecodeError) as exc:
            raise MetadataError(f"{path} is not valid JSON", expected=description,
                                found=shorten(exc, 120), fix="check the export") from None
        rows = json_rows(data, table, source=str(path))
    df = pd.DataFrame.from_records(rows) if rows else pd.DataFrame()
    return df.astype(object).where(df.notna(), "")


# -- harmonizing -----------------------------------------------------------------------------------
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


class ConfigHarmonizer(BaseHarmonizer):
    """The harmonizer of a dataset described by a config (subclassed per config by
    :func:`build_classes`: ``config`` is the validated config, ``config_path`` its file)."""

    config: ClassVar[dict]
    config_path: ClassVar[Path | None] = None
    metadata_description = "the dataset's metadata table"

    def __reduce__(self):  # the class is built at run time: pickle its config, not its name
        return (_rebuild, (self.config, _path_text(self.config_path), "harmonizer",
                           self.__dict__))

    def resolve_metadata_path(self) -> Path:
        """``csv_path``, else the config's ``table.path`` (relative to the config file), else
        that file name searched near ``base_image_dir``."""
        if self.csv_path is None:
            given = Path(self.config["table"]["path"]).expanduser()
            if not given.is_absolute() and self.config_path is not None:
                given = self.config_path.parent / given
            if given.is_file():
                return given
            if self.base_image_dir is None:
                raise MetadataNotFoundError(self.metadata_description, [given],
                                            fix="correct table.path in the config, or pass "
                                                "csv_path")
            return discover(self.base_image_dir, self.spec.metadata_files,
                            description=self.metadata_description, argument="csv_path")
        return super().resolve_metadata_path()

    def inputs(self, path: Path) -> Inputs:
        """The table, and the config file (a changed config re-harmonizes)."""
        return Inputs(path, files={"config": self.config_path})

    def read(self, inputs: Inputs) -> pd.DataFrame:
        return read_rows(inputs.metadata, self.config["table"],
                         description=self.metadata_description)

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        return harmonize_table(cls.config, raw, source=source)


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
        values = _labels(labels, table, source=source, rows=src_row)
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
        df["boxes"] = _boxes(cfg["boxes"], table, index, paths, source=source, rows=src_row)
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


def _labels(labels: dict, table: pd.DataFrame, *, source: str, rows: np.ndarray) -> np.ndarray:
    """Per-row label values (rows x labels), from wide columns or a list column."""
    if labels["layout"] == "wide":
        enc = labels["encoding"]
        out = np.empty((len(table), len(labels["columns"])), np.float32)
        for j, col in enumerate(labels["columns"]):
            cells = table[col].to_numpy(object)
            codes, uniques = pd.factorize(pd.Series([c.strip() if isinstance(c, str) else
                                                     _cell_text(c) for c in cells], dtype=object))
            lookup = []
            for u in uniques:
                if u not in enc:
                    i = int(np.flatnonzero(codes == len(lookup))[0])
                    raise MetadataError(f"{source}, row {rows[i]}: label {col!r} has a value "
                                        "the config does not encode",
                                        expected=f"one of {sorted(enc)} (labels.encoding)",
                                        found=repr(u), fix=f"add {u!r}: 1, 0, -1 or null to "
                                        "labels.encoding")
                lookup.append(np.nan if enc[u] is None else enc[u])
            out[:, j] = np.asarray(lookup, np.float32)[codes] if len(lookup) else np.nan
        return out
    lst = labels["list"]
    index = {t: j for j, t in enumerate(lst["labels"])}
    none, sep = set(lst["none"]), lst["separator"]
    out = np.zeros((len(table), len(index)), np.float32)
    for i, cell in enumerate(table[lst["column"]].to_numpy(object)):
        if isinstance(cell, list):
            terms = [str(t).strip() for t in cell]
        else:
            cell = "" if cell is None else str(cell).strip()
            if not cell:
                out[i] = np.nan  # not labelled
                continue
            terms = [t.strip() for t in cell.split(sep)] if sep else [cell]
        for t in terms:
            if not t or t in none:
                continue
            j = index.get(t)
            if j is None:
                if lst["unknown"] == "ignore":
                    continue
                raise MetadataError(f"{source}, row {rows[i]}: finding {t!r} is not a listed "
                                    "label", expected=f"one of {lst['labels']} or "
                                    f"{sorted(none)} (labels.list)", found=repr(cell),
                                    fix=f"add {t!r} to labels.list.labels, or set "
                                        "labels.list.unknown: ignore")
            out[i, j] = 1.0
    return out


def _boxes(encodings: list[dict], table: pd.DataFrame, index: pd.Index, paths: np.ndarray, *,
           source: str, rows: np.ndarray) -> list[list[dict]]:
    """Each image's box records (``x_min..y_max``), from every encoding, in row order."""
    keys, recs = [], []
    n = len(table)
    per_row: list[list[dict]] = [[] for _ in range(n)]
    for e, b in enumerate(encodings):
        vals = np.full((n, 4), np.nan)
        for j, col in enumerate(b["columns"]):
            cells = table[col].to_numpy(object)
            for i, c in enumerate(cells):
                c = c.strip() if isinstance(c, str) else c
                if c == "" or c is None:
                    continue
                try:
                    vals[i, j] = float(c)
                except (TypeError, ValueError):
                    raise MetadataError(f"{source}, row {rows[i]}: box column {col!r} is not a "
                                        "number", expected="a number or an empty cell",
                                        found=repr(c), fix="correct the cell, or "
                                        f"boxes[{e}].columns") from None
        empty = np.isnan(vals).all(axis=1)
        partial = np.isnan(vals).any(axis=1) & ~empty
        if partial.any():
            i = int(np.flatnonzero(partial)[0])
            raise MetadataError(f"{source}, row {rows[i]}: box has some coordinates missing",
                                expected=f"all four of {b['columns']} or none",
                                found=repr(vals[i].tolist()), fix="fill or empty the row's box")
        x, y, c3, c4 = vals.T
        if b["format"] == "xywh":
            xyxy = np.stack([x, y, x + c3, y + c4], 1)
        elif b["format"] == "cxcywh":
            xyxy = np.stack([x - c3 / 2, y - c4 / 2, x + c3 / 2, y + c4 / 2], 1)
        else:
            xyxy = vals
        if b["units"] == "percent":
            xyxy = xyxy / 100.0
        elif b["image_size"] is not None:
            w = pd.to_numeric(table[b["image_size"]["width"]], errors="coerce").to_numpy(float)
            h = pd.to_numeric(table[b["image_size"]["height"]], errors="coerce").to_numpy(float)
            bad = ~empty & ~((w > 0) & (h > 0))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise MetadataError(f"{source}, row {rows[i]}: image size for a box is not "
                                    "positive", expected="width and height in pixels",
                                    found=f"{w[i]} x {h[i]}", fix=f"correct boxes[{e}]."
                                    "image_size or the cells")
            xyxy = xyxy / np.stack([w, h, w, h], 1)
        bad = ~empty & ((xyxy[:, 2] < xyxy[:, 0]) | (xyxy[:, 3] < xyxy[:, 1]))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise MetadataError(f"{source}, row {rows[i]}: box ends before it starts",
                                expected=f"a {b['format']} box with positive size",
                                found=repr(vals[i].tolist()), fix=f"check boxes[{e}].format")
        label = derive(b["label"], table) if b["label"] else np.full(n, "", object)
        who = derive(b["annotator"], table) if b["annotator"] else np.full(n, None, object)
        for i in np.flatnonzero(~empty):
            per_row[i].append({"label": label[i] or "", "annotator": who[i],
                               "x_min": float(xyxy[i, 0]), "y_min": float(xyxy[i, 1]),
                               "x_max": float(xyxy[i, 2]), "y_max": float(xyxy[i, 3])})
    for i, rs in enumerate(per_row):
        for r in rs:
            keys.append(paths[i])
            recs.append(r)
    return lists_by(index, keys, recs)


# -- the dataset ---------------------------------------------------------------------------------
class ConfigDataset(UncertainLabelsMixin, BaseRadiologicalDataset):
    """A dataset described by a config (subclassed per config by :func:`build_classes`);
    ``uncertain=`` keeps (default), zeroes or sets to one the -1 labels in ``cls``."""

    config: ClassVar[dict]

    def __reduce__(self):
        return (_rebuild, (self.config, _path_text(self.harmonizer_class.config_path),
                           "dataset", self.__dict__))

    def source_mask(self, index: int) -> np.ndarray:
        mask = self.config["mask"]
        df = self.harmonized_df
        if mask["kind"] == "rle":
            h, w = int(df["mask_height"].iat[index]), int(df["mask_width"].iat[index])
            codes = df["mask_rle"].iat[index]
            if isinstance(codes, str):
                codes = json.loads(codes) if codes.strip() else []
            where = f"{self.spec.key} image {df['image_path'].iat[index]}"
            return merge_masks((_decode(c, mask, h, w, where) for c in codes), shape=(h, w))
        files = df["mask_files"].iat[index]
        if isinstance(files, str):
            files = json.loads(files) if files.strip() else []
        parts = []
        for rel in files:
            path = safe_path(self.image_root(index), rel)
            if mask["missing"] == "empty" and not path.exists():
                continue
            m = cv2.imread(str(path), cv2.IMREAD_UNCHANGED) if path.is_file() else None
            if m is None:
                raise ImageReadError(f"Mask {path} is missing or unreadable",
                                     expected="a PNG mask (mask.png.path in the config)",
                                     found="no readable image", fix="restore the mask file, "
                                     "or correct mask.png.path")
            if m.ndim == 3:
                m = m.max(axis=2)
            parts.append((m > 0).astype(np.uint8))
        if not parts:  # no mask for this image: an empty one at the image's size
            from ..imaging.read import read_image

            _, shape = read_image(self.image_file(index))
            return np.zeros(shape, np.uint8)
        return merge_masks(parts, shape=parts[0].shape)


def _decode(code: str, mask: dict, h: int, w: int, where: str) -> np.ndarray:
    nums = str(code).split()
    if mask["start"] and nums and all(t.lstrip("-").isdigit() for t in nums):
        ints = [int(t) for t in nums]
        if mask["relative"]:
            ints[0] -= 1
        else:
            ints[0::2] = [s - 1 for s in ints[0::2]]
        code = " ".join(map(str, ints))
    return rle_decode(code, height=h, width=w, relative=mask["relative"],
                      order="C" if mask["order"] == "row" else "F", where=where)


# -- building the classes ----------------------------------------------------------------------
_BUILT: dict[str, tuple[type, type]] = {}


def _path_text(p) -> str | None:
    return None if p is None else str(p)


def _digest(cfg: dict, path) -> str:
    return hashlib.sha256(json.dumps([cfg, _path_text(path)], sort_keys=True).encode()
                          ).hexdigest()[:16]


def build_classes(cfg: dict, config_path: str | Path | None = None
                  ) -> tuple[type[ConfigHarmonizer], type[ConfigDataset]]:
    """``(harmonizer class, dataset class)`` for a validated config (the same classes for the
    same config and path)."""
    digest = _digest(cfg, config_path)
    if digest in _BUILT:
        return _BUILT[digest]
    key = cfg["key"]
    camel = "".join(p.capitalize() for p in key.split("_"))
    module = f"radharmony.custom.{key}"  # the family name the CLI lists is the key
    spec = config_spec(cfg)
    path = None if config_path is None else Path(config_path).absolute()
    h = type(f"{camel}Harmonizer", (ConfigHarmonizer,), {
        "__module__": module, "__doc__": f"{cfg['title']} (from the config {path}).",
        "spec": spec, "config": cfg, "config_path": path,
        "metadata_description": f"the {key} metadata table ({Path(cfg['table']['path']).name})"})
    d = type(f"{camel}Dataset", (ConfigDataset,), {
        "__module__": module, "__doc__": f"{cfg['title']}: samples from the config {path}.",
        "harmonizer_class": h, "config": cfg})
    _BUILT[digest] = (h, d)
    return h, d


def _rebuild(cfg: dict, config_path: str | None, kind: str, state: dict):
    h, d = build_classes(cfg, config_path)
    cls = h if kind == "harmonizer" else d
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj
