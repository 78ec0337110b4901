"""The audit as one self-contained HTML page: tables, matplotlib plots and thumbnails inlined
as base64 PNGs, no script and no external resource.

Sections (``<section id=...>``): ``summary`` (images, patients, files per source and split),
``labels`` (canonical-finding prevalence; unknown shown as unknown), ``demographics`` (age
and sex), ``views``, ``duplicates`` (pairs side by side), ``flags`` (flagged images) and
``families`` (identity-family joins). Every count cell carries ``data-key`` (e.g.
``counts|nih_cxr14|train|images``) so a test can read the numbers back.
"""

from __future__ import annotations

import base64
import html
import io
import os

import cv2
import numpy as np
import pandas as pd

from ..imaging.read import read_image

STYLE = """body{font-family:sans-serif;margin:1.5em;max-width:1300px;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-top:.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;
font-size:.85em;text-align:right}th{background:#f2f2f2}td.t{text-align:left}
.pair,.flag{display:inline-block;margin:6px;padding:4px;border:1px solid #ddd;
font-size:.75em;vertical-align:top;max-width:260px;word-break:break-all}
.pair img,.flag img{margin:2px;background:#000}.warn{color:#a40}img.plot{max-width:100%}"""
THUMB = 110
NONE = "(none)"


def _e(v) -> str:
    return html.escape("" if v is None else str(v))


def _png(fig) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buf = io.BytesIO()
    FigureCanvasAgg(fig)
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    return '<img class="plot" alt="plot" src="data:image/png;base64,' + \
        base64.b64encode(buf.getvalue()).decode() + '">'


def _figure(w: float = 7, h: float = 3):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h))


def _stacked(ax, table: pd.DataFrame, title: str) -> None:
    """Stacked bars: one per row of ``table``, one colour per column (no pyplot)."""
    bottom = np.zeros(len(table))
    for col in table.columns:
        ax.bar([str(i) for i in table.index], table[col].to_numpy(), bottom=bottom,
               label=str(col))
        bottom = bottom + table[col].to_numpy()
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)


def is_volume_path(path: str) -> bool:
    """Whether ``path`` is a volume (NIfTI, NumPy, or a folder: a DICOM series)."""
    return str(path).lower().endswith((".nii", ".nii.gz", ".npy", ".npz")) or os.path.isdir(path)


