"""Labels from a dataset's own reports: ``labels="report"`` on ReXGradient, OpenI, MIMIC-CXR-JPG
and X-Raydar harmonizers and datasets.

With ``labels="report"`` the label columns of the table are CheXpert's 14 observations, under
CheXpert's names and in CheXpert's order (:data:`radharmony.datasets.chexpert.LABELS`),
computed by :func:`radharmony.reports.label_reports` from each row's ``report`` (1 / 0 / -1 /
NaN; a row without a report is all NaN). They *replace* the dataset's shipped label columns
(MIMIC's CheXpert/NegBIO columns, OpenI's MeSH columns, X-Raydar's own), so ``spec.label_cols``
and ``spec.label_map`` (CheXpert's, reused) describe exactly what the table holds. The spec is
the instance's (:func:`report_spec`); the sample ids and the registry key do not change.

``report_probable="positive"`` labels probable hedges ("probable", "likely", "X versus Y",
"borderline") 1 instead of -1 (:func:`~radharmony.reports.label_reports`'s ``probable=``).

The labels are computed once per harmonize and kept in the table cache; the labeler key
(:func:`radharmony.reports.labeler_key`: labeler version + a hash of every rule) is part of the
harmonizer's :meth:`arguments`, so changed rules are a cache miss (and so is a changed
``report_probable``).

>>> from radharmony.datasets.rexgradient import ReXGradientTrainHarmonizer
>>> h = ReXGradientTrainHarmonizer("train_metadata_view_position.json", labels="report")
>>> h.spec.label_cols[:3], h.spec.label_map["Cardiomegaly"]
(('No Finding', 'Enlarged Cardiomediastinum', 'Cardiomegaly'), (('cardiomegaly', 'exact'),))
>>> ReXGradientTrainHarmonizer("train_metadata_view_position.json").spec.label_cols
()
"""

from __future__ import annotations

import copy
import dataclasses
import os

import pandas as pd

from ..errors import RadHarmonyError, check_choice
from ..spec import DatasetSpec
from ..table.schema import validate
from .chexpert import LABEL_MAP as CHEXPERT_LABEL_MAP
from .chexpert import LABELS as CHEXPERT_LABELS

LABEL_SOURCES = (None, "report")


def report_spec(spec: DatasetSpec) -> DatasetSpec:
    """``spec`` with CheXpert's 14 report-derived label columns in place of its own."""
    return dataclasses.replace(spec, label_cols=CHEXPERT_LABELS,
                               label_map=dict(CHEXPERT_LABEL_MAP),
                               outputs=spec.outputs | {"cls"})


def _rules_argument(rules):
    """Rules as the harmonizer keeps them: None or a tuple of paths (JSON-serializable)."""
    if rules is None:
        return None
    paths = [rules] if isinstance(rules, (str, os.PathLike)) else rules
    try:
        out = tuple(os.fspath(p) for p in paths)
    except TypeError:
        raise RadHarmonyError("report_rules must be rule file paths",
                              expected="None, a .tsv path or a list of paths",
                              found=type(rules).__name__,
                              fix="write the rules to a .tsv file and pass its path") from None
    return out


def _probable_argument(value) -> str:
    from ..reports.labeler import PROBABLE

    return check_choice("report_probable", value, tuple(PROBABLE))


def _without_report_labels(found: str) -> RadHarmonyError:
    return RadHarmonyError("report_rules or report_probable given without labels='report'",
                           expected="labels='report' with report_rules / report_probable",
                           found=found, fix="pass labels='report' too")


def report_label_columns(reports: pd.Series, *, rules=None,
                         probable: str = "uncertain") -> pd.DataFrame:
    """The 14 CheXpert columns (CheXpert order, float32) of ``reports``; each distinct
    report text is labelled once."""
    from ..reports import label_reports

    labels = label_reports(reports.reset_index(drop=True), vocabulary="chexpert",
                           rules=list(rules) if rules else None, probable=probable)
    return labels[list(CHEXPERT_LABELS)].set_axis(reports.index)


