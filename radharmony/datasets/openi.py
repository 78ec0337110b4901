"""OpenI / Indiana University chest X-ray collection: 3,955 reports, 7,470 images, MeSH tags.

Source of truth: ``NLMCXR_reports.tgz`` -- one XML per report (``ecgen-radiology/<n>.xml``) with
``uId`` (``CXR<n>``), four ``AbstractText`` sections (COMPARISON, INDICATION, FINDINGS,
IMPRESSION; often empty elements), manual MeSH ``<major>`` tags and automatic ``<automatic>``
tags, and one ``parentImage id`` per image (the PNG archive names the images ``<id>.png``).
Read beside it when present: ``nlmcxr_dicom_metadata.csv.gz`` (torchxrayvision's table of
the DICOM headers, keyed by ``imageid``), for the view position.

The two disagree on a few ids: the XML writes report 1's images as ``CXR1_1_IM-0001-3001``
where the DICOM table has ``CXR1_IM-0001-3001``, and ``CXR1000_IM-0003-1001`` has no DICOM row.
XML ids are matched after dropping that ``_<n>_`` infix; images still unmatched get no view and
a warning. 104 reports have no image and give no row.

Labels: the manual MeSH ``major`` tags are ``Heading/qualifier/...`` strings; a label column is
1 when a tag's heading (text before the first ``/``, whitespace collapsed, case ignored) equals
the column name exactly, else 0; a report indexed ``No Indexing`` has every label missing.
``Pleural Effusion`` and ``Pericardial Effusion`` are different columns; anatomy headings
(``Lung/hypoinflation``, ``Aorta/tortuous``) are not columns but stay in ``mesh_major``. The
automatic tags are kept, unused, in ``mesh_automatic``. The collection has no patient ids: each
report is its own patient and study.
"""

from __future__ import annotations

import re
import tarfile
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..errors import MetadataError
from ..spec import DatasetSpec, Identity
from .report_labels import ReportLabelsDataset, ReportLabelsHarmonizer
from ..table.locate import find_optional
from ..table.read_csv import read_table
from ..reports.format import format_report
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
DICOM_TABLE = ("nlmcxr_dicom_metadata.csv.gz", "nlmcxr_dicom_metadata.csv")
SECTIONS = ("INDICATION", "COMPARISON", "FINDINGS", "IMPRESSION")
NO_INDEXING = "no indexing"
LABEL_COLS = (  # MeSH headings of findings, devices and quality, most frequent first
    "normal", "Opacity", "Cardiomegaly", "Pulmonary Atelectasis", "Calcinosis",
    "Calcified Granuloma", "Cicatrix", "Pleural Effusion", "Atherosclerosis",
    "Catheters, Indwelling", "Airspace Disease", "Density", "Deformity",
    "Granulomatous Disease", "Nodule", "Implanted Medical Device", "Surgical Instruments",
    "Scoliosis", "Technical Quality of Image Unsatisfactory", "Fractures, Bone",
    "Pulmonary Congestion", "Osteophyte", "Infiltrate", "Spondylosis", "Emphysema",
    "Thickening", "Granuloma", "Pulmonary Disease, Chronic Obstructive", "Hernia, Hiatal",
    "Pulmonary Edema", "Pneumonia", "Pulmonary Emphysema", "Diaphragmatic Eventration",
    "Tube, Inserted", "Consolidation", "Foreign Bodies", "Lucency", "Medical Device",
    "Pneumothorax", "Pulmonary Fibrosis", "Stents", "Mass", "Lung Diseases, Interstitial",
    "Heart Failure", "Pericardial Effusion", "Bronchiectasis", "Cysts", "Sarcoidosis",
    "Hydropneumothorax", "Subcutaneous Emphysema", "Tuberculosis")
