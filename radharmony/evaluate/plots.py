"""Figures of probe results: ROC curves per label and label-efficiency curves."""

from __future__ import annotations

import numpy as np


def _figure(n_panels: int, cols: int, size: float):
    from matplotlib.figure import Figure

    cols = max(1, min(cols, n_panels))
    rows = -(-n_panels // cols)
    fig = Figure(figsize=(size * cols, size * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes


def roc_points(target: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(fpr, tpr)`` at every distinct score threshold, from (0, 0) to (1, 1)."""
    order = np.argsort(-score, kind="stable")
    s, y = score[order], np.asarray(target, bool)[order]
    last = np.r_[np.flatnonzero(np.diff(s) != 0), len(s) - 1]
    tp, fp = np.cumsum(y)[last], np.cumsum(~y)[last]
    return np.r_[0, fp / max(fp[-1], 1)], np.r_[0, tp / max(tp[-1], 1)]


def plot_roc(result, *, labels=None, n_train=None, cols: int = 4, size: float = 3.0):
    """One ROC panel per label with its AUROC and interval; returns a matplotlib Figure.

    ``n_train`` picks one training size when the result has several (default: the largest).
    Labels without a value are drawn as an empty panel naming the reason.
    """
    pred, met = result.predictions, result.metrics
    if "n_train" in met.columns:
        if n_train is None:  # -1 stands for "all patients"
            level = -1 if (met["n_train"] == -1).any() else met["n_train"].max()
        else:
            level = n_train
        pred, met = pred[pred["n_train"] == level], met[met["n_train"] == level]
    names = [n for n in met["label"].unique() if n != "macro"] if labels is None else list(labels)
    fig, axes = _figure(len(names), cols, size)
    for ax, name in zip(axes, names):
        auc = met[(met["label"] == name) & (met["metric"] == "auroc")].iloc[0]
        ax.plot([0, 1], [0, 1], ls=":", c="0.6", lw=1)
        sel = pred[pred["label"] == name]
        if np.isfinite(auc["value"]) and len(sel):
            fpr, tpr = roc_points(sel["target"].to_numpy(), sel["score"].to_numpy())
            ax.plot(fpr, tpr, lw=1.5)
            ci = "" if not np.isfinite(auc["ci_low"]) else \
                f" [{auc['ci_low']:.3f}, {auc['ci_high']:.3f}]"
            ax.set_title(f"{name}\nAUROC {auc['value']:.3f}{ci}", fontsize=9)
        else:
            ax.set_title(f"{name}\n(no value)", fontsize=9)
            ax.text(0.5, 0.5, str(auc["reason"])[:80], ha="center", va="center", fontsize=6,
                    wrap=True, transform=ax.transAxes)
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="1 - specificity", ylabel="sensitivity")
        ax.set_aspect("equal")
    return fig


def plot_label_efficiency(result, *, metric: str = "auroc", labels=None, macro: bool = True,
                          size: float = 5.0):
    """``metric`` against the number of training patients, a line (and interval band) per
    label plus the macro average; returns a matplotlib Figure. Needs a result computed with
    a list of ``n_train`` values."""
    from matplotlib.figure import Figure

    from ..errors import RadHarmonyError

    met = result.metrics
    if "n_train" not in met.columns:
        raise RadHarmonyError("This probe result has one training size",
                              expected="a result of a probe run with n_train=[...]",
                              found="no n_train column", fix="run the probe with e.g. "
                              "n_train=[10, 100, 1000]")
    met = met[met["metric"] == metric]
    names = [n for n in met["label"].unique() if n != "macro"] if labels is None else list(labels)
    if macro:
        names = names + ["macro"]
    fig = Figure(figsize=(size * 1.4, size), layout="constrained")
    ax = fig.subplots()
    everyone = result.settings.get("train_patients") or max(met["n_train"].max(), 1) * 2
    for name in names:
        sel = met[met["label"] == name]
        n = np.array(sel["n_train"], dtype=float)
        n[n == -1] = everyone  # -1: all training patients
        order = np.argsort(n)
        x = n[order]
        style = {"lw": 2.5, "c": "k"} if name == "macro" else {"lw": 1.2}
        line, = ax.plot(x, sel["value"].to_numpy()[order], marker="o", ms=3, label=name,
                        **style)
        ax.fill_between(x, sel["ci_low"].to_numpy()[order], sel["ci_high"].to_numpy()[order],
                        color=line.get_color(), alpha=0.15, lw=0)
    ax.set_xscale("log")
    ax.set(xlabel="training patients", ylabel=metric)
    ax.legend(fontsize=7, ncol=2)
    return fig
