"""Several source datasets as one dataset in the canonical label space.

:func:`merge` derives each source's canonical findings (:func:`radharmony.vocabulary.
derive_findings`: 1 / 0 / -1 / NaN, never an invented negative), stacks the sources' rows into
one table and returns a :class:`MergedDataset`: a :class:`~radharmony.data.dataset.
BaseRadiologicalDataset` whose rows keep their own image root (``spec.root_col="source"``),
their source's ``sample_id`` and a namespaced ``patient_id`` (``"<key>:<patient>"``), so splits
and folds never put one patient on both sides.

Datasets of one *identity family* (declared by each spec's ``identity``, see
:class:`radharmony.spec.Identity` and ``docs/audit.md``) share patients: MS-CXR, Chest ImaGenome
and CheXmask-MIMIC are MIMIC-CXR patients, RSNA Pneumonia (through ``nih_image``) and the NIH
Google labels are NIH ChestX-ray14 patients, and so on. With two or more members of a family
in the merge, their patients are joined under the family's name (``"nih_cxr14:00000013"``) and
``merged.family_joins`` lists the joins. SIIM-ACR images are NIH images too, but its table
names no NIH original (its ids are new DICOM UIDs), so its patients cannot be joined: the
merge warns.

>>> import pandas as pd
>>> from radharmony.data.dataset import BaseRadiologicalDataset
>>> from radharmony.registry import get_harmonizer_class
>>> spec = get_harmonizer_class("siim_acr_ptx").spec
>>> t = pd.DataFrame({"patient_id": ["a", "b"], "study_id": ["a", "b"],
...                   "image_path": ["a.dcm", "b.dcm"], "view_position": None, "report": None,
...                   "Pneumothorax": [1.0, 0.0], "rle": [[], []]})
>>> siim = BaseRadiologicalDataset("/data/siim", harmonized_df=t, spec=spec, cache_dir=None)
>>> m = merge([siim], findings=["pneumothorax", "hydropneumothorax", "pneumonia"])
>>> cols = ["sample_id", "patient_id", "pneumothorax", "hydropneumothorax"]
>>> m.harmonized_df[cols].values.tolist()
[['siim_acr_ptx:a', 'siim_acr_ptx:a', 1.0, nan], ['siim_acr_ptx:b', 'siim_acr_ptx:b', 0.0, 0.0]]
>>> m.merge_report[["dataset", "rows", "mapped", "one_way", "unknown"]].values.tolist()
[['siim_acr_ptx', 2, 2, 0, 0]]
"""

from __future__ import annotations

import logging
import warnings
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from .errors import RadHarmonyError, UnsupportedOutputWarning, check_choice
from .identity import join_patients, unlinked_message
from .spec import DatasetSpec, grade_column, side_column
from .vocabulary import derive_findings, derive_report
from .vocabulary.kinds import check_kinds
from .vocabulary.table import check_findings
from .data.dataset import BaseRadiologicalDataset
from .data.merged_sources import SourceSamples, volume_sources
from .annotations.labels import UNCERTAIN_POLICIES
from .data.sampling import cls_targets

log = logging.getLogger("radharmony.merge")

MERGED_KEY = "merged"
#: ``uncertain=``: what -1 becomes in ``cls`` and whether ``cls_mask`` counts it
UNCERTAIN = {k: (UNCERTAIN_POLICIES[k], k not in ("keep", "ignore"))
             for k in ("keep", "ignore", "zeros", "ones")}  # (what sampling.cls_targets does)
#: the merged table's columns before the findings
BASE_COLUMNS = ("patient_id", "study_id", "image_path", "view_position", "report", "source",
                "patient_age_years", "patient_sex")
REPORT_COLUMNS = ("dataset", "rows", "label_columns", "values", "mapped", "one_way", "unknown",
                  "rows_without_findings", "patients_joined")


class MergeError(RadHarmonyError, ValueError):
    """Datasets that cannot be merged as given."""


