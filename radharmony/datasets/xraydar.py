"""X-Raydar multimodal (dnamodel/xraydar-multimodal): 979 exams with consensus labels,
per-annotator boxes, the report and its token-level span annotations.

Source of truth: ``annotations.jsonl`` -- one JSON object per exam (``xray_id``, ``image_file``
= ``images/<xray_id>.png``, ``consensus_labels``, ``bounding_boxes``, ``report_text``,
``report_tokens``, ``report_iobe_tags``, ``report_spans``, ``report_labels``).

Table choices (see docs/datasets/index.md, X-Raydar):

* no patient id is published: ``patient_id`` is the exam's ``xray_id`` and splits group by
  ``study_id`` (= ``xray_id``), i.e. by exam;
* boxes stay in the card's units, pixels of the full-resolution PNG (``box_units="pixel"``):
  the JSONL gives no image size and harmonizing reads metadata only; the dataset maps them
  through the image's real size at load time;
* ``report_spans`` keeps the token form as shipped; ``report_char_spans`` holds the same
  spans as character offsets into ``report`` (end exclusive) after aligning the tokens to the
  text and reading the span-end convention off the IOBE tags.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..annotations.boxes import BOX_KEYS, box_record
from ..errors import MetadataError
from ..cells import parse_literal
from ..annotations.spans import align_tokens, char_spans, detect_span_end
from ..spec import DatasetSpec
from .report_labels import ReportLabelsDataset, ReportLabelsHarmonizer
from ..table.read_json import read_jsonl
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
FIELDS = ("xray_id", "image_file", "consensus_labels", "bounding_boxes", "report_text",
          "report_tokens", "report_iobe_tags", "report_spans", "report_labels")
LABEL_COLS = (
    "aortic_calcification", "apical_fibrosis", "atelectasis", "axillary_abnormality",
    "bronchial_wall_thickening", "bulla", "cardiomegaly", "cavitating_lung_lesion",
    "clavicle_fracture", "consolidation", "coronary_calcification", "dextrocardia",
    "dilated_bowel", "emphysema", "ground_glass_opacification", "hemidiaphragm_elevated",
    "hernia", "hyperexpanded_lungs", "interstitial_shadowing", "mediastinum_displaced",
    "mediastinum_widened", "object", "paraspinal_mass", "paratracheal_hilar_enlargement",
    "parenchymal_lesion", "pleural_abnormality", "pleural_effusion", "pneumomediastinum",
    "pneumoperitoneum", "pneumothorax", "rib_fracture", "rib_lesion", "scoliosis",
    "subcutaneous_emphysema", "unfolded_aorta", "upper_lobe_blood_diversion", "volume_loss")
#: label -> canonical findings (radharmony.vocabulary); hernia is hiatus hernia, object any
#: device or foreign body, parenchymal_lesion a nodule, mass or other lung lesion
LABEL_MAP = {
    "aortic_calcification": (("aortic_calcification", "exact"),),
    "apical_fibrosis": (("fibrosis", "narrower"),), "atelectasis": (("atelectasis", "exact"),),
    "axillary_abnormality": None, "bronchial_wall_thickening": None,
    "bulla": (("emphysema", "narrower"),), "cardiomegaly": (("cardiomegaly", "exact"),),
    "cavitating_lung_lesion": (("lung_lesion", "narrower"),),
    "clavicle_fracture": (("clavicle_fracture", "exact"),),
    "consolidation": (("consolidation", "exact"),), "coronary_calcification": None,
    "dextrocardia": None, "dilated_bowel": None, "emphysema": (("emphysema", "exact"),),
    "ground_glass_opacification": (("lung_opacity", "narrower"),),
    "hemidiaphragm_elevated": None, "hernia": (("hiatal_hernia", "exact"),),
    "hyperexpanded_lungs": (("copd", "approximate"),),
    "interstitial_shadowing": (("lung_opacity", "narrower"),
                               ("interstitial_lung_disease", "approximate")),
    "mediastinum_displaced": None,
    "mediastinum_widened": (("enlarged_cardiomediastinum", "narrower"),),
    "object": (("support_devices", "approximate"),), "paraspinal_mass": None,
    "paratracheal_hilar_enlargement": None,
    "parenchymal_lesion": (("lung_lesion", "exact"), ("nodule_or_mass", "approximate")),
    "pleural_abnormality": (("pleural_other", "approximate"),),
    "pleural_effusion": (("pleural_effusion", "exact"),),
    "pneumomediastinum": (("pneumomediastinum", "exact"),),
    "pneumoperitoneum": (("pneumoperitoneum", "exact"),),
    "pneumothorax": (("pneumothorax", "exact"),), "rib_fracture": (("rib_fracture", "exact"),),
    "rib_lesion": None, "scoliosis": (("scoliosis", "exact"),),
    "subcutaneous_emphysema": (("subcutaneous_emphysema", "exact"),),
    "unfolded_aorta": (("aortic_enlargement", "approximate"),),
    "upper_lobe_blood_diversion": None, "volume_loss": (("atelectasis", "approximate"),),
}
REPORT_CATEGORIES = tuple(sorted(LABEL_COLS + (
    "abnormal_non_clinically_important", "comparison", "normal", "other", "possible_diagnosis",
    "recommendation", "technical_issue", "undefined_sentence")))
EXTRA_COLS = ("report_labels", "report_spans", "report_char_spans", "report_tokens",
              "report_iobe_tags", "boxes")
ACCESS = ("HuggingFace dnamodel/xraydar-multimodal; academic research and non-commercial "
          "evaluation only (terms at x-raydar.info)")
SPEC = DatasetSpec(
    key="xraydar_multimodal", title="X-Raydar multimodal", metadata_files=("annotations.jsonl",),
    label_cols=LABEL_COLS, label_map=LABEL_MAP, extra_cols=EXTRA_COLS,
    outputs=frozenset({"cls", "report", "bbox", "report_spans", "report_labels"}),
    expected={"images": 979, "studies": 979}, access=ACCESS, group_col="study_id",
    id_col="study_id", box_units="pixel",
    column_types={c: "json" for c in EXTRA_COLS if c != "boxes"})
_FIX = "re-download annotations.jsonl (hf download dnamodel/xraydar-multimodal)"


# -- pure helpers ---------------------------------------------------------------------------------
def _fail(source: str, line: int, what: str, *, expected: str, found) -> MetadataError:
    return MetadataError(f"{source}, line {line}: {what}", expected=expected,
                         found=repr(found)[:120], fix=_FIX)


def _list_field(rec: dict, key: str, source: str, line: int, *, item=None) -> list:
    value = rec.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or item is not None and \
            not all(isinstance(v, item) for v in value):
        kind = f"a list of {item.__name__}" if item else "a list"
        raise _fail(source, line, f"{key} is not {kind}", expected=kind, found=value)
    return value


def _boxes(rec: dict, xray_id: str, source: str, line: int, dropped: list) -> list[dict]:
    out = []
    for i, b in enumerate(_list_field(rec, "bounding_boxes", source, line, item=dict)):
        try:
            x0, y0, x1, y1 = (float(b[k]) for k in BOX_KEYS)
            if not all(map(math.isfinite, (x0, y0, x1, y1))):
                raise ValueError("not finite")
        except (KeyError, TypeError, ValueError):
            raise _fail(source, line, f"bounding_boxes[{i}] has no numeric x_min, y_min, "
                        "x_max, y_max", expected="pixel coordinates", found=b) from None
        if x1 <= x0 or y1 <= y0:
            dropped.append(f"exam {xray_id} box {i} {[x0, y0, x1, y1]}")
            continue
        out.append(box_record(str(b.get("label")), b.get("annotator"), x0, y0, x1, y1))
    return out


def _warn_unknown(unknown: dict, source: str) -> None:
    for (field, label), exams in sorted(unknown.items()):
        more = f" (+{len(exams) - 5} more)" if len(exams) > 5 else ""
        warnings.warn(f"{source}: unknown label {label!r} in {field} of exam(s) "
                      f"{', '.join(exams[:5])}{more}; it is kept as text where the table "
                      "stores text and left out of the multi-hot vectors.", UserWarning,
                      stacklevel=4)


# -- harmonizer -----------------------------------------------------------------------------------
class XRaydarMultimodalHarmonizer(ReportLabelsHarmonizer, BaseHarmonizer):
    """X-Raydar multimodal: 979 exams, one row each (``csv_path`` = ``annotations.jsonl``)."""

    spec = SPEC
    metadata_description = "the X-Raydar multimodal annotations.jsonl"

    def read(self, inputs: Inputs) -> list:
        """One parsed object per line; ``None`` for a blank line, so ``raw[i]`` is line i+1."""
        return read_jsonl(inputs.metadata)

    @classmethod
    def harmonize_raw(cls, raw: list, *, source: str = "annotations.jsonl") -> pd.DataFrame:
        rows, unknown, dropped, seen, parsed = [], {}, [], {}, []
        known = {"consensus_labels": set(LABEL_COLS), "bounding_boxes": set(LABEL_COLS),
                 "report_labels": set(REPORT_CATEGORIES), "report_spans": set(REPORT_CATEGORIES)}
        for line, rec in enumerate(raw, 1):
            if rec is None:
                continue
            if not isinstance(rec, dict):
                raise _fail(source, line, "is not a JSON object", expected="an object with "
                            f"keys {list(FIELDS)}", found=rec)
            xid, image = rec.get("xray_id"), rec.get("image_file")
            if not isinstance(xid, (str, int)) or isinstance(xid, bool) or str(xid) == "" or \
                    not isinstance(image, str):
                raise _fail(source, line, "has no xray_id / image_file", expected="xray_id "
                            "text and image_file 'images/<xray_id>.png'",
                            found={k: rec.get(k) for k in ("xray_id", "image_file")})
            xid = str(xid)
            if xid in seen:
                raise _fail(source, line, f"repeats exam {xid} of line {seen[xid]}",
                            expected="one line per exam", found=xid)
            seen[xid] = line
            labels = _list_field(rec, "consensus_labels", source, line, item=str)
            boxes = _boxes(rec, xid, source, line, dropped)
            tokens = _list_field(rec, "report_tokens", source, line, item=str)
            tags = _list_field(rec, "report_iobe_tags", source, line)
            spans = _list_field(rec, "report_spans", source, line, item=dict)
            rlabels = _list_field(rec, "report_labels", source, line, item=str)
            if len(tags) != len(tokens):
                raise _fail(source, line, f"has {len(tokens)} report_tokens but {len(tags)} "
                            "report_iobe_tags", expected="one tag per token", found=tags[:8])
            for field, values in (("consensus_labels", labels), ("report_labels", rlabels),
                                  ("bounding_boxes", [b["label"] for b in boxes]),
                                  ("report_spans", [s.get("label") for s in spans])):
                for v in values:
                    if v not in known[field]:
                        unknown.setdefault((field, str(v)), []).append(xid)
            text = rec.get("report_text")
            text = text if isinstance(text, str) and text.strip() else None
            parsed.append((xid, line, text, tokens, tags, spans))
            hot = set(labels)
            rows.append({"patient_id": xid, "study_id": xid, "image_path": image,
                         "view_position": None, "report": text,
                         **{c: float(c in hot) for c in LABEL_COLS},
                         "report_labels": list(rlabels), "report_spans": [dict(s) for s in spans],
                         "report_tokens": list(tokens), "report_iobe_tags": list(tags),
                         "boxes": boxes})
        _warn_unknown(unknown, source)
        if dropped:
            warnings.warn(f"{source}: {len(dropped)} empty or inverted box(es) dropped, e.g. "
                          f"{dropped[0]}.", UserWarning, stacklevel=3)
        convention, _, _ = detect_span_end((p[4], p[5]) for p in parsed)
        unaligned = []
        for row, (xid, line, text, tokens, _, spans) in zip(rows, parsed):
            offsets = align_tokens(text or "", tokens)
            row["report_char_spans"], bad = char_spans(spans, offsets,
                                                       inclusive=convention == "inclusive")
            unaligned += [f"exam {xid} (line {line}) span {s}" for s in bad]
        if unaligned:
            warnings.warn(f"{source}: {len(unaligned)} report span(s) could not be placed in "
                          f"the report text and have no character offsets, e.g. {unaligned[0]}.",
                          UserWarning, stacklevel=3)
        cols = ("patient_id", "study_id", "image_path", "view_position", "report",
                *LABEL_COLS, *EXTRA_COLS)
        return pd.DataFrame(rows, columns=list(cols))


# -- dataset --------------------------------------------------------------------------------------
def _as_list(value) -> list:
    if isinstance(value, str):
        return parse_literal(value) if value.strip() else []
    return [] if value is None or isinstance(value, float) else list(value)


def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    import torch
    from ..data.dataset import BaseRadiologicalDataset

    class XRaydarMultimodalDataset(ReportLabelsDataset, BaseRadiologicalDataset):
        """All 979 X-Raydar exams; ``base_image_dir`` is the folder holding ``images/`` and
        ``annotations.jsonl``. ``get_datasets(n_splits=k)`` / ``get_folds`` group by exam.

        Extra flags: ``output_report_spans`` adds ``report_spans`` (character offsets into
        ``report``, end exclusive) and ``output_report_labels`` adds ``report_cls`` (45,), the
        multi-hot of ``report_labels`` over :data:`REPORT_CATEGORIES`.
        """

        harmonizer_class = XRaydarMultimodalHarmonizer

        def __init__(self, base_image_dir=None, csv_path=None, transform=None, *,
                     output_report_spans: bool = False, output_report_labels: bool = False,
                     **kwargs):
            super().__init__(base_image_dir, csv_path, transform, **kwargs)
            self.outputs = self.outputs | self._supported_outputs(
                report_spans=output_report_spans, report_labels=output_report_labels)

        def _set_table(self, df: pd.DataFrame, *, derived: bool = False) -> None:
            super()._set_table(df, derived=derived)
            self._char_spans = [_as_list(v) for v in df["report_char_spans"]]
            index = {c: i for i, c in enumerate(REPORT_CATEGORIES)}
            self._report_cls = np.zeros((len(df), len(REPORT_CATEGORIES)), np.float32)
            for r, labels in enumerate(df["report_labels"]):
                for lab in _as_list(labels):
                    if lab in index:
                        self._report_cls[r, index[lab]] = 1.0

        def add_outputs(self, index: int, sample: dict, box) -> None:
            super().add_outputs(index, sample, box)
            if "report_spans" in self.outputs:
                sample["report_spans"] = [dict(s) for s in self._char_spans[index]]
            if "report_labels" in self.outputs:
                sample["report_cls"] = torch.from_numpy(self._report_cls[index].copy())

    return XRaydarMultimodalDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["XRaydarMultimodalHarmonizer", "XRaydarMultimodalDataset"]