class ReportLabelsHarmonizer:
    """Mixin for a harmonizer whose dataset ships reports: adds ``labels=`` and
    ``report_rules=`` / ``report_probable=`` (see the module docstring). Put it first in the
    bases."""

    def __init__(self, csv_path=None, base_image_dir=None, *, labels: str | None = None,
                 report_rules=None, labeler: str | None = None,
                 report_probable: str = "uncertain"):
        super().__init__(csv_path, base_image_dir)
        self.labels = check_choice("labels", labels, LABEL_SOURCES)
        self.report_rules = _rules_argument(report_rules)
        self.report_probable = _probable_argument(report_probable)
        if (self.report_rules or self.report_probable != "uncertain") and self.labels is None:
            raise _without_report_labels(f"labels=None, report_rules={self.report_rules}, "
                                         f"report_probable={self.report_probable!r}")
        if self.labels == "report":
            from ..reports import labeler_key

            self.spec = report_spec(type(self).spec)
            # a saved table keeps the key it was labelled with; a fresh one takes the current
            self.labeler = labeler or labeler_key(list(self.report_rules or ()) or None)
        else:
            self.labeler = None

    def arguments(self) -> dict:
        args = super().arguments()
        if self.labels is not None:
            args.update(labels=self.labels, report_rules=None if self.report_rules is None
                        else list(self.report_rules), labeler=self.labeler)
            if self.report_probable != "uncertain":
                args.update(report_probable=self.report_probable)
        return args

    def _harmonize_inputs(self, inputs):
        if self.labels is None:
            return super()._harmonize_inputs(inputs)
        from ..reports import labeler_key

        current = labeler_key(list(self.report_rules or ()) or None)
        if self.labeler != current:
            raise RadHarmonyError(f"{type(self).__name__} was made with labeler {self.labeler!r}",
                                  expected=f"the current labeler {current!r}",
                                  found=repr(self.labeler),
                                  fix="construct the harmonizer without labeler= to label "
                                      "the reports afresh")
        shipped = copy.copy(self)
        shipped.spec = type(self).spec  # the dataset's own table first
        df = super(ReportLabelsHarmonizer, shipped)._harmonize_inputs(inputs)
        df = df.drop(columns=list(type(self).spec.label_cols))
        labels = report_label_columns(df["report"], rules=self.report_rules,
                                      probable=self.report_probable)
        df = pd.concat([df, labels], axis=1)
        return validate(df, self.spec, source=str(inputs.metadata))


class ReportLabelsDataset:
    """Mixin for a dataset whose harmonizer takes ``labels=``: the dataset takes
    ``labels="report"`` (and ``report_rules=``, ``report_probable=``), builds its harmonizer
    with them and uses the report spec. Put it first in the bases."""

    def __init__(self, base_image_dir=None, csv_path=None, transform=None, *,
                 labels: str | None = None, report_rules=None,
                 report_probable: str = "uncertain", **kwargs):
        labels = check_choice("labels", labels, LABEL_SOURCES)
        report_probable = _probable_argument(report_probable)
        given = kwargs.get("harmonizer_path") is not None or kwargs.get("harmonizer") is not None
        if labels == "report" and kwargs.get("harmonized_df") is not None:
            kwargs.setdefault("spec", report_spec(type(self).spec))
        elif labels == "report" and not given:
            kwargs["harmonizer"] = self.harmonizer_class(
                csv_path, base_image_dir, labels="report", report_rules=report_rules,
                report_probable=report_probable)
        elif labels is None and (report_rules is not None or report_probable != "uncertain"):
            raise _without_report_labels("labels=None")
        # a given harmonizer brings its own labels (the base class takes its spec)
        super().__init__(base_image_dir, csv_path, transform, **kwargs)
        if labels == "report" and given and kwargs.get("harmonized_df") is None \
                and getattr(self.harmonizer, "labels", "report") != "report":
            raise RadHarmonyError(f"{type(self).__name__}(labels='report') got a harmonizer "
                                  "made without labels='report'",
                                  expected="a harmonizer made with labels='report'",
                                  found=f"labels={self.harmonizer.labels!r}",
                                  fix="make (and save) the harmonizer with labels='report', "
                                      "or leave labels= out: the harmonizer's table decides")
