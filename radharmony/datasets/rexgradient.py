"""ReXGradient-160K (Rajpurkar Lab / Gradient Health): 16-bit PNGs with 4-section reports.

Source of truth: ``metadata/<split>_metadata_view_position.json`` -- a JSON object keyed by
``p<PatientID>_a<AccessionNumber>_s<StudyInstanceUid>``, one entry per study with parallel
per-image lists (``ImagePath``, ``ImageViewPosition``, ...). Bare ``NaN`` numbers occur. The
plain ``<split>_metadata.json`` has the same form with empty view positions and is used when
the view-position file is absent. The per-study CSV cannot give per-image rows and is refused.
"""

from __future__ import annotations

import math
from operator import itemgetter
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ..base import BaseHarmonizer, BaseRadiologicalDataset
from ..errors import MetadataError, MetadataFormatError
from ..jsonio import load_json
from ..registry import register_dataset, register_harmonizer
from ..spec import DatasetSpec

# -- declarative spec ----------------------------------------------------------------------------
SPLITS = {"train": {"images": 238_968, "studies": 140_000, "patients": 95_716},
          "valid": {"images": 17_007, "studies": 10_000, "patients": 6_964},
          "test": {"images": 17_029, "studies": 10_000, "patients": 6_807}}
SECTIONS = (("INDICATION", "Indication"), ("COMPARISON", "Comparison"),
            ("FINDINGS", "Findings"), ("IMPRESSION", "Impression"))
IMAGE_PREFIX = "../deid_png/"
NONE_LIKE = frozenset({"", "none", "null", "nan", "n/a", "na"})
EXTRA_OUTPUT_COLS = ("accession_number", "patient_sex", "patient_age", "study_date")
VIEW_MAP = {"PA": "PA", "POSTERO_ANTERIOR": "PA", "AP": "AP", "LATERAL": "LATERAL",
            "LL": "LATERAL", "RL": "LATERAL", "LAO": "LAO", "RAO": "RAO"}
ACCESS = ("HuggingFace rajpurkarlab/ReXGradient-160K, gated: ReXGradient-160K Non-Commercial "
          "Data Access and Use Agreement (non-commercial research only, no clinical use)")
LABEL_COLS: tuple[str, ...] = ()


def view_position_file(split: str) -> str:
    return f"{split}_metadata_view_position.json"


def split_spec(split: str) -> DatasetSpec:
    return DatasetSpec(
        key=f"rexgradient_{split}", title=f"ReXGradient-160K ({split})",
        metadata_files=(view_position_file(split), f"{split}_metadata.json"),
        label_cols=LABEL_COLS, extra_cols=EXTRA_OUTPUT_COLS, outputs=frozenset({"report"}),
        view_map=VIEW_MAP, expected=SPLITS[split], access=ACCESS)


# -- pure helpers ---------------------------------------------------------------------------------
def _section_text(value) -> str | None:
    """A report section's text, or None when it is empty, null, NaN or "None"-like
    (also "Comparison: None.")."""
    if value is None or isinstance(value, float) and math.isnan(value):
        return None
    text = str(value).strip()
    colon = text.find(":", 0, 20)
    bare = text[colon + 1:].strip().rstrip(".").strip() if colon >= 0 else text.rstrip(".").strip()
    # every NONE_LIKE term has at most 4 characters: longer text needs no lower-casing
    return None if len(bare) <= 4 and bare.lower() in NONE_LIKE else text


def format_report(indication, comparison, findings, impression) -> str | None:
    """``"INDICATION:\\n..."`` sections joined by a blank line; None when all are empty."""
    return _join_sections(*map(_section_text, (indication, comparison, findings, impression)))


def _join_sections(*texts: str | None) -> str | None:
    parts = [head + text for head, text in zip(_HEADS, texts) if text is not None]
    return "\n\n".join(parts) if parts else None


_HEADS = tuple(f"{head}:\n" for head, _ in SECTIONS)


def _section_texts(values: list) -> list:
    """:func:`_section_text` of each value, computed once per distinct string."""
    seen: dict[str, str | None] = {}
    out = []
    for v in values:
        if type(v) is str:
            text = seen.get(v, seen)
            if text is seen:
                text = seen[v] = _section_text(v)
            out.append(text)
        else:
            out.append(_section_text(v))
    return out


_format_report = format_report  # the name the public page uses


def _optional_text(value):
    if value is None or isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


def _study_date(value):
    if value is None or isinstance(value, float) and math.isnan(value) or value == "":
        return None
    return int(value)


def _fields(studies: list[dict], names: tuple[str, ...]) -> dict[str, tuple | list]:
    """``{name: value of each study}``, None where absent; one C-level pass when every study
    has every name (as shipped), one ``get`` per value otherwise."""
    try:
        return dict(zip(names, zip(*map(itemgetter(*names), studies)))) if studies else \
            {n: () for n in names}
    except KeyError:
        return {n: [e.get(n) for e in studies] for n in names}


