"""What the viewer shows, independent of HTTP: filtered, paged sample lists and one sample.

Everything per request is bounded: the table is turned into compact arrays once (sample ids,
view-position codes, the label matrix), a filter is one vectorized mask over them (memoized,
so paging does no table work), and a sample is the dataset's own preprocessed sample (kept in a
small LRU so its JSON and its PNG decode the image once). That keeps a 240,000-image split
responsive: nothing scales with the table size except the memoized mask.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from ..errors import RadHarmonyError
from .answers import NotFound, ViewerError, png8  # noqa: F401 (also imported from here)

try:
    from pandas import NA as _NA
except ImportError:  # pragma: no cover
    _NA = None

MISSING_VIEW = "(missing)"
MAX_PAGE = 500
#: a report section header at the start of a line: ``FINDINGS:``, ``IMPRESSION:`` ...
_HEADER = re.compile(r"^[ \t]*([A-Z][A-Z0-9 /&()'-]{1,60}):", re.M)


def report_sections(report: str | None) -> list[dict]:
    """``[{"title", "start", "end"}]``: character ranges of each section's body in ``report``
    (text before the first header gets ``title`` None)."""
    if not report:
        return []
    marks = list(_HEADER.finditer(report))
    bounds = [(None, 0, marks[0].start() if marks else len(report))]
    bounds += [(m.group(1).strip(), m.end(), marks[i + 1].start() if i + 1 < len(marks)
                else len(report)) for i, m in enumerate(marks)]
    out = []
    for title, start, end in bounds:
        while start < end and report[start].isspace():
            start += 1
        while end > start and report[end - 1].isspace():
            end -= 1
        if title is not None or end > start:
            out.append({"title": title, "start": start, "end": end})
    return out


def clean_spans(spans, *, report: str | None) -> list[dict]:
    """Spans ``{label, start, end}`` that fit inside ``report``, sorted by start."""
    if not spans or not report:
        return []
    out = []
    for s in spans:
        try:
            start, end, label = int(s["start"]), int(s["end"]), str(s["label"])
        except (KeyError, TypeError, ValueError):
            continue
        if 0 <= start < end <= len(report):
            out.append({"label": label, "start": start, "end": end})
    return sorted(out, key=lambda s: (s["start"], s["end"]))


def report_label_evidence(report: str | None, *, rules=None,
                          probable: str = "uncertain") -> list[dict]:
    """The report labeler's CheXpert labels of ``report`` with what decided each:
    ``[{"name", "value", "sentence", "mention": {"start", "end"} | None, "cue": {...} |
    None, "cue_kind", "rule"}]``; offsets are into ``report`` (the deciding phrase to
    highlight). ``No Finding`` (derived) has no offsets."""
    if not report:
        return []
    from ..reports import label_reports

    _, ev = label_reports([report], explain=True, rules=rules, probable=probable)
    out = []
    for r in ev.itertuples(index=False):
        def span(a, b):
            return None if a is None or a is _NA or b is None or b is _NA else \
                {"start": int(a), "end": int(b)}
        out.append({"name": r.label, "value": float(r.value), "sentence": _plain(r.sentence),
                    "mention": span(r.mention_start, r.mention_end),
                    "cue": span(r.cue_start, r.cue_end), "cue_kind": _plain(r.cue_kind),
                    "rule": _plain(r.mention_rule)})
    return out


def _report_rules(dataset):
    """The user rule files a report-labelled dataset was built with (None: built-in)."""
    rules = getattr(getattr(dataset, "harmonizer", None), "report_rules", None)
    return list(rules) if rules else None


def _report_probable(dataset) -> str:
    """How the report-labelled dataset values probable hedges (``report_probable``)."""
    return getattr(getattr(dataset, "harmonizer", None), "report_probable", "uncertain")


def _plain(value: Any) -> Any:
    """A table cell as a JSON value (NaN, NA and NaT become None)."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if value is None or isinstance(value, float) and math.isnan(value):
        return None
    try:
        import pandas as pd

        if value is pd.NA or value is pd.NaT:
            return None
    except ImportError:  # pragma: no cover
        pass
    return value if isinstance(value, (bool, int, float, str)) else str(value)


