"""``radharmony.audit``: duplicates, image sanity and the numbers of a dataset or merge.

:func:`audit` takes a dataset, a merged dataset, a list of them, or a mapping ``split name ->
dataset`` (e.g. the train and val sides of ``get_datasets``), reads every image file once
(:mod:`radharmony.audit.scan`) and returns an :class:`AuditReport`: one row per sample
(``images``), the duplicate pairs (``pairs``: ``exact`` = same bytes, ``near`` = perceptual
hashes within ``max_distance`` bits; volumes: same voxels and geometry, and world-space slab
hashes, :mod:`radharmony.audit.volumes`) with whether each straddles splits or patients, the
flagged images (``flags``), canonical-finding prevalence (``labels``) and the identity-family
joins behind the patient ids (``family_joins``). Nothing is dropped: :meth:`AuditReport.
exclusions` and :meth:`AuditReport.write_exclusions` give the sample ids a user may pass to a
dataset's ``exclude=``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from ..data.dataset import BaseRadiologicalDataset
from ..errors import RadHarmonyError, shorten
from ..identity import JOIN_COLUMNS, join_patients
from ..vocabulary import FINDINGS, derive_findings
from .hashing import MAX_DISTANCE, exact_groups, near_pairs
from .sanity import SanityLimits
from .scan import scan_files, scan_volume_files

PAIR_COLUMNS = ("a", "b", "kind", "distance", "same_file", "source_a", "source_b", "split_a",
                "split_b", "patient_a", "patient_b", "straddles_split", "straddles_patient")
IMAGE_COLUMNS = ("sample_id", "source", "split", "patient_id", "view", "age_years", "sex",
                 "path", "digest", "phash", "height", "width", "flags")
LABEL_COLUMNS = ("source", "split", "finding", "positive", "negative", "uncertain", "unknown")
#: an exact-duplicate group larger than this lists its pairs against its first row only
ALL_PAIRS_UP_TO = 64
EXCLUDE_HEADER = "# radharmony audit exclusions: one sample_id a line"


class AuditError(RadHarmonyError, ValueError):
    """Something :func:`audit` cannot audit."""


@dataclass
class AuditReport:
    """What :func:`audit` found (see the module docs); ``to_html`` draws it."""

    images: pd.DataFrame
    pairs: pd.DataFrame
    flags: pd.DataFrame
    labels: pd.DataFrame
    family_joins: pd.DataFrame
    max_distance: int = MAX_DISTANCE
    limits: SanityLimits = field(default_factory=SanityLimits)

    def exclusions(self, *, kinds: Iterable[str] = ("exact", "near"),
                   straddling_only: bool = False, flags: Iterable[str] = ()) -> list[str]:
        """Sample ids to leave out: of every group of duplicates (pairs of ``kinds``, joined
        transitively) all but the first row in audit order; with ``straddling_only``, only
        groups with a pair that straddles splits or patients. Plus every image carrying one of
        ``flags`` (e.g. ``("unreadable", "blank")``). Sorted, each once."""
        kinds = set(kinds)
        p = self.pairs[self.pairs["kind"].isin(kinds)]
        pos = {s: k for k, s in enumerate(self.images["sample_id"])}
        parent = list(range(len(self.images)))

        def root(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for a, b in zip(p["a"], p["b"]):
            ra, rb = root(pos[a]), root(pos[b])
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
        out = set()
        straddling = {root(pos[a]) for a, s, t in zip(p["a"], p["straddles_split"],
                                                      p["straddles_patient"]) if s or t}
        ids = self.images["sample_id"].tolist()
        for a, b in zip(p["a"], p["b"]):
            for x in (pos[a], pos[b]):
                r = root(x)
                if x != r and (not straddling_only or r in straddling):
                    out.add(ids[x])
        wanted = set(flags)
        if wanted:
            out.update(self.flags.loc[self.flags["flag"].isin(wanted), "sample_id"])
        return sorted(out)

    def write_exclusions(self, path: str | os.PathLike, **kwargs) -> Path:
        """Write :meth:`exclusions` (same arguments) to ``path``, one sample id a line, for a
        dataset's ``exclude=``; returns the path."""
        ids = self.exclusions(**kwargs)
        path = Path(path)
        path.write_text(EXCLUDE_HEADER + f" ({len(ids)} ids; {kwargs or 'defaults'})\n"
                        + "".join(i + "\n" for i in ids), encoding="utf-8")
        return path

    def summary(self) -> dict:
        """Counts: images, files, pairs by kind, straddling pairs, flags by kind."""
        p = self.pairs
        return {"images": int(len(self.images)),
                "files": int(self.images["path"].nunique()),
                "pairs": {k: int((p["kind"] == k).sum()) for k in ("exact", "near")},
                "straddling_split": int(p["straddles_split"].sum()),
                "straddling_patient": int(p["straddles_patient"].sum()),
                "flags": {k: int(v) for k, v in self.flags["flag"].value_counts().items()},
                "families_joined": self.family_joins["family"].tolist()}

    def to_html(self, path: str | os.PathLike | None = None, *, thumbnails: int = 24) -> str:
        """The self-contained HTML page (see :mod:`radharmony.audit.page`); written to
        ``path`` when given. ``thumbnails``: how many pairs and flagged images get pictures."""
        from .page import render

        html = render(self, thumbnails=thumbnails)
        if path is not None:
            Path(path).write_text(html, encoding="utf-8")
        return html


