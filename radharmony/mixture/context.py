"""One source of a mixture as the tasks see it: its harmonized table (one split of one
dataset), grouped into the units records stand on -- images, studies or questions -- with
each unit's patient in its identity family's namespace, its hold-out status and its mixture
split.

A patient's namespace is the identity family of the dataset's spec (MIMIC-CXR-JPG, MS-CXR and
Chest ImaGenome patients are all ``mimic_cxr_jpg:<id>``; see :class:`radharmony.spec.
Identity`), else the dataset's family of splits (``rexgradient_train`` and
``rexgradient_test`` are both ``rexgradient:<id>``), so one patient is one key across every
source and hold-out set of a mixture.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
import xxhash

from .. import catalog
from ..errors import StudyWarning
from ..identity import family_patients
from ..studies.index import VIEW_ORDER, build_index
from ..table.schema import view_lists

#: unit kinds (``Draft.unit``)
UNITS = ("image", "study", "question")
#: hold-out codes of a unit (``Units.held``) and the reason each is counted under
HELD_REASONS = {1: "hold_out_patient", 2: "hold_out_image"}


@lru_cache(maxsize=None)
def _family_of() -> dict[str, str]:
    return {k: fam for fam, keys in catalog.families().items() for k in keys}


def namespace(key: str, spec) -> str:
    """The namespace of a dataset's own patient ids: its identity family when it declares one
    whose rows name the family's patients directly, else its family of splits."""
    ident = spec.identity
    if ident is not None and ident.link == "same":
        return ident.family
    return _family_of().get(key, key)


def patient_keys(table: pd.DataFrame, key: str, spec) -> np.ndarray:
    """Each row's patient as ``"<namespace>:<id>"`` (object array); rows linked to their
    identity family through a column or path are under the family's name."""
    own = (namespace(key, spec) + ":" + table["patient_id"].astype(str)).to_numpy(object)
    ident = spec.identity
    if ident is not None and ident.link in ("column", "path"):
        fam = family_patients(table, ident)
        linked = fam.notna().to_numpy()
        own[linked] = (ident.family + ":" + fam[linked].astype(str)).to_numpy(object)
    return own


def valid_mask(patients: np.ndarray, *, seed: int, share: float) -> np.ndarray:
    """True for units whose patient falls in the mixture's validation split: a hash of the
    namespaced patient id and the seed, below ``share`` (the same patient, the same side,
    in every source and task)."""
    if share <= 0 or not len(patients):
        return np.zeros(len(patients), bool)
    codes, uniques = pd.factorize(pd.Series(patients, dtype=object), sort=False)
    prefix = f"{int(seed)}\x1fvalid\x1f"
    cut = int(share * 2**64)
    side = np.fromiter((xxhash.xxh3_64_intdigest((prefix + str(p)).encode()) < cut
                        for p in uniques), bool, len(uniques))
    return side[codes]


def _cut(values: list, ends: list) -> list:
    """``values`` cut into consecutive lists ending at ``ends``."""
    return [values[a:b] for a, b in zip([0, *ends[:-1]], ends)]


@dataclass
class Units:
    """What records stand on, one entry per unit.

    ``ids`` (the image ``sample_id``, the study id or the question's ``sample_id``),
    ``study_ids``, ``patients`` (namespaced), ``paths`` and ``views`` (a list per unit, in
    view order for a study), ``rows`` (the unit's table row, or its rows for a study),
    ``sections`` (studies: the six sections, None where absent), ``held`` (int8: 0 kept, or a
    key of :data:`HELD_REASONS`) and ``valid`` (in the mixture's validation split)."""

    kind: str
    ids: np.ndarray
    study_ids: np.ndarray
    patients: np.ndarray
    paths: list
    views: list
    rows: object
    sections: list | None = None
    held: np.ndarray | None = None
    valid: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)