def thumbnail(path: str) -> str:
    """An ``<img>`` of the image at ``path`` (percentile-windowed, long side ``THUMB``), or a
    note when it cannot be read."""
    try:
        if is_volume_path(path):  # a volume: its middle axial slice
            from ..volumes import read_volume

            volume = read_volume(path, check=False).array
            arr = volume[volume.shape[0] // 2]
        else:
            arr, _ = read_image(path, min_side=THUMB)
    except Exception as exc:  # noqa: BLE001 -- a page shows what it cannot draw
        return f'<span class="warn">unreadable: {_e(type(exc).__name__)}</span>'
    a = arr.astype(np.float32)
    lo, hi = np.percentile(a, (0.5, 99.5))
    a = np.clip((a - lo) / (hi - lo if hi > lo else 1.0) * 255, 0, 255).astype(np.uint8)
    s = THUMB / max(a.shape)
    a = cv2.resize(a, (max(1, round(a.shape[1] * s)), max(1, round(a.shape[0] * s))),
                   interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".png", a)
    return f'<img alt="thumbnail" width="{a.shape[1]}" height="{a.shape[0]}" ' \
           f'src="data:image/png;base64,{base64.b64encode(buf.tobytes()).decode()}">'


def _table(df: pd.DataFrame, key: str | None = None, ids: tuple[str, ...] = ()) -> str:
    """A table; with ``key``, count cells get ``data-key="key|<ids values>|<column>"``."""
    head = "".join(f"<th>{_e(c)}</th>" for c in df.columns)
    body = []
    for _, row in df.iterrows():
        cells = []
        for c in df.columns:
            v = row[c]
            text = f"{v:,}" if isinstance(v, (int, np.integer)) else _e(v)
            cls = ' class="t"' if not isinstance(v, (int, float, np.number)) else ""
            dk = ""
            if key and c not in ids:
                dk = f' data-key="{_e("|".join([key, *(str(row[i]) for i in ids), str(c)]))}"'
            cells.append(f"<td{cls}{dk}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _counts(images: pd.DataFrame) -> pd.DataFrame:
    g = images.assign(split=images["split"].fillna(NONE)).groupby(["source", "split"],
                                                                   sort=False)
    return pd.DataFrame({"images": g.size(), "patients": g["patient_id"].nunique(),
                         "files": g["path"].nunique(),
                         "flagged": g["flags"].agg(lambda f: int((f != "").sum()))}
                        ).reset_index()


def _summary(r) -> str:
    counts = _counts(r.images)
    fig = _figure(7, 0.4 + 0.35 * len(counts))
    ax = fig.subplots()
    labels = [f"{s} / {p}" for s, p in zip(counts["source"], counts["split"])]
    ax.barh(labels, counts["images"], color="#4a7ab5")
    ax.set_xlabel("images")
    ax.invert_yaxis()
    s = r.summary()
    line = (f"<p>{s['images']:,} images ({s['files']:,} files), "
            f"{r.images['patient_id'].nunique():,} patients.</p>")
    return line + _table(counts, "counts", ("source", "split")) + _png(fig)


def _labels(r) -> str:
    lab = r.labels
    if lab.empty:
        return "<p>No source has canonical findings.</p>"
    per = lab.groupby(["source", "finding"], sort=False)[
        ["positive", "negative", "uncertain", "unknown"]].sum().reset_index()
    parts = []
    for src, t in per.groupby("source", sort=False):
        t = t[t[["positive", "negative", "uncertain"]].sum(axis=1) > 0]
        if t.empty:
            continue
        fig = _figure(7, 0.4 + 0.22 * len(t))
        ax = fig.subplots()
        left = np.zeros(len(t))
        for col, colour in (("positive", "#c0392b"), ("negative", "#27ae60"),
                            ("uncertain", "#f39c12"), ("unknown", "#bbbbbb")):
            ax.barh(t["finding"], t[col], left=left, color=colour, label=col)
            left = left + t[col].to_numpy()
        ax.invert_yaxis()
        ax.legend(fontsize=7, ncol=4, loc="lower right")
        ax.set_title(f"{src}: canonical findings (grey: unknown)", fontsize=9)
        parts.append(_png(fig))
    return ("".join(parts) + "<details><summary>the counts per source, split and finding"
            "</summary>" + _table(lab, "labels", ("source", "split", "finding")) + "</details>")


def _demographics(r) -> str:
    im = r.images
    fig = _figure(9, 3)
    ax1, ax2 = fig.subplots(1, 2)
    for src, t in im.groupby("source", sort=False):
        ages = t["age_years"].dropna()
        if len(ages):
            ax1.hist(ages, bins=np.arange(0, 105, 5), histtype="step", label=src)
    ax1.set_xlabel("age (years)")
    if ax1.get_legend_handles_labels()[0]:  # no source with ages (e.g. volumes): no legend
        ax1.legend(fontsize=7)
    sex = pd.crosstab(im["source"], im["sex"].fillna("unknown"))
    _stacked(ax2, sex, "sex")
    ages = im.groupby("source", sort=False)["age_years"].agg(["count", "median", "min", "max"])
    ages = ages.rename(columns={"count": "with_age"}).reset_index()
    ages["with_age"] = ages["with_age"].astype(int)
    sex_t = sex.reset_index()
    sex_t.columns = [str(c) for c in sex_t.columns]
    return (_table(ages.round(1), "age", ("source",)) + _table(sex_t, "sex", ("source",))
            + _png(fig))


def _views(r) -> str:
    v = pd.crosstab(r.images["source"], r.images["view"].fillna("unknown"))
    fig = _figure(7, 2.8)
    _stacked(fig.subplots(), v, "views")
    t = v.reset_index()
    t.columns = [str(c) for c in t.columns]
    return _table(t, "views", ("source",)) + _png(fig)


def _duplicates(r, n: int) -> str:
    p = r.pairs
    s = r.summary()
    out = [f"<p>{s['pairs']['exact']:,} exact pairs (same bytes), {s['pairs']['near']:,} near "
           f"pairs (perceptual hash within {r.max_distance} of 256 bits); "
           f"<b>{s['straddling_split']:,}</b> straddle splits and "
           f"<b>{s['straddling_patient']:,}</b> straddle patients.</p>"]
    if p.empty:
        return out[0]
    by = p.groupby(["kind", "source_a", "source_b"]).agg(
        pairs=("a", "size"), straddle_split=("straddles_split", "sum"),
        straddle_patient=("straddles_patient", "sum")).reset_index()
    for c in ("pairs", "straddle_split", "straddle_patient"):
        by[c] = by[c].astype(int)
    out.append(_table(by, "pairs", ("kind", "source_a", "source_b")))
    path = dict(zip(r.images["sample_id"], r.images["path"]))
    shown = p.sort_values(["straddles_split", "straddles_patient", "kind"],
                          ascending=[False, False, True], kind="stable").head(n)
    for _, row in shown.iterrows():
        tags = [t for t, on in (("straddles splits", row["straddles_split"]),
                                ("straddles patients", row["straddles_patient"])) if on]
        out.append(f'<div class="pair" data-kind="{_e(row["kind"])}">'
                   f'{thumbnail(path[row["a"]])}{thumbnail(path[row["b"]])}<br>'
                   f'{_e(row["kind"])} (d={int(row["distance"])}) '
                   f'<span class="warn">{_e(", ".join(tags))}</span><br>{_e(row["a"])} '
                   f'[{_e(row["split_a"])}]<br>{_e(row["b"])} [{_e(row["split_b"])}]</div>')
    if len(p) > n:
        out.append(f"<p>... and {len(p) - n:,} more pairs (AuditReport.pairs).</p>")
    return "".join(out)


def _flags(r, n: int) -> str:
    f = r.flags
    if f.empty:
        return "<p>No image flagged.</p>"
    t = f.merge(r.images[["sample_id", "source"]], on="sample_id").groupby(
        ["source", "flag"]).size().rename("images").reset_index()
    out = [_table(t, "flags", ("source", "flag")),
           "<p>Nothing is dropped: pass AuditReport.exclusions(flags=...) to a dataset's "
           "exclude= to leave images out.</p>"]
    path = dict(zip(r.images["sample_id"], r.images["path"]))
    for _, row in f.head(n).iterrows():
        out.append(f'<div class="flag" data-flag="{_e(row["flag"])}">'
                   f'{thumbnail(path[row["sample_id"]])}<br><b>{_e(row["flag"])}</b>: '
                   f'{_e(row["detail"])}<br>{_e(row["sample_id"])}</div>')
    if len(f) > n:
        out.append(f"<p>... and {len(f) - n:,} more flags (AuditReport.flags).</p>")
    return "".join(out)


def _families(r) -> str:
    if r.family_joins.empty:
        return "<p>No identity family had two or more datasets here: no patients joined.</p>"
    return _table(r.family_joins, "families", ("family", "datasets"))


def render(report, *, thumbnails: int = 24) -> str:
    """The page for an :class:`~radharmony.audit.AuditReport`."""
    sections = (("summary", "Counts per source and split", _summary(report)),
                ("labels", "Label prevalence (canonical findings)", _labels(report)),
                ("demographics", "Age and sex", _demographics(report)),
                ("views", "Views", _views(report)),
                ("duplicates", "Duplicate images", _duplicates(report, thumbnails)),
                ("flags", "Flagged images", _flags(report, thumbnails)),
                ("families", "Identity families joined", _families(report)))
    body = "".join(f'<section id="{sid}"><h2>{_e(title)}</h2>{content}</section>'
                   for sid, title, content in sections)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>radharmony '
            f'audit</title><style>{STYLE}</style></head><body><h1>radharmony audit</h1>'
            f"{body}</body></html>")


__all__ = ["render", "thumbnail"]