# -- harmonizer -----------------------------------------------------------------------------------
class _ReXGradientHarmonizer(BaseHarmonizer):
    split: ClassVar[str]

    @property
    def metadata_description(self) -> str:  # type: ignore[override]
        return f"the ReXGradient-160K {self.split} metadata JSON ({view_position_file(self.split)})"

    def check_metadata_path(self, path: Path) -> None:
        if path.suffix.lower() == ".csv":
            raise MetadataFormatError(
                f"csv_path {path} is the per-study CSV, which has no image paths",
                expected=f"the per-image JSON {view_position_file(self.split)}",
                found="a .csv file",
                fix=f"pass csv_path='{path.with_name(view_position_file(self.split))}'")

    def read(self, path: Path) -> dict:
        try:
            raw = load_json(path)  # bare NaN (not strict JSON) is read as None
        except (ValueError, UnicodeDecodeError) as exc:
            raise MetadataError(f"{path} is not valid JSON", expected="the JSON object "
                                "ReXGradient ships", found=str(exc),
                                fix="re-download the metadata file") from None
        if not isinstance(raw, dict):
            raise MetadataError(f"{path} has the wrong top-level type",
                                expected="a JSON object keyed by study",
                                found=type(raw).__name__, fix="re-download the metadata file")
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        # Column-wise: one checking pass over the studies, then one comprehension per field
        # (the 140,000-study train split harmonizes in well under a second this way).
        studies = list(raw.values())
        paths, views, counts = [], [], []
        for key, e in raw.items():
            if not isinstance(e, dict) or not isinstance(e.get("ImagePath"), list):
                raise MetadataError(f"{source}: entry {key!r} has no ImagePath list",
                                    expected="an object with an ImagePath list",
                                    found=type(e).__name__ if not isinstance(e, dict) else
                                    f"ImagePath={e.get('ImagePath')!r}",
                                    fix="re-download the metadata file")
            n = len(e["ImagePath"])
            vp = e.get("ImageViewPosition")
            vp = [None] * n if vp is None else vp
            if not isinstance(vp, list) or len(vp) != n:
                raise MetadataError(f"{source}: entry {key!r} has {n} ImagePath values but "
                                    f"ImageViewPosition does not match",
                                    expected=f"{n} view positions", found=repr(vp)[:80],
                                    fix="re-download the metadata file")
            counts.append(n)
            paths += e["ImagePath"]
            views += vp

        fields = _fields(studies, ("PatientID", "StudyInstanceUid", "AccessionNumber",
                                   "PatientSex", "PatientAge", "StudyDate",
                                   *(f for _, f in SECTIONS)))
        field = fields.__getitem__

        def text(name: str) -> list:
            return [v if type(v) is str else _optional_text(v) for v in field(name)]

        cols = {"patient_id": field("PatientID"), "study_id": field("StudyInstanceUid"),
                "report": list(map(_join_sections,
                                   *(_section_texts(field(f)) for _, f in SECTIONS))),
                "accession_number": text("AccessionNumber"), "patient_sex": text("PatientSex"),
                "patient_age": text("PatientAge"),
                "study_date": [_study_date(v) for v in field("StudyDate")]}
        reps = np.asarray(counts, dtype=np.int64)
        df = pd.DataFrame({c: pd.Series(np.repeat(np.asarray(v, dtype=object), reps),
                                        dtype=object) for c, v in cols.items()})
        df.insert(2, "image_path", pd.Series(
            [p[len(IMAGE_PREFIX):] if isinstance(p, str) and p.startswith(IMAGE_PREFIX) else p
             for p in paths], dtype=object))
        df.insert(3, "view_position", pd.Series(
            [v if isinstance(v, str) and v != "" else None for v in views], dtype=object))
        df["study_date"] = df["study_date"].astype("Int64")
        return df


# -- thin split classes ----------------------------------------------------------------------------
@register_harmonizer
class ReXGradientTrainHarmonizer(_ReXGradientHarmonizer):
    """ReXGradient-160K train: 238,968 images, 140,000 studies, 95,716 patients."""
    split, spec = "train", split_spec("train")


@register_harmonizer
class ReXGradientValidHarmonizer(_ReXGradientHarmonizer):
    """ReXGradient-160K validation: 17,007 images, 10,000 studies, 6,964 patients."""
    split, spec = "valid", split_spec("valid")


@register_harmonizer
class ReXGradientTestHarmonizer(_ReXGradientHarmonizer):
    """ReXGradient-160K public test: 17,029 images, 10,000 studies, 6,807 patients."""
    split, spec = "test", split_spec("test")


@register_dataset
class ReXGradientTrainDataset(BaseRadiologicalDataset):
    """ReXGradient-160K train split; ``base_image_dir`` is the extracted ``deid_png/``."""
    harmonizer_class = ReXGradientTrainHarmonizer


@register_dataset
class ReXGradientValidDataset(BaseRadiologicalDataset):
    """ReXGradient-160K validation split; ``base_image_dir`` is the extracted ``deid_png/``."""
    harmonizer_class = ReXGradientValidHarmonizer


@register_dataset
class ReXGradientTestDataset(BaseRadiologicalDataset):
    """ReXGradient-160K public test split; ``base_image_dir`` is the extracted ``deid_png/``."""
    harmonizer_class = ReXGradientTestHarmonizer


__all__ = [f"ReXGradient{s}{k}" for s in ("Train", "Valid", "Test")
           for k in ("Harmonizer", "Dataset")]