class SourceContext:
    """One source: ``name``, ``key``, ``spec`` (the dataset instance's), ``table`` (its rows
    of the drawn split), ``kwargs``, ``silver`` (labels from radharmony's report labeler),
    ``seed`` and ``valid_share``; :meth:`units` groups the table; :meth:`mark` is set by the
    build to hold out and split units."""

    def __init__(self, *, name: str, key: str, spec, table: pd.DataFrame, kwargs: dict,
                 seed: int, valid_share: float, held_patients=frozenset(),
                 bad_paths=frozenset()):
        self.name, self.key, self.spec, self.kwargs = name, key, spec, dict(kwargs)
        self.table = table.reset_index(drop=True)
        self.silver = kwargs.get("labels") == "report"
        self.seed, self.valid_share = seed, valid_share
        self.held_patients, self.bad_paths = held_patients, bad_paths
        self.patients = patient_keys(self.table, key, spec)
        self._units: dict[str, Units] = {}
        self._findings = None

    # -- units --------------------------------------------------------------------------
    def units(self, kind: str) -> Units:
        """The table grouped as ``kind`` (built once, marked for hold-out and split)."""
        if kind not in self._units:
            u = {"image": self._images, "study": self._studies,
                 "question": self._questions}[kind]()
            self._mark(u)
            self._units[kind] = u
        return self._units[kind]

    def _images(self) -> Units:
        t = self.table
        paths = t["image_path"].astype(str).tolist()
        views = t["view"].tolist()
        return Units("image", t["sample_id"].to_numpy(object), t["study_id"].astype(str)
                     .to_numpy(object), self.patients, [[p] for p in paths],
                     [[v] for v in views], np.arange(len(t), dtype=np.int64))

    def _questions(self) -> Units:
        t = self.table
        # a question's views repeat over its study's other questions: each list mapped once
        views = view_lists(t["view_positions"].tolist(), self.spec.view_map, shared=True)
        return Units("question", t["sample_id"].to_numpy(object), t["study_id"].astype(str)
                     .to_numpy(object), self.patients, t["image_paths"].tolist(),
                     views, np.arange(len(t), dtype=np.int64))

    def _studies(self) -> Units:
        """A study is the rows of one (patient, study_id): a study id reused by another
        patient is another study. Its id is the study id, or ``"<patient>/<study>"`` for
        every study when some study id is reused."""
        t = self.table
        keep = ["study_id", "patient_id", "view", "report",
                *(c for c in t.columns if c.startswith("section_"))]
        slim = t[keep].assign(_patient=self.patients)  # the study key starts with it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StudyWarning)
            index = build_index(slim, max_images=None, view_order=VIEW_ORDER,
                                root_col="_patient", owner=self.name)
        paths = t["image_path"].astype(str).to_numpy(object)
        views = t["view"].to_numpy(object)
        firsts = np.array([r[0] for r in index.rows], np.int64)
        studies = index.study_ids.astype(str).astype(object)
        patients = self.patients[firsts]
        ids = studies if pd.Index(studies).is_unique else \
            np.array([f"{p}/{s}" for p, s in zip(patients, studies)], dtype=object)
        ends = np.cumsum([len(r) for r in index.rows]).tolist()
        flat = np.concatenate(index.rows) if index.rows else np.zeros(0, np.int64)
        return Units("study", ids, studies, patients, _cut(paths[flat].tolist(), ends),
                     _cut(views[flat].tolist(), ends), index.rows, sections=index.sections)

    def _mark(self, u: Units) -> None:
        held = np.zeros(len(u), np.int8)
        if self.bad_paths:
            lens = np.fromiter(map(len, u.paths), np.int64, len(u))
            flat = pd.Index([p for ps in u.paths for p in ps], dtype=object)
            owner = np.repeat(np.arange(len(u)), lens)
            hit = np.bincount(owner[flat.isin(self.bad_paths)], minlength=len(u)) > 0
            held[hit] = 2
        if self.held_patients:
            held[pd.Index(u.patients, dtype=object).isin(self.held_patients)] = 1
        u.held = held
        u.valid = valid_mask(u.patients, seed=self.seed, share=self.valid_share)

    # -- labels -------------------------------------------------------------------------
    def findings(self) -> tuple[tuple[str, ...], np.ndarray]:
        """``(finding ids, values)``: the canonical findings the dataset's labels name
        directly (vocabulary order) and their values per table row (1 / 0 / -1 / NaN: a
        finding the source does not label stays NaN, never 0)."""
        if self._findings is None:
            from ..vocabulary import FINDINGS, derive_findings

            named = {f for pairs in self.spec.label_map.values() if pairs for f, _ in pairs}
            ids = tuple(f for f in FINDINGS if f in named)
            values = derive_findings(self.table, self.spec, findings=ids).to_numpy(np.float64) \
                if ids else np.zeros((len(self.table), 0))
            self._findings = (ids, values)
        return self._findings


__all__ = ["HELD_REASONS", "SourceContext", "UNITS", "Units", "namespace", "patient_keys",
           "valid_mask"]
