"""The declarative description every dataset module starts with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

#: Columns every harmonized table starts with, in this order.
REQUIRED_COLUMNS = ("patient_id", "study_id", "image_path", "view_position", "report")
#: Columns that identify a row and may never be missing.
ID_COLUMNS = ("patient_id", "study_id", "image_path")
#: The values of the ``split`` column in every dataset that ships an official split (the
#: dataset's own name for it is kept in ``split_raw``); missing where a row has none.
SPLIT_NAMES = ("train", "valid", "test")
#: Columns a dataset derives from its table: the sample id, the canonical view (``view_map``
#: applied to the raw ``view_position``), the age in years and the sex (``"M"``/``"F"``/None)
#: read from the columns the spec names (``age_col``, ``sex_col``; NaN / None without them).
DERIVED_COLUMNS = ("sample_id", "view", "age_years", "sex")
#: Columns every question-level table (``DatasetSpec.row_unit == "question"``: one row per VQA
#: question, see :mod:`radharmony.vqa`) holds after the required ones, with their types.
#: ``image_path`` / ``view_position`` are then the question's key image (PA, else AP, else its
#: first) and ``image_paths`` / ``view_positions`` all its images.
QUESTION_COLUMNS = {"question_id": "text", "question": "text", "answer": "text",
                    "answer_format": "text", "options": "json", "answer_letter": "text",
                    "explanation": "text", "image_paths": "json", "view_positions": "json"}


#: the ordinal scale of a ``grade`` output: a finding's severity 0-4 (index = grade)
GRADE_LEVELS = ("none", "questionable", "mild", "moderate", "severe")
#: the values of a ``<finding>_side`` column (None: not said); ``side`` samples hold
#: ``[left, right]`` per finding, ``both`` as ``[1, 1]``
SIDES = ("left", "right", "both")


def grade_column(finding: str) -> str:
    """The table column holding ``finding``'s grade (0-4, NaN unknown)."""
    return f"{finding}_grade"


def side_column(finding: str) -> str:
    """The table column holding ``finding``'s side (``left`` / ``right`` / ``both`` / None)."""
    return f"{finding}_side"


#: how a dataset's rows name the patients of their identity family (see :class:`Identity`)
LINKS = ("same", "column", "path", "none")


@dataclass(frozen=True)
class Identity:
    """The release whose patients (and images) a dataset shares: its *identity family*.

    Datasets re-annotating one release (MS-CXR and Chest ImaGenome on MIMIC-CXR, CheXlocalize
    on CheXpert, RSNA Pneumonia on NIH ChestX-ray14, ...) declare the same ``family``;
    :func:`radharmony.merge` puts the rows of every family member present under one patient
    namespace, so a patient is on one side of every split and fold.

    Attributes:
        family: the family's name, the registry key of its original release
            (``"mimic_cxr_jpg"``, ``"chexpert"``, ``"nih_cxr14"``, ``"padchest"``, ...).
        link: how a row names its family patient: ``"same"`` (``patient_id`` is the family's
            patient id), ``"column"`` (``column`` names the family's image or patient, e.g. a
            mapping file read into it; rows where it is empty are not linked), ``"path"``
            (the ``image_path`` file stem does) or ``"none"`` (the images are the family's but
            nothing in the table says which: the merge warns, quoting ``note``).
        column: with ``link="column"``: the table column to read.
        pattern: a regular expression whose first group is the family patient id within the
            value read (``column`` or path stem); None: the whole value.
        note: with ``link="none"``: what would link the rows (said in the warning).
    """

    family: str
    link: str = "same"
    column: str | None = None
    pattern: str | None = None
    note: str = ""


#: the units of a published count, in the order the catalog prefers them
COUNT_UNITS = ("images", "questions", "studies", "pairs", "labels")