class _Split:
    """One dataset and the compact arrays its filters run on."""

    def __init__(self, dataset):
        import pandas as pd

        self.dataset = dataset
        self.spec = dataset.spec
        df = dataset.harmonized_df
        self.n = len(df)
        self.ids = df["sample_id"].to_numpy(dtype=object)
        views = df["view"] if "view" in df.columns else df["view_position"]  # canonical
        codes, uniques = pd.factorize(views.fillna(MISSING_VIEW), sort=True)
        self.view_codes, self.views = codes.astype(np.int32), [str(u) for u in uniques]
        self.label_cols = list(self.spec.label_cols)
        self.labels = df[self.label_cols].to_numpy(np.float32) if self.label_cols else \
            np.zeros((self.n, 0), np.float32)
        self._id_index: dict[str, int] | None = None
        self._masks: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def index_of(self, sample_id: str) -> int | None:
        with self._lock:
            if self._id_index is None:
                self._id_index = {sid: i for i, sid in enumerate(self.ids)}
        return self._id_index.get(sample_id)

    def matching(self, label: str | None, view: str | None) -> np.ndarray:
        """Row indices with ``label`` positive and view position ``view`` (memoized)."""
        key = (label or None, view or None)
        with self._lock:
            if key in self._masks:
                self._masks.move_to_end(key)
                return self._masks[key]
        mask = np.ones(self.n, bool)
        if key[0] is not None:
            if key[0] not in self.label_cols:
                raise ViewerError(f"Unknown label {label!r} for {self.spec.key}",
                                  expected=f"one of {self.label_cols}", found=repr(label))
            mask &= self.labels[:, self.label_cols.index(key[0])] == 1
        if key[1] is not None:
            if key[1] not in self.views:
                raise ViewerError(f"Unknown view position {view!r} for {self.spec.key}",
                                  expected=f"one of {self.views}", found=repr(view))
            mask &= self.view_codes == self.views.index(key[1])
        rows = np.flatnonzero(mask)
        with self._lock:
            self._masks[key] = rows
            while len(self._masks) > 32:
                self._masks.popitem(last=False)
        return rows


