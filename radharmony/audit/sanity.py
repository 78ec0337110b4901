"""Image sanity checks, on the decoded image's :func:`~radharmony.audit.hashing.small_image`.

Flags (nothing is dropped; :class:`~radharmony.audit.AuditReport` lists them):

* ``unreadable``: the file is absent or does not decode (the error is the detail);
* ``tiny``: the short side is under ``min_side`` pixels (source size, not the decoded one);
* ``blank``: near-constant -- the 1st-99th percentile spread is under ``blank_contrast`` of
  the 99th percentile (an all-black, all-white or flat-grey image);
* ``inverted``: on a frontal (or view-less) image, the lung fields are brighter than the
  mediastinum: a MONOCHROME1 image shown without inversion, or an exported negative. Score:
  (mean of the two lung fields - mean of the central strip) / the percentile spread; flagged
  above ``inverted_score``. A heuristic: a normal frontal scores about -0.4 (the planted-copy
  replica's varied images: 99 % below -0.02, none above 0.11 of 400), an inverted one +0.4;
  rotated, off-centre or lateral-like images can come near 0, so look at the thumbnails.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: regions of the 64 x 64 small image: rows, the central (mediastinal) columns and the lung
#: field columns on both sides
ROWS = slice(16, 44)
CENTER = slice(28, 36)
LUNGS = (slice(12, 22), slice(42, 52))
FRONTAL = (None, "PA", "AP", "AP_HORIZONTAL", "AP_SUPINE", "FRONTAL")


@dataclass(frozen=True)
class SanityLimits:
    """Thresholds of the checks (see the module docs)."""

    min_side: int = 200
    blank_contrast: float = 0.05
    inverted_score: float = 0.15


def contrast(small: np.ndarray) -> tuple[float, float, float]:
    """``(1st percentile, 99th percentile, spread / max(|99th|, tiny))`` of the image."""
    lo, hi = np.percentile(small, (1, 99))
    return float(lo), float(hi), float((hi - lo) / max(abs(hi), 1e-6))


def inverted_score(small: np.ndarray, lo: float, hi: float) -> float:
    """(lung fields - mediastinum) / spread: negative on a normal frontal, positive inverted."""
    if not hi > lo:
        return 0.0
    lungs = np.mean([small[ROWS, c].mean() for c in LUNGS])
    return float((lungs - small[ROWS, CENTER].mean()) / (hi - lo))


def check(small: np.ndarray, src_hw: tuple[int, int], view, limits: SanityLimits
          ) -> list[tuple[str, str]]:
    """``[(flag, detail), ...]`` for one decoded image (``view``: the canonical view or None)."""
    out = []
    if min(src_hw) < limits.min_side:
        out.append(("tiny", f"{src_hw[1]} x {src_hw[0]} pixels (short side < "
                            f"{limits.min_side})"))
    lo, hi, spread = contrast(small)
    if spread < limits.blank_contrast:
        out.append(("blank", f"1st-99th percentile spread {spread:.3f} of the level "
                             f"({lo:g}..{hi:g})"))
    elif (view if isinstance(view, str) else None) in FRONTAL:
        score = inverted_score(small, lo, hi)
        if score > limits.inverted_score:
            out.append(("inverted", f"lung fields brighter than the mediastinum by "
                                    f"{score:.2f} of the spread"))
    return out


__all__ = ["SanityLimits", "check", "contrast", "inverted_score"]