#: label -> canonical findings (radharmony.vocabulary); None: no canonical counterpart
LABEL_MAP = {
    "normal": (("no_finding", "exact"),), "Opacity": (("lung_opacity", "approximate"),),
    "Cardiomegaly": (("cardiomegaly", "exact"),),
    "Pulmonary Atelectasis": (("atelectasis", "exact"),),
    "Calcinosis": (("calcification", "exact"),),
    "Calcified Granuloma": (("granuloma", "narrower"), ("calcification", "narrower")),
    "Cicatrix": None, "Pleural Effusion": (("pleural_effusion", "exact"),),
    "Atherosclerosis": (("aortic_calcification", "approximate"),),
    "Catheters, Indwelling": (("support_devices", "narrower"),),
    "Airspace Disease": (("lung_opacity", "narrower"), ("consolidation", "approximate")),
    "Density": (("lung_opacity", "approximate"),), "Deformity": None,
    "Granulomatous Disease": (("granuloma", "approximate"),),
    "Nodule": (("nodule", "exact"),),
    "Implanted Medical Device": (("support_devices", "narrower"),),
    "Surgical Instruments": (("support_devices", "approximate"),),
    "Scoliosis": (("scoliosis", "exact"),), "Technical Quality of Image Unsatisfactory": None,
    "Fractures, Bone": (("fracture", "exact"),),
    "Pulmonary Congestion": (("edema", "approximate"),),
    "Osteophyte": None, "Infiltrate": (("infiltration", "exact"),), "Spondylosis": None,
    "Emphysema": (("emphysema", "exact"),), "Thickening": (("pleural_thickening", "approximate"),),
    "Granuloma": (("granuloma", "exact"),),
    "Pulmonary Disease, Chronic Obstructive": (("copd", "exact"),),
    "Hernia, Hiatal": (("hiatal_hernia", "exact"),), "Pulmonary Edema": (("edema", "exact"),),
    "Pneumonia": (("pneumonia", "exact"),), "Pulmonary Emphysema": (("emphysema", "exact"),),
    "Diaphragmatic Eventration": None, "Tube, Inserted": (("support_devices", "narrower"),),
    "Consolidation": (("consolidation", "exact"),), "Foreign Bodies": None, "Lucency": None,
    "Medical Device": (("support_devices", "narrower"),),
    "Pneumothorax": (("pneumothorax", "exact"),), "Pulmonary Fibrosis": (("fibrosis", "exact"),),
    "Stents": (("support_devices", "narrower"),), "Mass": (("mass", "exact"),),
    "Lung Diseases, Interstitial": (("interstitial_lung_disease", "exact"),),
    "Heart Failure": None, "Pericardial Effusion": None,
    "Bronchiectasis": (("bronchiectasis", "exact"),), "Cysts": None, "Sarcoidosis": None,
    "Hydropneumothorax": (("hydropneumothorax", "exact"),),
    "Subcutaneous Emphysema": (("subcutaneous_emphysema", "exact"),),
    "Tuberculosis": (("tuberculosis", "exact"),),
}
VIEW_MAP = {"PA": "PA", "AP": "AP", "LATERAL": "LATERAL", "LL": "LATERAL", "RL": "LATERAL",
            "LARGE LATERAL": "LATERAL"}
SPEC = DatasetSpec(
    identity=Identity("openi"),  # its DICOM key (openi_dicom) has the same patients
    key="openi", title="OpenI Indiana University chest X-rays",
    metadata_files=("NLMCXR_reports.tgz",), label_cols=LABEL_COLS, label_map=LABEL_MAP,
    extra_cols=("mesh_major", "mesh_automatic", "dicom_imageid"),
    outputs=frozenset({"cls", "report"}), view_map=VIEW_MAP,
    column_types={"mesh_major": "json", "mesh_automatic": "json"},
    expected={"reports": 3_955, "images": 7_470, "reports_with_images": 3_851,
              "dicom_rows": 7_469, "images_without_dicom_row": 1},
    access="openi.nlm.nih.gov (NLMCXR_png.tgz, NLMCXR_reports.tgz), CC BY-NC-ND 4.0")


def dicom_imageid(xml_id: str) -> str:
    """The DICOM table's ``imageid`` for an XML ``parentImage`` id (drops ``_<n>_`` after
    ``CXR<report>``: ``CXR1_1_IM-0001-3001`` -> ``CXR1_IM-0001-3001``)."""
    return re.sub(r"^(CXR\d+)_\d+_(IM-)", r"\1_\2", xml_id)


def heading(tag: str) -> str:
    """``"Opacity/lung/upper lobe/right"`` -> ``"opacity"`` (for exact, case-blind matching)."""
    return " ".join(tag.split("/", 1)[0].split()).casefold()