@dataclass(frozen=True)
class DatasetSpec:
    """What a dataset ships and what its harmonized table holds.

    Attributes:
        key: registry key, also the prefix of every ``sample_id`` (``"<key>:<native id>"``).
        title: human-readable name.
        metadata_files: file names to look for when ``csv_path`` is not given, best first.
        label_cols: label columns of the harmonized table, in output order (``cls``).
        extra_cols: further columns kept for filtering, after the label columns.
        outputs: the ``output_*`` flags this dataset supports (``"report"``, ``"cls"``, ...).
        view_map: raw view name -> canonical view (``PA``, ``AP``, ``LATERAL``, ...).
        expected: published counts (``images``, ``studies``, ``patients``, ``questions``,
            ...) for the full split.
        expected_note: why ``expected`` holds no count of the table's rows where it does not
            (a subset the publishers never counted, a count given only rounded); the catalog
            shows it in place of the count.
        access: where the data comes from and under what terms.
        group_col: the column splits are grouped by (never split across train/val).
        id_col: the column whose value is the native id in ``sample_id``.
        box_units: units of the ``boxes`` column: ``"normalized"`` ([0, 1] of the source image)
            or ``"pixel"`` (source pixels, when the metadata gives no image size).
        root_col: for a table spanning several image roots (e.g. a merged dataset), the
            column whose value names each row's root; None: every row is under one root.
        label_map: label column -> its canonical findings, a tuple of ``(finding, relation)``
            pairs (relation ``exact``, ``narrower``, ``broader`` or ``approximate``; see
            :mod:`radharmony.vocabulary`), or None for a label explicitly left unmapped.
        column_types: the type of each extra column that is not text: ``"Int64"`` (nullable
            integer), ``"int64"``, ``"float64"``, ``"float32"`` or ``"json"`` (lists and dicts;
            ``boxes`` is always nested). Every other extra column is text. ``validate``
            restores these types, so a table read back with a bare ``pd.read_csv`` is the
            table that was written.
        zero_pad: text columns made of zero-padded digits -> their width (NIH patient ids
            ``00000001``): a CSV reader turns them into numbers, ``validate`` pads them back.
        age_col, age_format: the table column holding the patient's age and its encoding
            (``"years"``, ``"dicom_as"`` such as ``"007Y"``, ``"auto"`` for both, or
            ``"birth_year"`` measured at ``study_date_col``), read into ``age_years``; see
            :func:`radharmony.annotations.demographics.parse_age_years`.
        study_date_col: the study date (``YYYYMMDD`` or year) a birth-year age is taken at.
        sex_col: the table column holding the patient's sex, read into ``sex``.
        row_unit: what one row of the table is: ``"image"`` (``image_path`` unique),
            ``"volume"`` (a CT or MR volume, ``image_path`` its file or series folder, unique;
            served by :class:`radharmony.data.volumes.VolumeDataset`) or ``"question"`` (a
            VQA question: ``question_id`` unique, the :data:`QUESTION_COLUMNS` checked; see
            :mod:`radharmony.table.questions`).
        identity: the identity family the dataset's patients belong to (:class:`Identity`);
            None: its patients are its own.
        reg_cols: extra columns holding regression targets (float, NaN unknown), named by
            their canonical target (``bone_age_months``: see
            :data:`radharmony.vocabulary.TARGETS`), in ``reg`` order.
        grades: canonical findings whose severity the table grades, in ``grade`` order: the
            extra column :func:`grade_column` holds 0-4 (:data:`GRADE_LEVELS`) or NaN.
        sides: canonical findings whose side the table gives, in ``side`` order: the extra
            column :func:`side_column` holds one of :data:`SIDES` or None.
    """

    key: str
    title: str
    metadata_files: tuple[str, ...] = ()
    label_cols: tuple[str, ...] = ()
    extra_cols: tuple[str, ...] = ()
    outputs: frozenset[str] = frozenset()
    view_map: Mapping[str, str] = field(default_factory=dict)
    expected: Mapping[str, int] = field(default_factory=dict)
    access: str = ""
    group_col: str = "patient_id"
    id_col: str = "image_path"
    box_units: str = "normalized"
    root_col: str | None = None
    label_map: Mapping[str, tuple | None] = field(default_factory=dict)
    column_types: Mapping[str, str] = field(default_factory=dict)
    zero_pad: Mapping[str, int] = field(default_factory=dict)
    age_col: str | None = None
    age_format: str = "years"
    study_date_col: str | None = None
    sex_col: str | None = None
    row_unit: str = "image"
    identity: Identity | None = None
    reg_cols: tuple[str, ...] = ()
    grades: tuple[str, ...] = ()
    sides: tuple[str, ...] = ()
    expected_note: str = ""

    @property
    def grade_cols(self) -> tuple[str, ...]:
        return tuple(map(grade_column, self.grades))

    @property
    def side_cols(self) -> tuple[str, ...]:
        return tuple(map(side_column, self.sides))

    def published_count(self) -> str | None:
        """The release's count of what the table holds, in the first unit of
        :data:`COUNT_UNITS` that ``expected`` gives (``"1,162 pairs"``; images as a bare
        number); None where it gives none (``expected_note`` says why)."""
        for unit in COUNT_UNITS:
            n = self.expected.get(unit)
            if n is not None:
                return f"{n:,}" if unit == "images" else f"{n:,} {unit}"
        return None

    @property
    def columns(self) -> tuple[str, ...]:
        return REQUIRED_COLUMNS + self.label_cols + self.extra_cols