# -- what is audited ------------------------------------------------------------------------------
def _members(obj) -> list[tuple[str | None, BaseRadiologicalDataset]]:
    if isinstance(obj, BaseRadiologicalDataset):
        return [(None, obj)]
    if isinstance(obj, Mapping):
        items = [(str(k), v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple)):
        items = [(None, v) for v in obj]
    else:
        items = []
    bad = [type(v).__name__ for _, v in items if not isinstance(v, BaseRadiologicalDataset)]
    if not items or bad:
        raise AuditError("audit() needs radharmony datasets", expected="a dataset, a merged "
                         "dataset, a list of them or {split name: dataset}",
                         found=type(obj).__name__ if not items else f"items of type {bad[:3]}",
                         fix="pass e.g. radharmony.audit(merged) or audit({'train': tr, "
                             "'val': va})")
    return items


def _split_of(ds, df: pd.DataFrame, name: str | None) -> np.ndarray:
    if name is not None:
        return np.full(len(df), name, dtype=object)
    if "split" in df.columns:
        return df["split"].astype(object).where(df["split"].notna(), None).to_numpy(object)
    sources = getattr(ds, "sources", None)
    if sources:  # a merge: each source's own split, by sample id
        lookup = {}
        for src in sources:
            t = src.harmonized_df
            if "split" in t.columns:
                lookup.update(zip(t["sample_id"], t["split"]))
        return np.array([lookup.get(s) if isinstance(lookup.get(s), str) else None
                         for s in df["sample_id"]], dtype=object)
    return np.full(len(df), None, dtype=object)


def _labels(ds, df: pd.DataFrame, split: np.ndarray) -> pd.DataFrame:
    sources = df["source"].to_numpy(object) if "source" in df.columns and \
        getattr(ds, "findings", None) is not None else np.full(len(df), ds.spec.key, object)
    if getattr(ds, "findings", None) is not None:
        derived = df[list(ds.findings)].astype(float)
    else:
        derived = derive_findings(df, ds.spec, findings=FINDINGS)
    v = derived.to_numpy(np.float64)
    keys = pd.DataFrame({"source": sources, "split": pd.Series(split, dtype=object)
                         .fillna("(none)").to_numpy(object)})
    known = {src: ~np.isnan(v[idx]).all(axis=0)  # findings a source speaks to anywhere
             for src, idx in keys.groupby("source", sort=False).indices.items()}
    rows = []
    for (src, sp), idx in keys.groupby(["source", "split"], sort=False).indices.items():
        part = v[idx]
        for k, f in enumerate(derived.columns):
            col = part[:, k]
            if not known[src][k]:
                continue
            rows.append((src, sp, f, int((col == 1).sum()), int((col == 0).sum()),
                         int((col == -1).sum()), int(np.isnan(col).sum())))
    return pd.DataFrame(rows, columns=list(LABEL_COLUMNS))


