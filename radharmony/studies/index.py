"""The study index: an image-level table grouped into studies, built once per dataset.

Generic over the harmonized table: a study is the rows sharing ``study_id`` (and, in a table
spanning several sources, ``spec.root_col``), its images ordered by ``view_order`` (table
order within a view and for views not listed) and cut at ``max_images``. Sections come from
:func:`radharmony.studies.sections.report_sections`; dates from the table's study date column
(:data:`DATE_COLUMNS`), read by :mod:`radharmony.studies.priors`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import SHOW, RadHarmonyError, StudyWarning
from .sections import SECTION_ALIASES, SECTION_KEYS, report_sections

#: the default order of a study's images (frontal first)
VIEW_ORDER = ("PA", "AP", "LATERAL", "LL")
#: the views ReXrank picks as a single-image model's input, best first
KEY_VIEWS = ("PA", "AP")


@dataclass
class StudyIndex:
    """One entry per study, in order of first appearance in the table."""

    study_ids: np.ndarray        # object
    patient_ids: np.ndarray      # object
    rows: list                   # image rows (int64 arrays) in view order, at most K each
    n_images: np.ndarray         # images per study before the cut at K
    key_image: np.ndarray        # position of the ReXrank frontal choice in ``rows``
    reports: np.ndarray          # object: the study's report (its first image's that has one)
    sections: list               # dicts of SECTION_KEYS
    section_source: np.ndarray   # object: "source", "parser" or "none"
    max_images: int

    def __len__(self) -> int:
        return len(self.study_ids)

    def table(self) -> pd.DataFrame:
        """The index as a DataFrame (one row per study)."""
        df = pd.DataFrame({"study_id": self.study_ids, "patient_id": self.patient_ids,
                           "n_images": self.n_images,
                           "n_kept": [len(r) for r in self.rows],
                           "key_image": self.key_image, "section_source": self.section_source})
        for k in SECTION_KEYS:
            df[k] = pd.Series([s[k] for s in self.sections], dtype=object)
        df["report"] = pd.Series(self.reports, dtype=object)
        return df


def check_max_images(max_images) -> int | None:
    """``max_images`` as an int >= 1, or None (the largest study)."""
    if max_images is None:
        return None
    if isinstance(max_images, bool) or not isinstance(max_images, (int, np.integer)) \
            or max_images < 1:
        raise RadHarmonyError("max_images must be a positive integer",
                              expected="max_images >= 1 (images per study sample), or None "
                              "for the largest study", found=repr(max_images),
                              fix="pass max_images=4, for example")
    return int(max_images)


def check_view_order(view_order) -> tuple[str, ...]:
    if view_order is None:
        return VIEW_ORDER
    if isinstance(view_order, str) or not all(isinstance(v, str) for v in view_order):
        raise RadHarmonyError("view_order must be a sequence of view names",
                              expected="e.g. ('PA', 'AP', 'LATERAL', 'LL')",
                              found=repr(view_order)[:80], fix="pass a tuple of views")
    return tuple(view_order)


def build_index(df: pd.DataFrame, *, max_images: int | None, view_order=VIEW_ORDER,
                root_col: str | None = None, owner: str = "dataset") -> StudyIndex:
    """Group the image table ``df`` (a dataset's ``harmonized_df``) into studies."""
    if not len(df):
        raise RadHarmonyError(f"{owner}: no images to group into studies",
                              expected="a table with at least one row", found="0 rows",
                              fix="check the dataset's filters and splits")
    key = df["study_id"].astype(str)
    if root_col is not None:
        key = df[root_col].astype(str) + "\x00" + key
    codes, _ = pd.factorize(key, sort=False)
    patients = df["patient_id"].to_numpy(object)
    _check_patients(codes, patients, df["study_id"].to_numpy(object), owner)
    rank = {v: i for i, v in enumerate(view_order)}
    views = df["view"].to_numpy(object)
    seen, distinct = pd.factorize(views)  # None / NaN: -1, no rank (the last entry)
    view_rank = np.array([rank.get(v, len(rank)) for v in distinct] + [len(rank)],
                         np.int64)[seen]
    order = np.lexsort((np.arange(len(df)), view_rank, codes))  # by study, view, table row
    starts = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0])
    ends = np.r_[starts[1:], len(order)]
    groups = [order[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
    n_images = ends - starts
    k = int(n_images.max()) if max_images is None else max_images
    first = order[starts]
    study_ids = df["study_id"].to_numpy(object)[first]
    over = np.flatnonzero(n_images > k)
    if len(over):
        warnings.warn(f"{owner}: {len(over)} of {len(groups)} studies have more than "
                      f"max_images={k} images; each keeps its first {k} in view order "
                      f"{tuple(view_order)} ({int((n_images[over] - k).sum())} images left "
                      f"out), first: {[str(s) for s in study_ids[over[:SHOW]]]}",
                      StudyWarning, stacklevel=4)
    rows = [g[:k] for g in groups]
    key_image = _key_images(views[order], starts, k)
    has = df["report"].notna().to_numpy(bool)
    _check_reports(codes[has], df["report"].to_numpy(object)[has], study_ids, owner)
    # the report (and its section columns) of the first image in view order that has one
    at = np.minimum.reduceat(np.where(has[order], np.arange(len(order)), len(order)), starts)
    told = np.where(at < len(order), order[np.minimum(at, len(order) - 1)], first)
    reports = df["report"].to_numpy(object)[told]
    own = [c for c in df.columns if c.startswith("section_") and
           SECTION_ALIASES.get(c[8:], c[8:]) in SECTION_KEYS]  # in table order
    own_values = {c[8:]: df[c].to_numpy(object)[told] for c in own}
    sections, source = [], []
    done: dict = {}  # a report (with its section fields) is split once, however many share it
    for i, report in enumerate(reports):
        given = {k_: v[i] for k_, v in own_values.items()}
        try:  # keyed with the types: 1 == 1.0 == True, but not as text
            key = (type(report), report, *((type(v), v) for v in given.values()))
            s, src = done[key]
        except KeyError:
            s, src = done[key] = report_sections(report, given)
        except TypeError:  # a value that cannot be a key
            s, src = report_sections(report, given)
        sections.append(dict(s))
        source.append(src)
    source = np.array(source, object)
    bare = np.flatnonzero((source == "none") & np.array([isinstance(r, str) and bool(r.strip())
                                                         for r in reports]))
    if len(bare):
        warnings.warn(f"{owner}: {len(bare)} of {len(groups)} studies have a report without "
                      "section headers; their sections are None and the text stays in "
                      f"'report', first: {[str(s) for s in study_ids[bare[:SHOW]]]}",
                      StudyWarning, stacklevel=4)
    return StudyIndex(study_ids=study_ids, patient_ids=patients[first], rows=rows,
                      n_images=n_images, key_image=key_image, reports=reports,
                      sections=sections, section_source=source, max_images=k)


def _key_images(views: np.ndarray, starts: np.ndarray, k: int) -> np.ndarray:
    """ReXrank's frontal choice of every study: the position of its first PA among its first
    ``k`` images, else of its first AP, else 0 (``views``: in study and view order, each
    study's from ``starts``)."""
    at = np.arange(len(views)) - np.repeat(starts, np.diff(np.r_[starts, len(views)]))
    out = np.zeros(len(starts), np.int64)
    for want in reversed(KEY_VIEWS):  # the first PA wins over the first AP
        hit = np.minimum.reduceat(np.where(views == want, at, k), starts)
        out = np.where(hit < k, hit, out)
    return out


def _check_reports(codes: np.ndarray, reports: np.ndarray, study_ids: np.ndarray,
                   owner: str) -> None:
    """Count (in one warning) the studies whose images carry different reports (``codes``,
    ``reports``: the images that have one): a study keeps the first in view order."""
    pairs = pd.DataFrame({"s": codes, "r": reports}).drop_duplicates()
    n = pairs.groupby("s", sort=True).size()
    bad = n.index[n.to_numpy() > 1].to_numpy()
    if len(bad):
        warnings.warn(f"{owner}: {len(bad)} of {len(study_ids)} studies have images with "
                      "different reports; each keeps the report of its first image in view "
                      f"order that has one, first: {[str(s) for s in study_ids[bad[:SHOW]]]}",
                      StudyWarning, stacklevel=5)


def _check_patients(codes: np.ndarray, patients: np.ndarray, studies: np.ndarray,
                    owner: str) -> None:
    pc, _ = pd.factorize(pd.Series(patients, dtype=object).astype(str), sort=False)
    pairs = pd.DataFrame({"s": codes, "p": pc}).drop_duplicates()
    bad = pairs["s"][pairs["s"].duplicated()].unique()
    if len(bad):
        names = []
        for s in bad[:SHOW]:
            at = np.flatnonzero(codes == s)
            names.append(f"{studies[at[0]]} (patients {sorted(set(map(str, patients[at])))})")
        raise RadHarmonyError(f"{owner}: {len(bad)} studies have images of more than one "
                              f"patient, first: {names}",
                              expected="every image of a study under one patient_id",
                              found=f"{len(bad)} such studies",
                              fix="correct patient_id or study_id in the table "
                              "(harmonized_df=...) before level='study'")
