"""BIMCV-COVID19+ (de la Iglesia Vayá et al., arXiv 2006.01174; Valencian Region Medical Image
Bank): chest radiographs (CR, DX) of COVID-19 positive patients in MIDS sessions, with Spanish
radiology reports and the PadChest labelling pipeline's UMLS-mapped findings.

Source of truth, in the layout the release's archives extract to::

    covid19_posi/derivatives/labels/labels_covid19_posi.tsv    (the metadata file; TAB)
    covid19_posi/participants.tsv           participant, modality_dicom, age, gender
    covid19_posi/sub-S0xxxx/ses-E0xxxx/mod-rx/
        sub-S0xxxx_ses-E0xxxx_run-1_bp-chest_vp-pa_cr.png  (+ .json DICOM header sidecar)
    bimcv_covid19_posi_subjects_<N>.tar-tvf.txt               one per image archive

The labels table has one row per session (a report): ``PatientID`` (``sub-...``), ``ReportID``
(``ses-...``), ``Report`` (Spanish), ``Labels`` (a printed list of PadChest terms, e.g.
``['COVID 19' 'pneumonia']`` or ``['COVID 19', 'pneumonia']``: quoted strings are read, nothing
is evaluated), ``Localizations``, ``LabelsLocalizationsBySentence``, ``labelCUIS``,
``LocalizationsCUIS``; it is also shipped as ``labels_covid_posi.tsv``. Its rows name no image,
so the images come from the release's ``*.tar-tvf.txt`` archive listings (``tar -tvf``
lines: mode, owner, size, date, time, path), found in ``base_image_dir`` or above the table:
harmonizing needs no extracted image. Without listings the image folder is listed instead
(warned). Sessions are MIDS folders: a session may hold several images (runs, views), a PNG
and/or a DICOM (``.dcm``) of each; the PNG is kept when both exist. CT sessions are not read.

Harmonized: one row per radiograph (``mod-rx``): ``patient_id`` the subject, ``study_id``
``<subject>/<session>``, ``view_position`` the file name's ``vp-`` entity (``pa``, ``ap``,
``ll``), ``image_id`` its file stem (the ``sample_id``), ``modality`` its suffix (``cr``,
``dx``); the session's report and labels on each of its images (NaN labels where the session
has no labels row). Labels are PadChest's harmonized terms
(:data:`radharmony.datasets.padchest.LABEL_TERMS`, exact terms only) plus ``COVID 19``.

Counts (``expected``) are the first iteration's: 1,311 patients, 1,380 CR and 885 DX studies
(the paper), 5,381 images (a third-party summary; CT included or not is not said); the
iterations 1 + 2 release is larger.

PadChest: the release is "prepared by the same authors as PADCHEST", but neither it nor its
tables name a PadChest ``PatientID`` for any subject or say that patients are shared, so
``bimcv_covid19`` has no identity family: its patients are its own. **Unverified** (no real
file here): the labels table's full column list (it is read by name; one loader reads an
unnamed leading column), the printed list form, the ``tar-tvf`` listing lines (the archive
member paths' prefix), the ``vp-`` values; the harmonizer warns naming the table.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..annotations.labels import multi_hot
from ..errors import MetadataError
from ..spec import DatasetSpec
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.locate import find_optional
from ..table.read_csv import read_table, require_columns
from .padchest import LABEL_MAP as PADCHEST_MAP
from .padchest import LABEL_TERMS as PADCHEST_TERMS
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
LABEL_FILES = ("labels_covid19_posi.tsv", "labels_covid_posi.tsv")
COLUMNS = ("PatientID", "ReportID", "Report", "Labels")
PARTICIPANT_COLUMNS = ("participant", "age", "gender")
LISTING = ".tar-tvf.txt"
LISTING_ROLE = "listing "  # + the file name: one side-file role per archive listing
IMAGE_SUFFIXES = (".png", ".dcm")
COVID = "COVID 19"
LABEL_TERMS = {**PADCHEST_TERMS, COVID: (COVID,)}
LABELS = tuple(LABEL_TERMS)
#: a report's COVID-19 term is a radiological suspicion of COVID-19 pneumonia
LABEL_MAP = {**PADCHEST_MAP, COVID: (("pneumonia", "approximate"),)}
VIEW_MAP = {"PA": "PA", "AP": "AP", "LL": "LATERAL", "LATERAL": "LATERAL"}
#: ``sub-<s>/ses-<e>/mod-rx/<name>`` anywhere in a path -> its parts
IMAGE_PATH = re.compile(r"(?:^|/)(sub-[^/]+)/(ses-[^/]+)/mod-rx/([^/]+)\.(png|dcm)$")
SPEC = DatasetSpec(
    key="bimcv_covid19", title="BIMCV-COVID19+ (chest radiographs, Spanish reports)",
    metadata_files=tuple(f"{d}{n}" for n in LABEL_FILES for d in
                         ("", "derivatives/labels/", "covid19_posi/derivatives/labels/")),
    label_cols=LABELS, label_map=LABEL_MAP, view_map=VIEW_MAP,
    extra_cols=("image_id", "session", "modality", "patient_sex", "patient_age", "labels"),
    outputs=frozenset({"cls", "report"}), age_col="patient_age", sex_col="patient_sex",
    column_types={"patient_age": "Int64", "labels": "json"},
    id_col="image_id",  # the MIDS file stem, whatever the folders
    expected={"patients": 1_311, "cr_studies": 1_380, "dx_studies": 885, "images": 5_381},
    access="BIMCV (bimcv.cipf.es/bimcv-projects/bimcv-covid19): BIMCV-COVID19 Dataset Research "
           "Use Agreement (free registration)")
_FIX = "pass the BIMCV-COVID19+ tables and archive listings as released"


# -- pure helpers ---------------------------------------------------------------------------------
def quoted_terms(cell: str) -> list[str]:
    """A printed term list (``['a' 'b']``, ``['a', 'b']``, ``[]``) -> its stripped terms."""
    text = cell.strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise MetadataError("a Labels cell is not a printed list", expected="e.g. "
                            "\"['COVID 19' 'pneumonia']\" or \"[]\"", found=repr(cell[:80]),
                            fix=_FIX)
    terms = [a or b for a, b in re.findall(r"'([^']*)'|\"([^\"]*)\"", text)]
    return [t.strip() for t in terms if t.strip()]


def listed_images(lines) -> list[str]:
    """Image paths (``.../sub-*/ses-*/mod-rx/*.png|dcm``) of ``tar -tvf`` lines (mode, owner,
    size, date, time, path) or bare paths, in order, each once."""
    out, seen = [], set()
    for line in lines:
        parts = line.rstrip("\n").split(None, 5)
        path = parts[5] if len(parts) == 6 and parts[0][:1] in "-dl" else line.strip()
        path = path.lstrip("./")
        if IMAGE_PATH.search(path) and path not in seen:
            seen.add(path)
            out.append(path)
    return out


# -- harmonizer -----------------------------------------------------------------------------------
class BIMCVCOVID19Harmonizer(BaseHarmonizer):
    """BIMCV-COVID19+: radiographs of 1,311 COVID-19 positive patients, Spanish reports."""

    spec = SPEC
    metadata_description = f"the BIMCV-COVID19+ labels table {LABEL_FILES[0]}"

    def inputs(self, path: Path) -> Inputs:
        """The labels table, ``participants.tsv`` (above it or near the images), every
        ``*.tar-tvf.txt`` listing (in ``base_image_dir`` or the first folder above the table
        holding one) and the image folder, listed for PNGs and DICOMs."""
        root = self.base_image_dir
        above = [path.parents[k] for k in range(min(4, len(path.parents)))]
        listings = next((sorted(d.glob(f"*{LISTING}")) for d in (root, *above)
                         if d is not None and d.is_dir() and any(d.glob(f"*{LISTING}"))), [])
        return Inputs(path, {"participants": find_optional(("participants.tsv",), *above, root),
                             **{f"{LISTING_ROLE}{p.name}": p for p in listings}},
                      {"images": (root if root is not None and root.is_dir() else None,
                                  IMAGE_SUFFIXES)})

    def read(self, inputs: Inputs) -> dict:
        labels = read_table(inputs.metadata, description=self.metadata_description,
                            columns=COLUMNS, sep="\t", dtype=str, keep_default_na=False)
        warnings.warn(f"{inputs.metadata}: the BIMCV-COVID19+ labels table's full column list "
                      f"is not verified against a real copy; only {list(COLUMNS)} are read, by "
                      "name", stacklevel=2)
        part = inputs.file("participants")
        lines: list[str] = []
        for role, path in inputs.files.items():
            if role.startswith(LISTING_ROLE):
                lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
        files = inputs.by_name("images")
        if not lines:
            warnings.warn(f"No *{LISTING} archive listings beside {inputs.metadata} or in "
                          "base_image_dir: the images are those found in the image folder",
                          stacklevel=2)
            lines = [] if files is None else inputs.listing("images")
        return {"labels": labels, "images": lines, "files": files,
                "participants": None if part is None else read_table(
                    part, description="the BIMCV-COVID19+ table participants.tsv",
                    columns=PARTICIPANT_COLUMNS, sep="\t", dtype=str, keep_default_na=False)}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        t = raw["labels"]
        require_columns(t, COLUMNS, source=source, description=f"the table {LABEL_FILES[0]}")
        paths = listed_images(raw["images"])
        found = [IMAGE_PATH.search(p).groups() for p in paths]
        stems = [f"{s}/{e}/{n}" for s, e, n, _ in found]
        keep = pd.Series([x == "png" for *_, x in found], dtype=bool)
        png_stems = {st for st, k in zip(stems, keep) if k}
        keep |= pd.Series([st not in png_stems for st in stems], dtype=bool)  # a DICOM alone
        rows = [(p, f) for p, f, k in zip(paths, found, keep) if k]
        files = raw.get("files") or {}
        subject = pd.Series([f[0] for _, f in rows], dtype=object)
        session = pd.Series([f[1] for _, f in rows], dtype=object)
        names = [f[2] for _, f in rows]
        key = (t["PatientID"].str.strip() + "/" + t["ReportID"].str.strip())
        first = ~key.duplicated()
        table = t[first].set_index(key[first])
        study = subject + "/" + session
        matched = table.reindex(study.to_numpy())
        labels, lists = multi_hot(matched["Labels"].reset_index(drop=True), quoted_terms,
                                  LABEL_TERMS, source=source, column="Labels")
        report = matched["Report"].reset_index(drop=True).str.strip()
        df = pd.DataFrame({
            "patient_id": subject, "study_id": study,
            "image_path": pd.Series([files.get(f"{f[2]}.{f[3]}", p) for p, f in rows],
                                    dtype=object),
            "view_position": pd.Series([_entity(n, "vp") for n in names], dtype=object),
            "report": report.where(report.ne(""), None).astype(object)})
        df[list(LABELS)] = labels
        df["image_id"] = pd.Series(names, dtype=object)
        df["session"] = session
        df["modality"] = pd.Series([n.rsplit("_", 1)[-1] if "_" in n else None for n in names],
                                   dtype=object)
        sex, age = _participants(raw.get("participants"), subject)
        df["patient_sex"] = sex
        df["patient_age"] = age
        df["labels"] = pd.Series(lists, dtype=object)
        return df


def _entity(name: str, key: str) -> str | None:
    """A MIDS file-name entity's value: ``..._vp-pa_...`` -> ``pa``."""
    m = re.search(rf"(?:^|_){key}-([^_]+)", name)
    return m.group(1) if m else None


def _participants(part: pd.DataFrame | None, subject: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Each row's sex (``M``/``F``/None) and age (the first age printed for its subject)."""
    if part is None:
        return pd.Series([None] * len(subject), dtype=object), pd.array([None] * len(subject),
                                                                        dtype="Int64")
    by = part.assign(participant=part["participant"].str.strip()) \
        .drop_duplicates("participant").set_index("participant")
    gender = by["gender"].str.strip().where(by["gender"].str.strip().isin(["M", "F"]))
    age = pd.to_numeric(by["age"].str.extract(r"(\d+(?:\.\d+)?)")[0], errors="coerce")
    sex = gender.reindex(subject.to_numpy()).astype(object)
    years = age.reindex(subject.to_numpy()).round()
    return (pd.Series(sex.to_numpy(), dtype=object).where(sex.notna().to_numpy(), None),
            pd.array(years.to_numpy(), dtype="Int64"))


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class BIMCVCOVID19Dataset(BaseRadiologicalDataset):
        """BIMCV-COVID19+; ``base_image_dir`` is the folder the archives were extracted in (the
        paths of their listings are relative to it; files elsewhere are found by name)."""

        harmonizer_class = BIMCVCOVID19Harmonizer

    return BIMCVCOVID19Dataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["BIMCVCOVID19Harmonizer", "BIMCVCOVID19Dataset"]
