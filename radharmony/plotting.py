"""Plotting, written once for every dataset's samples."""

from __future__ import annotations

import textwrap
from typing import Sequence


def _figure(nrows: int, ncols: int, cell: float = 3.2):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(ncols * cell, nrows * (cell + 1.2)))
    return fig, [fig.add_subplot(nrows, ncols, i + 1) for i in range(nrows * ncols)]


def image_title(patient, view, *, findings: Sequence[str] = (), report: str | None = None,
                words: int = 6) -> str:
    """An image's title as a person reads it: ``"<patient> · <view> · <what>"``, ``what``
    being the first of ``findings`` (``+N`` for the others) or else the first ``words`` words
    of the report's findings (else its impression, else the report itself).

    >>> image_title("p10", "PA", findings=["Edema", "Effusion"])
    'p10 · PA · Edema +1'
    >>> image_title("p10", None, report="INDICATION:\\nCough\\n\\nIMPRESSION:\\nNo acute "
    ...             "cardiopulmonary process. Stable.")
    'p10 · view ? · "No acute cardiopulmonary process. Stable."'
    """
    from .reports.sections import split_sections

    parts = [str(patient), str(view) if view else "view ?"]
    if findings:
        parts.append(findings[0] + (f" +{len(findings) - 1}" if len(findings) > 1 else ""))
    elif isinstance(report, str) and report.strip():
        sections = split_sections(report)
        text = sections.get("findings") or sections.get("impression") or report
        cut = text.split()
        parts.append('"' + " ".join(cut[:words]) + (" ..." if len(cut) > words else "") + '"')
    return " · ".join(parts)


def _draw(ax, sample: dict, *, caption: str | None, wrap: int,
          title: str | None = None) -> None:
    img = sample["img"]
    arr = img.float().numpy()[0] if hasattr(img, "float") else img
    ax.imshow(arr, cmap="gray", vmin=-1, vmax=1)
    ax.set_axis_off()
    boxes = sample.get("bbox")
    if boxes is not None and len(boxes):
        from matplotlib.patches import Rectangle

        labels = sample.get("bbox_labels") or [""] * len(boxes)
        for (x0, y0, x1, y1), label in zip(boxes.tolist(), labels):
            ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, color="lime", lw=1))
            ax.text(x0, y0, label, color="lime", fontsize=6, va="bottom")
    ax.set_title(textwrap.fill(title, 42) if title else str(sample.get("sample_id", ""))[-40:],
                 fontsize=7)
    if caption:
        ax.text(0, -0.02, textwrap.fill(caption, wrap), transform=ax.transAxes, fontsize=6,
                va="top")


def plot_sample(sample: dict, *, caption: str | None = None, wrap: int = 60,
                title: str | None = None):
    """One sample's image (boxes drawn when present) as a matplotlib Figure, titled
    ``title`` (:func:`image_title`; default: the end of its ``sample_id``)."""
    fig, (ax,) = _figure(1, 1, cell=5)
    _draw(ax, sample, caption=caption, wrap=wrap, title=title)
    return fig


def plot_grid(samples: Sequence[dict], *, captions: Sequence[str | None] | None = None,
              ncols: int = 4, wrap: int = 45, titles: Sequence[str | None] | None = None):
    """Several samples side by side, each with an optional caption and title (default: the
    end of its ``sample_id``; a dataset gives :meth:`title` for each), as a Figure."""
    n = len(samples)
    nrows = max(1, -(-n // ncols))
    fig, axes = _figure(nrows, min(ncols, max(n, 1)) if nrows == 1 else ncols)
    captions = list(captions) if captions is not None else [None] * n
    titles = list(titles) if titles is not None else [None] * n
    for ax in axes[n:]:
        ax.set_axis_off()
    for ax, sample, cap, title in zip(axes, samples, captions, titles):
        _draw(ax, sample, caption=cap, wrap=wrap, title=title)
    fig.tight_layout()
    return fig