def audit(datasets, *, max_distance: int = MAX_DISTANCE, limits: SanityLimits | None = None,
          workers: int | None = None, progress: bool = True) -> AuditReport:
    """Audit ``datasets`` (see the module docs): every image file is read once on ``workers``
    threads (default: every core). ``max_distance``: near-duplicate threshold in bits of
    256. ``limits``: the sanity thresholds (:class:`~radharmony.audit.sanity.SanityLimits`)."""
    limits = limits or SanityLimits()
    members = _members(datasets)
    plain = [(ds.harmonized_df, ds.spec) for _, ds in members if ds.spec.root_col is None]
    joins, family_joins, _ = join_patients(plain) if plain else ([], pd.DataFrame(
        columns=list(JOIN_COLUMNS)), [])
    joins = iter(joins)
    frames, label_parts, paths, rows = [], [], [], []
    for name, ds in members:
        df = ds.harmonized_df
        if ds.spec.root_col is None:
            patients, source = next(joins).patients, np.full(len(df), ds.spec.key, object)
        else:
            patients, source = df["patient_id"].to_numpy(object), df["source"].to_numpy(object)
            fj = getattr(ds, "family_joins", None)
            if fj is not None and len(fj):
                family_joins = pd.concat([family_joins, fj], ignore_index=True) \
                    .drop_duplicates("family")
        split = _split_of(ds, df, name)
        rows += [(ds, i) for i in range(len(df))]
        for i in range(len(df)):
            try:
                paths.append(str(ds.image_file(i)))
            except RadHarmonyError as exc:  # an unsafe path: audited as unreadable
                paths.append("\0" + shorten(exc.what, 200))
        frames.append(pd.DataFrame({"sample_id": df["sample_id"].to_numpy(object),
                                    "source": source, "split": split, "patient_id": patients,
                                    "view": df["view"].to_numpy(object),
                                    "age_years": df["age_years"].to_numpy(np.float64),
                                    "sex": df["sex"].to_numpy(object)}))
        label_parts.append(_labels(ds, df, split))
    images = pd.concat(frames, ignore_index=True)
    images["path"] = paths
    codes, files = pd.factorize(pd.Series(paths, dtype=object))
    first_view = images.groupby(codes)["view"].first().reindex(range(len(files)))
    volume = np.zeros(len(files), bool)  # files of volume datasets: fingerprinted as volumes
    volume[codes[[getattr(ds.spec, "row_unit", "image") == "volume" for ds, _ in rows]]] = True
    scanned = scan_files([f if not f.startswith("\0") else "" for f in files],
                         first_view.tolist(), limits=limits, workers=workers, progress=progress,
                         skip=volume)
    first_row = pd.Series(np.arange(len(codes))).groupby(codes).first()
    volume_near = scan_volume_files(scanned, [rows[first_row[k]] if volume[k] else None
                                              for k in range(len(files))],
                                    max_distance=max_distance, progress=progress)
    for k, f in enumerate(files):
        if f.startswith("\0"):
            scanned.flags[k] = [("unreadable", f[1:])]
            scanned.digest[k], scanned.ok[k] = None, False
    images["digest"] = scanned.digest[codes]
    images["phash"] = [h.tobytes().hex() if ok else None
                       for h, ok in zip(scanned.hashes[codes], scanned.ok[codes])]
    images["height"], images["width"] = scanned.height[codes], scanned.width[codes]
    images["flags"] = [",".join(f for f, _ in scanned.flags[c]) for c in codes]
    flags = pd.DataFrame([(images["sample_id"].iat[r], f, d) for r, c in enumerate(codes)
                          for f, d in scanned.flags[c]], columns=["sample_id", "flag", "detail"])
    pairs = _pairs(images, codes, scanned, max_distance, volume_near)
    return AuditReport(images=images, pairs=pairs, flags=flags,
                       labels=pd.concat(label_parts, ignore_index=True),
                       family_joins=family_joins.reset_index(drop=True),
                       max_distance=max_distance, limits=limits)


def _pairs(images: pd.DataFrame, codes: np.ndarray, scanned, max_distance: int,
           volume_near=()) -> pd.DataFrame:
    rows_of = pd.Series(np.arange(len(codes))).groupby(codes).apply(np.asarray)
    found: list[tuple[int, int, str, int, bool]] = []
    for k, rows in rows_of.items():  # rows naming one file (a question-level table: many)
        links = [(rows[x], rows[y]) for x in range(len(rows)) for y in range(x + 1, len(rows))] \
            if len(rows) <= ALL_PAIRS_UP_TO else [(rows[0], r) for r in rows[1:]]
        found += [(a, b, "exact", 0, True) for a, b in links]
    for group in exact_groups(pd.Series(scanned.digest, dtype=object)):  # files, same bytes
        links = [(group[x], group[y]) for x in range(len(group)) for y in range(x + 1,
                                                                              len(group))] \
            if len(group) <= ALL_PAIRS_UP_TO else [(group[0], g) for g in group[1:]]
        for fa, fb in links:
            found += [(a, b, "exact", 0, False) for a in rows_of[fa] for b in rows_of[fb]]
    ok = np.flatnonzero(scanned.ok)
    i, j, d = near_pairs(scanned.hashes[ok], max_distance=max_distance)
    for fa, fb, dist in [*zip(ok[i], ok[j], d), *volume_near]:
        if scanned.digest[fa] == scanned.digest[fb]:
            continue  # same bytes: listed as exact
        found += [(a, b, "near", int(dist), False) for a in rows_of[fa] for b in rows_of[fb]]
    if not found:
        return pd.DataFrame(columns=list(PAIR_COLUMNS))
    a, b, kind, dist, same = (np.array(c) for c in zip(*found))
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    col = images.__getitem__
    out = pd.DataFrame({"a": col("sample_id").to_numpy(object)[lo],
                        "b": col("sample_id").to_numpy(object)[hi], "kind": kind,
                        "distance": dist.astype(np.int64), "same_file": same.astype(bool)})
    for c in ("source", "split", "patient_id"):
        v = col(c).to_numpy(object)
        name = "patient" if c == "patient_id" else c
        out[f"{name}_a"], out[f"{name}_b"] = v[lo], v[hi]
    sa, sb = out["split_a"], out["split_b"]
    out["straddles_split"] = (sa.notna() & sb.notna() & (sa != sb)).to_numpy(bool)
    out["straddles_patient"] = (out["patient_a"] != out["patient_b"]).to_numpy(bool)
    out = out[out["a"] != out["b"]]
    return out.sort_values(["kind", "a", "b"], kind="stable").reset_index(drop=True)


__all__ = ["AuditError", "AuditReport", "audit"]
