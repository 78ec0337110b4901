"""An OpenI (Indiana University) replica in the real on-disk format.

Layout::

    <root>/NLMCXR_reports.tgz            ecgen-radiology/<n>.xml, one report each
    <root>/nlmcxr_dicom_metadata.csv.gz  torchxrayvision's DICOM header table (a subset of its
                                         176 columns, in the real order and spelling)
    <root>/NLMCXR_png/<parentImage id>.png   8-bit grayscale

Quirks reproduced: ``AbstractText`` in the order COMPARISON, INDICATION, FINDINGS, IMPRESSION,
some as empty elements; ``XXXX`` de-identification; MeSH ``major`` tags with ``/`` qualifiers,
a lower-case ``normal``, ``No Indexing``, a double space; ``automatic`` tags; a report without
images; report 1's image ids ``CXR1_1_IM-...`` against the DICOM table's ``CXR1_IM-...``; one
image without a DICOM row; ``View Position`` ``LL``/``RL``/empty; filenames ``./<n>_IM-....dcm``.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import numpy as np
import pandas as pd

from . import register_fake
from .images import synthetic_cxr, write_png

DICOM_COLUMNS = ["imageid", "Accession Number", "Bits Allocated", "Bits Stored", "Columns",
                 "Modality", "Patient ID", "Patient's Sex", "Photometric Interpretation", "Rows",
                 "Study Date", "View Position", "filename"]
REPORTS = [  # (sections, major tags, automatic tags, number of images)
    (("None.", "Positive TB test", "The heart is normal. No pleural effusion.",
      "Normal chest x-XXXX."), ["normal"], [], 2),
    (("XXXX PA and lateral", "XXXX-year-old male, XXXX.", "Increased opacity right upper lobe.",
      "Opacity may represent pneumonia."),
     ["Opacity/lung/upper lobe/right", "Pulmonary Atelectasis/upper lobe/right",
      "Pleural Effusion/left/small"], ["opacity", "Atelectasis"], 3),
    ((None, "Dyspnea", None, "Cardiomegaly. Small pericardial effusion."),
     ["Cardiomegaly/mild", "Pericardial Effusion", "Subcutaneous  Emphysema"], ["Cardiomegaly"],
     2),
    (("Chest radiographs XXXX.", "Chest pain", "Lungs are clear.", "No acute disease."),
     ["No Indexing"], [], 1),
    (("None", "Fever", "No focal consolidation.", "No acute cardiopulmonary abnormality."),
     ["normal"], [], 0),
    ((None, "Cough", "Hyperinflated lungs. Calcified granuloma.", "COPD."),
     ["Lung/hyperdistention", "Calcified Granuloma/lung/left", "Pulmonary Disease, Chronic "
      "Obstructive"], ["emphysema"], 2),
]


def report_xml(n: int, sections, major, automatic, image_ids) -> str:
    """One ``ecgen-radiology/<n>.xml`` document in the real structure."""
    labels = ("COMPARISON", "INDICATION", "FINDINGS", "IMPRESSION")
    abstract = "\n".join(
        f'            <AbstractText Label="{label}"/>' if text is None else
        f'            <AbstractText Label="{label}">{escape(text)}</AbstractText>'
        for label, text in zip(labels, sections))
    mesh = "\n".join([f"      <major>{escape(t)}</major>" for t in major] +
                     [f"      <automatic>{escape(t)}</automatic>" for t in automatic])
    images = "\n".join(
        f"   <parentImage id={quoteattr(i)}>\n      <figureId>F{k + 1}</figureId>\n"
        f"      <caption>Xray Chest PA and Lateral</caption>\n      <panel type=\"single\">\n"
        f"         <url>/hadoop/storage/radiology/extract/{i}.jpg</url>\n"
        f"         <imgModality>7</imgModality>\n      </panel>\n   </parentImage>"
        for k, i in enumerate(image_ids))
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<eCitation>\n   <meta type="rr"/>\n'
            f'   <uId id="CXR{n}"/>\n   <pmcId id="{n}"/>\n   <docSource>CXR</docSource>\n'
            f'   <IUXRId id="{n}"/>\n   <licenseType>open-access</licenseType>\n'
            f"   <publisher>Indiana University</publisher>\n"
            f"   <MedlineCitation Owner=\"Indiana University\" Status=\"supplied by publisher\">\n"
            f"      <Article PubModel=\"Electronic\">\n         <Abstract>\n{abstract}\n"
            f"         </Abstract>\n      </Article>\n   </MedlineCitation>\n"
            f"   <MeSH>\n{mesh}\n   </MeSH>\n{images}\n</eCitation>")


def write_openi(root: str | Path, *, seed: int = 0, images: bool = True,
                dicom: bool = False) -> Path:
    """Write the replica (6 reports, 10 images) under ``root``; returns ``root/NLMCXR_png``.
    ``dicom=True`` also writes each image as the DICOM release has it (see
    :func:`write_openi_dicom`), under ``root/NLMCXR_dcm``."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    image_dir = root / "NLMCXR_png"
    image_dir.mkdir(parents=True, exist_ok=True)
    dicom_rows, serial = [], 1
    with tarfile.open(root / "NLMCXR_reports.tgz", "w:gz") as tar:
        for n, (sections, major, automatic, n_img) in enumerate(REPORTS, start=1):
            ids = []
            for k in range(n_img):
                stem = f"IM-{serial:04d}-{k + 1}001"
                xml_id = f"CXR{n}_1_{stem}" if n == 1 else f"CXR{n}_{stem}"
                ids.append(xml_id)
                if not (n == 2 and k == 0):  # this image has no DICOM row
                    view = ["PA", "LL", None, "AP", "RL"][(n + k) % 5]
                    dicom_rows.append([f"CXR{n}_{stem}", str(rng.integers(10**15, 10**16)), 16,
                                       12, 2320, "CR", n, "M", "MONOCHROME1", 2828, 20110328,
                                       view, f"./{n}_{stem}.dcm"])
                img = synthetic_cxr(int(rng.integers(260, 320)), 256, rng=rng) \
                    if images or dicom else None
                if images:
                    write_png(image_dir / f"{xml_id}.png", (img >> 4).astype(np.uint8))
                if dicom:
                    write_openi_dicom(root / "NLMCXR_dcm", n, f"{n}_{stem}", img)
            serial += 1
            data = report_xml(n, sections, major, automatic, ids).encode()
            info = tarfile.TarInfo(f"ecgen-radiology/{n}.xml")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    pd.DataFrame(dicom_rows, columns=DICOM_COLUMNS).to_csv(
        root / "nlmcxr_dicom_metadata.csv.gz", index=False)
    return image_dir


def write_openi_dicom(dicom_dir: Path, n: int, name: str, img: np.ndarray) -> Path:
    """One image as ``NLMCXR_dcm.tgz`` holds it: ``<n>/<name>.dcm``, CR, 12 bits stored,
    MONOCHROME1 (``img`` inverted) with a VOI window; every other report's files sit flat in
    the root (the form torchxrayvision's header table names: ``./<name>.dcm``)."""
    from .dicom import write_dicom

    folder = dicom_dir / str(n) if n % 2 else dicom_dir
    return write_dicom(folder / f"{name}.dcm", (4095 - img).astype(np.uint16),
                       photometric="MONOCHROME1", bits_stored=12, PatientID=str(n),
                       ViewPosition="PA", WindowCenter="2048", WindowWidth="4096")


@register_fake("openi")
def make(root: Path) -> dict:
    """Contract-suite maker: 6 reports, 10 PNGs."""
    return {"base_image_dir": write_openi(root)}