# -- harmonizer -----------------------------------------------------------------------------------
class OpenIHarmonizer(ReportLabelsHarmonizer, BaseHarmonizer):
    """OpenI: 3,955 reports, 7,470 images (3,851 reports have images)."""

    spec = SPEC
    metadata_description = "the OpenI report archive (NLMCXR_reports.tgz)"

    def inputs(self, path: Path) -> Inputs:
        """The reports archive and, beside it or near the images, the DICOM table."""
        return Inputs(path, {"dicom": find_optional(DICOM_TABLE, path.parent,
                                                    self.base_image_dir)})

    def read(self, inputs: Inputs) -> dict:
        path = inputs.metadata
        try:
            with tarfile.open(path, "r:*") as tar:
                xml = {m.name: tar.extractfile(m).read() for m in tar.getmembers()
                       if m.isfile() and m.name.endswith(".xml")}
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise MetadataError(f"{path} is not a readable tar archive",
                                expected="NLMCXR_reports.tgz as downloaded",
                                found=f"{type(exc).__name__}: {exc}",
                                fix="re-download NLMCXR_reports.tgz") from None
        dicom = inputs.file("dicom")
        return {"xml": xml, "dicom": None if dicom is None else read_table(
            dicom, description="the OpenI DICOM table", columns=("imageid", "View Position"),
            usecols=["imageid", "View Position"], dtype=str)}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        rows = []
        for name in sorted(raw["xml"], key=_report_number):
            rows += _report_rows(name, raw["xml"][name], source)
        df = pd.DataFrame(rows, columns=["patient_id", "image_id", "report", "mesh_major",
                                         "mesh_automatic"])
        df.insert(1, "study_id", df["patient_id"])
        df.insert(2, "image_path", df.pop("image_id") + ".png")
        df["dicom_imageid"] = df["image_path"].str[:-4].map(dicom_imageid)
        views = pd.Series(None, index=df.index, dtype=object)
        if raw.get("dicom") is not None:
            table = raw["dicom"].drop_duplicates("imageid").set_index("imageid")
            found = df["dicom_imageid"].isin(table.index)
            if not found.all():
                warnings.warn(f"{source}: {int((~found).sum())} OpenI images have no row in "
                              f"the DICOM table ({', '.join(df.loc[~found, 'image_path'][:3])}"
                              f"); their view_position is None", stacklevel=2)
            views = table["View Position"].reindex(df["dicom_imageid"]).to_numpy(object)
        df.insert(3, "view_position", pd.Series(views, index=df.index, dtype=object))
        heads = df["mesh_major"].map(lambda tags: {heading(t) for t in tags})
        labels = np.array([[h in hs for h in map(str.casefold, LABEL_COLS)] for hs in heads],
                          np.float32).reshape(len(df), len(LABEL_COLS))
        labels[heads.map(lambda hs: NO_INDEXING in hs or not hs).to_numpy(bool)] = np.nan
        df = pd.concat([df.iloc[:, :5], pd.DataFrame(labels, columns=list(LABEL_COLS)),
                        df.iloc[:, 5:]], axis=1)
        return df


def _report_number(name: str) -> tuple:
    stem = Path(name).stem
    return (0, int(stem)) if stem.isdigit() else (1, stem)


def _report_rows(name: str, data: bytes, source: str) -> list[list]:
    """One ``[uId, image id, report, major tags, automatic tags]`` row per ``parentImage``."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise MetadataError(f"{source}: {name} is not well-formed XML", expected="an OpenI "
                            "report XML", found=str(exc), fix="re-download the archive") from None
    uid = root.find("uId")
    if uid is None or not uid.get("id"):
        raise MetadataError(f"{source}: {name} has no <uId id=...>", expected="the report id",
                            found="no uId element", fix="re-download the archive")
    sections = {a.get("Label"): a.text for a in root.iter("AbstractText")}
    report = format_report(*(sections.get(s) for s in SECTIONS))
    major = [t.text.strip() for t in root.findall("MeSH/major") if t.text]
    auto = [t.text.strip() for t in root.findall("MeSH/automatic") if t.text]
    return [[uid.get("id"), img.get("id"), report, major, auto]
            for img in root.findall("parentImage") if img.get("id")]


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class OpenIDataset(ReportLabelsDataset, BaseRadiologicalDataset):
        """OpenI; ``base_image_dir`` holds the extracted ``NLMCXR_png.tgz`` (``<id>.png``);
        ``NLMCXR_reports.tgz`` is found beside or above it."""

        harmonizer_class = OpenIHarmonizer

    return OpenIDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["OpenIHarmonizer", "OpenIDataset"]
