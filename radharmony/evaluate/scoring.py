"""The metrics table of one probe run: per label and metric, the point value, its bootstrap
interval over the test side's patients, and the macro average over the labels."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .metrics import METRICS, choose_threshold, interval, weighted_panel
from .sides import _Side, _subsample

COLUMNS = ("label", "metric", "value", "ci_low", "ci_high", "n_pos", "n_neg", "n_patients",
           "reason")


def _level(fit, train: _Side, ev: _Side, splits, n_train, seed, threshold, boot, ci):
    n_ev, n_lab = len(ev.ids), len(train.names)
    score = np.full((n_ev, n_lab), np.nan)
    thr = np.full((n_ev, n_lab), np.nan)
    fold = np.full(n_ev, -1)
    reasons: list[str | None] = [None] * n_lab
    for tr_rows, te_rows, k in splits:
        fold[te_rows] = k
        tr_rows = _subsample(train.groups, tr_rows, n_train, seed)
        where = "" if k < 0 else f"fold {k}: "
        for j in range(n_lab):
            if reasons[j] is not None:
                continue
            tr = tr_rows[train.mask[tr_rows, j]]
            te = te_rows[ev.mask[te_rows, j]]
            y_tr = train.y[tr, j]
            pos, neg = int(y_tr.sum()), int(len(y_tr) - y_tr.sum())
            if pos < 2 or neg < 2:
                reasons[j] = f"{where}training side has {pos} positive(s) and {neg} " \
                             "negative(s); at least 2 of each are needed"
                continue
            s_te, s_tr = fit(train.x[tr], y_tr, ev.x[te])
            score[te, j] = s_te
            thr[te, j] = choose_threshold(y_tr, s_tr, threshold)
    rows, pred_parts = [], []
    panels, valid = [], []
    for j, name in enumerate(train.names):
        use = np.flatnonzero(ev.mask[:, j])
        y = ev.y[use, j]
        pos, neg = int(y.sum()), int(len(y) - y.sum())
        npat = len(np.unique(ev.groups[use]))
        if reasons[j] is None and (pos < 2 or neg < 2):
            reasons[j] = f"test side has {pos} positive(s) and {neg} negative(s); at least " \
                         "2 of each are needed"
        if reasons[j] is not None:
            for m in METRICS + ("threshold",):
                rows.append((name, m, np.nan, np.nan, np.nan, pos, neg, npat, reasons[j]))
            panels.append(None)
            continue
        s, t = score[use, j], thr[use, j]
        p = (s >= t).astype(np.float64)
        point = weighted_panel(y, s, p, np.ones((1, len(use))))[0]
        samples = np.full((boot.n_bootstrap, len(METRICS)), np.nan)
        panels.append((use, y, s, p, point, samples))
        pred_parts.append(pd.DataFrame({"label": name, "sample_id": ev.ids[use],
                                        "group": ev.groups[use], "fold": fold[use],
                                        "target": y.astype(np.int8), "score": s,
                                        "pred": p.astype(np.int8), "threshold": t}))
        valid.append(j)
    # one pass over the resamples for every label: the same patients for all of them
    for sl, w in boot.chunks():
        for panel in panels:
            if panel is not None:
                use, y, s, p, _, samples = panel
                samples[sl] = weighted_panel(y, s, p, w[:, use])
    for j, name in enumerate(train.names):
        panel = panels[j]
        if panel is None:
            continue
        use, y, s, p, point, samples = panel
        lo, hi = interval(samples, ci)
        pos, neg = int(y.sum()), int(len(y) - y.sum())
        npat = len(np.unique(ev.groups[use]))
        for i, m in enumerate(METRICS):
            rows.append((name, m, point[i], lo[i], hi[i], pos, neg, npat, None))
        rows.append((name, "threshold", float(np.nanmean(thr[use, j])), np.nan, np.nan, pos,
                     neg, npat, None))
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    order = {n: i for i, n in enumerate(train.names)}
    table = table.sort_values("label", key=lambda c: c.map(order), kind="stable")
    macro = []
    ok = [panels[j] for j in valid]
    for i, m in enumerate(METRICS):
        if ok:
            points = np.array([pl[4][i] for pl in ok])
            samples = np.stack([pl[5][:, i] for pl in ok], axis=1)
            with np.errstate(invalid="ignore"), _quiet():
                boot_mean = np.nanmean(samples, axis=1) if boot.n_bootstrap else samples[:, 0]
            lo, hi = interval(boot_mean[:, None], ci)
            value = float(np.nanmean(points)) if np.isfinite(points).any() else np.nan
            macro.append(("macro", m, value, lo[0], hi[0], np.nan, np.nan,
                          len(np.unique(ev.groups)), f"mean over {len(ok)} of {n_lab} labels"))
        else:
            macro.append(("macro", m, np.nan, np.nan, np.nan, np.nan, np.nan,
                          len(np.unique(ev.groups)), "no label could be measured"))
    table = pd.concat([table, pd.DataFrame(macro, columns=list(COLUMNS))], ignore_index=True)
    pred = pd.concat(pred_parts, ignore_index=True) if pred_parts else pd.DataFrame(
        columns=["label", "sample_id", "group", "fold", "target", "score", "pred", "threshold"])
    return table, pred


class _quiet:
    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._w.__exit__(*exc)