class MergedDataset(SourceSamples, BaseRadiologicalDataset):
    """Samples of several source datasets in one label space (build it with :func:`merge`).

    Samples: ``img``, ``sample_id`` (the source's), ``source`` (the dataset key), ``cls`` (one
    value per finding of :attr:`findings`, unknown as 0) and ``cls_mask`` (1 where the value
    is a known target; ``uncertain=`` decides -1, see :data:`UNCERTAIN`), plus ``report`` when
    every source was built with ``output_report=True``, and ``reg`` / ``grade`` / ``side``
    with their masks when any source was built with ``output_reg`` / ``output_grade`` /
    ``output_side`` (a source without them masks them: see :func:`merge`). A merge of volume
    datasets reads each row through its source (its reader, preset and cache: see
    :mod:`radharmony.data.merged_sources`), the merge's outputs put over the source's.

    Attributes:
        findings: the canonical finding ids, in ``cls`` order.
        merge_report: per source, how many label values reached the findings (see
            :func:`merge`).
        sources: the source datasets, in merge order.
        family_joins: one row per identity family joined (``family``, ``datasets``,
            ``rows_linked``, ``rows_unlinked``, ``patients``, ``shared_patients``: patients
            found in two or more of its datasets); empty when none was.
    """

    harmonizer_class = None

    def __init__(self, table: pd.DataFrame, *, spec: DatasetSpec, image_roots, findings,
                 uncertain: str, merge_report: pd.DataFrame, sources: tuple, like,
                 family_joins: pd.DataFrame | None = None):
        self.findings = tuple(findings)
        self.family_joins = family_joins
        self.uncertain = uncertain
        self.merge_report = merge_report
        self.sources = sources
        transform = like.user_transform if like.user_transform is not None else like.pipeline
        kinds = {f"output_{k}": k in spec.outputs for k in KIND_OUTPUTS}
        super().__init__(None, output_cls=True, output_report="report" in like.outputs,
                         **kinds, transform=transform, cache_dir=like.cache_dir, dtype=like.dtype,
                         harmonized_df=table, spec=spec, image_roots=image_roots)

    def __getitem__(self, index: int) -> dict:
        if self.spec.row_unit == "volume":
            return self.source_sample(index)
        return super().__getitem__(index)

    def __getitems__(self, indices) -> list[dict]:
        if self.spec.row_unit == "volume":
            return self.source_samples(indices)
        return super().__getitems__(indices)

    def _set_table(self, df: pd.DataFrame, *, derived: bool = False) -> None:
        super()._set_table(df, derived=derived)
        self.source_of = self.harmonized_df["source"].to_numpy(dtype=object)

    def add_outputs(self, index: int, sample: dict, letterbox) -> None:
        super().add_outputs(index, sample, letterbox)  # cls under self.uncertain
        sample["source"] = self.source_of[index]

    def targets(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """``(labels (N, F) float32, mask (N, F) bool, finding ids)``: what
        :func:`radharmony.evaluate.targets` probes score; usable cells are the 0/1 targets
        of ``cls`` where ``cls_mask`` is 1 (``uncertain="keep"`` masks -1 like ``"ignore"``)."""
        policy = "ignore" if self.uncertain == "keep" else self.uncertain
        labels, mask = (t.numpy() for t in cls_targets(self.rows.labels, policy))
        return labels, mask.astype(bool), list(self.findings)

    def by_source(self) -> dict[str, "MergedDataset"]:
        """One dataset per source (rows in merged order), e.g. for the viewer:
        ``ViewerApp(list(merged.by_source().values()))`` lists each source as a split."""
        out = {}
        for key in pd.unique(self.source_of):
            part = self._subset(np.flatnonzero(self.source_of == key))
            part.spec = _replace_key(self.spec, f"{self.spec.key}/{key}")
            out[key] = part
        return out


def _replace_key(spec: DatasetSpec, key: str) -> DatasetSpec:
    from dataclasses import replace

    return replace(spec, key=key, title=f"{spec.title}: {key.split('/', 1)[1]}")


def _merged_spec(findings: tuple[str, ...], outputs: frozenset[str], kinds: dict,
                 row_unit: str = "image") -> DatasetSpec:
    return DatasetSpec(
        key=MERGED_KEY, title="Merged datasets (canonical findings)", label_cols=findings,
        extra_cols=BASE_COLUMNS[5:] + _kind_columns(kinds), outputs=outputs,
        reg_cols=kinds["reg"], grades=kinds["grade"], sides=kinds["side"],
        id_col="sample_id", root_col="source", row_unit=row_unit,
        age_col="patient_age_years", sex_col="patient_sex",
        label_map={f: ((f, "exact"),) for f in findings},
        access="the terms of each source dataset")


def _describe(ds) -> str:
    return f"{type(ds).__name__} ({ds.spec.key})"


def _check_sources(datasets: Sequence) -> None:
    if isinstance(datasets, BaseRadiologicalDataset) or not isinstance(datasets, Iterable):
        raise MergeError("merge() needs a sequence of datasets", expected="a list such as "
                         "[nih, chexpert]", found=type(datasets).__name__,
                         fix="pass merge([ds1, ds2, ...])")
    if not datasets:
        raise MergeError("merge() got no dataset", expected="at least one dataset",
                         found="an empty sequence", fix="pass merge([ds1, ds2, ...])")
    for ds in datasets:
        if not isinstance(ds, BaseRadiologicalDataset):
            raise MergeError("merge() got something that is not a radharmony dataset",
                             expected="BaseRadiologicalDataset instances",
                             found=type(ds).__name__, fix="build each source dataset first")
        if isinstance(ds, MergedDataset) or ds.spec.root_col is not None:
            raise MergeError(f"merge() got {_describe(ds)}, a table over several roots",
                             expected="single-source datasets", found="a merged dataset",
                             fix="merge its sources together instead (merged.sources)")
    first = datasets[0]
    units = {ds.spec.row_unit for ds in datasets}
    if "volume" in units and len(units) > 1:
        raise MergeError("merge(): volumes and images in one merge",
                         expected="only volume datasets, or only image datasets",
                         found=", ".join(f"{_describe(d)}: {d.spec.row_unit}" for d in datasets),
                         fix="merge the CT/MR datasets and the radiographs separately")
    # outputs a source may lack: reg / grade / side (masked), and cls when a source has no
    # labels at all (bone ages): the merged cls is derived from every source's table anyway
    free = set(KIND_OUTPUTS) | ({"cls"} if any("cls" not in d.spec.outputs for d in datasets)
                                else set())
    checks = (("output flags", lambda d: sorted(d.outputs - free),
               "build every source with the same output_* flags"),
              ("dtypes", lambda d: str(d.dtype), "pass the same dtype= to every source"),
              ("image pipelines", lambda d: d.pipeline.params() if d.user_transform is None
               else f"user transform {d.user_transform!r}",
               "build every source with the same transform= (one DefaultTransform, or one "
               "user transform object)"),
              ("cache folders", lambda d: str(d.cache_dir),
               "pass the same cache_dir= to every source (the merged dataset shares their "
               "image cache)"))
    for ds in datasets[1:]:
        for what, get, fix in checks:
            if what == "image pipelines" and ds.user_transform is not None and \
                    ds.user_transform is first.user_transform:
                continue
            if get(ds) != get(first):
                raise MergeError(f"merge(): {_describe(first)} and {_describe(ds)} were built "
                                 f"with different {what}",
                                 expected=f"the same {what} for every source",
                                 found=f"{get(first)!r} vs {get(ds)!r}", fix=fix)
    roots: dict[str, object] = {}
    for ds in datasets:
        key = ds.spec.key
        if key in roots and roots[key] != ds.base_image_dir:
            raise MergeError(f"merge(): two {key!r} datasets have different image folders",
                             expected="one base_image_dir per dataset key",
                             found=f"{roots[key]} vs {ds.base_image_dir}",
                             fix="merge splits of one dataset built on the same folder")
        roots[key] = ds.base_image_dir


def _namespaced(key: str, values: pd.Series) -> np.ndarray:
    return (key + ":" + values.astype(str)).to_numpy(dtype=object)


#: the outputs a source may lack (its samples then mask them) -> the spec field naming them
KIND_OUTPUTS = {"reg": "reg_cols", "grade": "grades", "side": "sides"}


def _merged_kinds(datasets: Sequence, wanted: tuple[str, ...]) -> dict:
    """Output -> what the merge carries of it: the regression targets of every source that
    outputs ``reg``, the graded / sided findings (among ``wanted``) of every source that
    outputs ``grade`` / ``side``, in first-seen order."""
    out = {}
    for output, field in KIND_OUTPUTS.items():
        names = [n for ds in datasets if output in ds.outputs for n in getattr(ds.spec, field)]
        out[output] = tuple(n for n in dict.fromkeys(names)
                            if output == "reg" or n in wanted)
    return out


def _kind_columns(kinds: dict) -> tuple[str, ...]:
    return kinds["reg"] + tuple(map(grade_column, kinds["grade"])) + \
        tuple(map(side_column, kinds["side"]))


def _kind_part(ds, kinds: dict) -> dict:
    """One source's columns of the merged reg / grade / side outputs: its own values where it
    has them (the canonical names are its columns' names), unknown (NaN / None) elsewhere,
    never derived from another finding or side."""
    df, n = ds.harmonized_df, len(ds.harmonized_df)
    part = {}
    for col in kinds["reg"] + tuple(map(grade_column, kinds["grade"])):
        part[col] = df[col].to_numpy(np.float64 if col in kinds["reg"] else np.float32) \
            if col in df.columns else np.full(n, np.nan)
    for col in map(side_column, kinds["side"]):
        part[col] = df[col].to_numpy(dtype=object) if col in df.columns \
            else np.full(n, None, dtype=object)
    return part


def _part(ds, wanted: tuple[str, ...], approximate: bool, joined):
    df = ds.harmonized_df
    key = ds.spec.key
    derived = derive_findings(df, ds.spec, findings=wanted, approximate=approximate)
    patients = joined.patients
    part = {"patient_id": patients, "study_id": _namespaced(key, df["study_id"]),
            "image_path": df["image_path"].to_numpy(dtype=object),
            "view_position": df["view"].to_numpy(dtype=object),
            "report": df["report"].to_numpy(dtype=object),
            "source": np.full(len(df), key, dtype=object),
            "patient_age_years": df["age_years"].to_numpy(dtype=np.float32),
            "patient_sex": df["sex"].to_numpy(dtype=object)}
    part.update({f: derived[f].to_numpy(np.float32) for f in wanted})
    part["sample_id"] = df["sample_id"].to_numpy(dtype=object)
    rep = derive_report(df, ds.spec, approximate=approximate)
    summary = (key, len(df), len(ds.spec.label_cols), int(rep["values"].sum()),
               int(rep["mapped"].sum()), int(rep["one_way"].sum()), int(rep["unknown"].sum()),
               int(derived.isna().all(axis=1).sum()) if len(wanted) else len(df), joined.joined)
    return part, summary


def merge(datasets: Sequence[BaseRadiologicalDataset], *, findings: Iterable[str] | None = None,
          approximate: bool = False, uncertain: str = "keep", verbose: bool = False
          ) -> MergedDataset:
    """One dataset over ``datasets`` in the canonical label space.

    Args:
        datasets: source datasets (splits, folds or ``filter()`` results of any registered
            dataset), built with the same output flags, ``dtype``, transform and
            ``cache_dir``; their image caches are shared (same files and pipeline give the
            same cache keys).
        findings: canonical finding ids to keep, in ``cls`` order (default: all of
            :data:`radharmony.vocabulary.FINDINGS`).
        approximate: let ``approximate`` relations transfer values (see
            :mod:`radharmony.vocabulary`).
        uncertain: what an uncertain (-1) finding is in samples: ``"keep"`` (-1 in ``cls``,
            masked), ``"ignore"`` (0, masked), ``"zeros"`` / ``"ones"`` (0 / 1, counted).
            The table keeps -1 either way.
        verbose: also print the per-source summary (it is always logged at INFO on the
            ``radharmony.merge`` logger).

    Returns:
        A :class:`MergedDataset`. Its ``harmonized_df``: ``sample_id`` (the source's),
        ``patient_id`` (``"<key>:<patient>"``; ``"<family>:<patient>"`` where two or more
        datasets of one identity family are present, see :class:`radharmony.spec.Identity`),
        ``study_id`` (``"<key>:<study>"``), ``image_path`` (under its source's root),
        ``view_position`` (the source's canonical view), ``report``, ``source``, one float
        column per finding (1 / 0 / -1 / NaN), then ``view``, ``age_years`` and ``sex``.
        ``merge_report``: one row per source with ``rows``, ``label_columns``, ``values``
        (known label cells), ``mapped`` (passed as is), ``one_way`` (transferred only one way:
        a narrower 1 or a broader 0), ``unknown`` (reached no finding; ``mapped + one_way +
        unknown == values``), ``rows_without_findings`` (rows kept with every finding NaN)
        and ``patients_joined`` (rows whose patient joined its identity family's).
        ``family_joins``: the families joined (see :class:`MergedDataset`).
        Sources built with ``output_reg`` / ``output_grade`` / ``output_side`` add their
        regression targets (by canonical name, e.g. ``bone_age_months``) and the
        ``<finding>_grade`` / ``<finding>_side`` columns of the kept findings after the
        findings: NaN / None in every other source's rows (masked in samples), so a merge
        never invents a value, a grade or a side (none passes through a narrower or broader
        relation either). The other flags must agree across sources.
    """
    check_choice("uncertain", uncertain, tuple(UNCERTAIN))
    wanted = check_findings(findings, where="merge(findings=)")
    if isinstance(datasets, Iterable) and not isinstance(datasets, BaseRadiologicalDataset):
        datasets = list(datasets)
    _check_sources(datasets)
    for ds in datasets:
        check_kinds(ds.spec)
    joins, family_joins, unlinked = join_patients([(ds.harmonized_df, ds.spec)
                                                   for ds in datasets])
    for key, family, others, note in unlinked:
        warnings.warn(unlinked_message(key, family, others, note), UserWarning, stacklevel=2)
    parts, summaries = [], []
    kinds = _merged_kinds(datasets, wanted)
    for ds, joined in zip(datasets, joins):
        part, summary = _part(ds, wanted, approximate, joined)
        part.update(_kind_part(ds, kinds))
        parts.append(part)
        summaries.append(summary)
    ids = np.concatenate([p["sample_id"] for p in parts])
    dup = pd.Index(ids).duplicated(keep=False)
    if dup.any():
        owners = np.concatenate([[i] * len(p["sample_id"]) for i, p in enumerate(parts)]) \
            if len(parts) < 64 else None
        who = sorted({_describe(datasets[i]) for i in owners[dup]}) if owners is not None else []
        raise MergeError("merge(): sample_ids repeat across the sources",
                         expected="every sample_id once",
                         found=f"{int(dup.sum())} rows share ids such as {ids[dup][0]!r}"
                               + (f" (in {', '.join(who)})" if who else ""),
                         fix="pass each dataset once, and disjoint splits of one dataset "
                             "(e.g. the train and val of one get_datasets call)")
    columns = list(BASE_COLUMNS) + list(wanted) + list(_kind_columns(kinds)) + ["sample_id"]
    table = pd.DataFrame({c: pd.Series(np.concatenate([p[c] for p in parts]), copy=False,
                                       dtype=object if parts[0][c].dtype == object else None)
                          for c in columns})  # object, not inferred (slower) string columns
    report = pd.DataFrame(summaries, columns=list(REPORT_COLUMNS))
    log.info("merged %d sources, %d rows:\n%s", len(datasets), len(table),
             report.to_string(index=False))
    if len(family_joins):
        log.info("patients joined across identity families:\n%s",
                 family_joins.to_string(index=False))
    if verbose:
        print(report.to_string(index=False))
    first = datasets[0]
    outputs = frozenset({"cls"} | ({"report"} & set(first.outputs))
                        | {k for k, names in kinds.items() if names})
    dropped = set().union(*(ds.outputs for ds in datasets)) - outputs
    if dropped:
        warnings.warn(f"merge(): the sources' outputs {sorted(dropped)} are per-dataset and "
                      "not merged; merged samples carry img, sample_id, source, cls, cls_mask"
                      + (" and report" if "report" in outputs else ""),
                      UnsupportedOutputWarning, stacklevel=2)
    roots = {ds.spec.key: ds.base_image_dir for ds in datasets}
    unit = "volume" if volume_sources(datasets) else "image"
    return MergedDataset(table, spec=_merged_spec(wanted, outputs, kinds, unit), image_roots=roots,
                         findings=wanted, uncertain=uncertain, merge_report=report,
                         sources=tuple(datasets), like=first, family_joins=family_joins)


__all__ = ["MERGED_KEY", "MergeError", "MergedDataset", "UNCERTAIN", "merge"]