class ViewerApp:
    """The viewer's data model over one or more datasets (typically the splits of one family).

    Each dataset needs what :class:`~radharmony.data.dataset.BaseRadiologicalDataset` has:
    ``spec``, ``harmonized_df`` (with ``sample_id``), ``len`` and ``[index]`` returning a sample
    dict with ``img`` and optionally ``bbox``, ``bbox_labels``, ``bbox_annotators``,
    ``report`` and ``report_spans``.
    """

    def __init__(self, datasets: Sequence, *, page_size: int = 50, cached_samples: int = 64):
        if not datasets:
            raise ViewerError("The viewer got no dataset", expected="at least one dataset",
                              found="none", fix="pass the datasets to view")
        self.splits = {ds.spec.key: _Split(ds) for ds in datasets}
        self.page_size = page_size
        self._samples: OrderedDict[tuple, dict] = OrderedDict()
        self._cached = cached_samples
        from .volumes import VolumeSources

        self._volumes = VolumeSources()
        self._lock = threading.Lock()

    # -- lookups ------------------------------------------------------------------------------
    def split(self, key: str | None) -> _Split:
        if key is None:
            return next(iter(self.splits.values()))
        try:
            return self.splits[key]
        except KeyError:
            raise NotFound(f"Unknown split {key!r}", expected=f"one of {list(self.splits)}",
                           found=repr(key)) from None

    def locate(self, *, split: str | None = None, index: str | int | None = None,
               sample_id: str | None = None) -> tuple[_Split, int]:
        """The split and row of a sample given by ``sample_id`` or ``split`` + ``index``."""
        if sample_id is not None:
            for s in ([self.split(split)] if split else self.splits.values()):
                i = s.index_of(sample_id)
                if i is not None:
                    return s, i
            raise NotFound(f"No sample {sample_id!r}", expected="a sample_id of the viewed "
                           "datasets", found=repr(sample_id))
        s = self.split(split)
        try:
            i = int(index)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ViewerError("A sample is addressed by index or sample_id",
                              expected="index=<integer> or id=<sample_id>",
                              found=repr(index)) from None
        if not 0 <= i < s.n:
            raise NotFound(f"Index {i} is out of range for {s.spec.key}",
                           expected=f"0 to {s.n - 1}", found=str(i))
        return s, i

    # -- the API --------------------------------------------------------------------------------
    def meta(self) -> dict:
        return {"page_size": self.page_size, "splits": [
            {"key": k, "title": s.spec.title, "images": s.n, "labels": s.label_cols,
             "views": s.views, "outputs": sorted(s.spec.outputs),
             "row_unit": getattr(s.spec, "row_unit", "image")}
            for k, s in self.splits.items()]}

    def samples(self, *, split: str | None = None, label: str | None = None,
                view: str | None = None, offset: int | str = 0, limit: int | str | None = None
                ) -> dict:
        s = self.split(split)
        try:
            offset = max(0, int(offset))
            limit = min(MAX_PAGE, max(1, int(limit if limit is not None else self.page_size)))
        except (TypeError, ValueError):
            raise ViewerError("offset and limit must be integers", found=f"{offset!r}, "
                              f"{limit!r}") from None
        rows = s.matching(label, view)
        page = rows[offset:offset + limit]
        items = []
        for i in page.tolist():
            positives = [c for c, v in zip(s.label_cols, s.labels[i]) if v == 1]
            items.append({"index": i, "sample_id": s.ids[i],
                          "view_position": s.views[s.view_codes[i]], "positives": positives})
        return {"split": s.spec.key, "total": int(len(rows)), "offset": offset, "limit": limit,
                "items": items}

    def _sample(self, s: _Split, index: int) -> dict:
        key = (s.spec.key, index)
        with self._lock:
            if key in self._samples:
                self._samples.move_to_end(key)
                return self._samples[key]
        sample = s.dataset[index]
        with self._lock:
            self._samples[key] = sample
            while len(self._samples) > self._cached:
                self._samples.popitem(last=False)
        return sample

    def sample(self, **where) -> dict:
        """One sample as JSON: table fields, labels, report sections and spans, boxes."""
        s, i = self.locate(**where)
        row = s.dataset.harmonized_df.iloc[i]
        report = _plain(row["report"])
        out: dict[str, Any] = {
            "split": s.spec.key, "index": i, "total": s.n, "sample_id": s.ids[i],
            "view_position": _plain(row["view_position"]), "patient_id": row["patient_id"],
            "study_id": row["study_id"],
            "fields": {c: _plain(row[c]) for c in s.spec.extra_cols if c in row.index},
            "labels": [{"name": c, "value": _plain(row[c])} for c in s.label_cols],
            "report": report, "sections": report_sections(report), "report_spans": [],
            "report_labels": report_label_evidence(report, rules=_report_rules(s.dataset),
                                                   probable=_report_probable(s.dataset)),
            "boxes": [], "width": None, "height": None, "image_error": None, "volume": None}
        from .volumes import is_volume_split

        if is_volume_split(s.dataset):  # the three planes: no voxels until a slice is asked
            try:
                out["volume"] = self.volume(split=s.spec.key, index=i).info()
            except RadHarmonyError as exc:
                out["image_error"] = str(exc)
                return out
            out["depth"], out["height"], out["width"] = out["volume"]["shape"]
            out["fields"]["volume_shape"] = out["volume"]["shape"]
            return out
        try:
            sample = self._sample(s, i)
        except RadHarmonyError as exc:
            out["image_error"] = str(exc)
            return out
        if sample.get("report") and sample["report"] != out["report"]:  # "": no report
            out["report"] = sample["report"]
            out["report_labels"] = report_label_evidence(
                out["report"], rules=_report_rules(s.dataset),
                probable=_report_probable(s.dataset))
            out["sections"] = report_sections(sample["report"])
        out["report_spans"] = clean_spans(sample.get("report_spans"), report=out["report"])
        img = sample["img"]
        out["height"], out["width"] = (int(d) for d in img.shape[-2:])
        bbox = sample.get("bbox")
        if bbox is not None and len(bbox):
            labels = sample.get("bbox_labels") or [""] * len(bbox)
            annotators = sample.get("bbox_annotators") or [None] * len(bbox)
            for (x0, y0, x1, y1), lab, ann in zip(np.asarray(bbox, np.float64).tolist(),
                                                  labels, annotators):
                out["boxes"].append({"label": str(lab), "annotator": None if ann is None
                                     else str(ann), "x_min": x0, "y_min": y0, "x_max": x1,
                                     "y_max": y1})
        return out

    def image_png(self, **where) -> bytes:
        """The preprocessed image of one sample as an 8-bit grayscale PNG."""
        s, i = self.locate(**where)
        from .volumes import is_volume_split, plane_slice

        if is_volume_split(s.dataset):  # its middle axial slice, from the cache
            volume = self.volume(split=s.spec.key, index=i)
            arr = plane_slice(volume.array, "axial", volume.shape[0] // 2).astype(np.float32)
        else:
            img = self._sample(s, i)["img"]
            arr = img.float().numpy() if hasattr(img, "float") else np.asarray(img, np.float32)
        arr = arr.reshape(arr.shape[-2:]) if arr.ndim == 3 and arr.shape[0] == 1 else arr
        lo, hi = (-1.0, 1.0) if arr.min() >= -1 and arr.max() <= 1 else (arr.min(), arr.max())
        return png8(np.clip((arr - lo) * (255.0 / max(hi - lo, 1e-6)), 0, 255).round()
                    .astype(np.uint8))

    def volume(self, **where):
        """The :class:`~radharmony.viewer.volumes.VolumeSource` of a volume sample (its
        canonical volume, from the cache), kept in a small LRU."""
        from .volumes import is_volume_split, open_volume

        s, i = self.locate(**where)
        if not is_volume_split(s.dataset):
            raise ViewerError(f"{s.spec.key} holds images, not volumes",
                              expected="a dataset whose rows are volumes", found=s.spec.key)
        return self._volumes.get((s.spec.key, i), lambda: open_volume(s.dataset, i))
