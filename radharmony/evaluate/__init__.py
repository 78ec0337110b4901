"""Evaluate what is trained on these datasets, offline.

* :func:`embed` -- a frozen encoder's vectors for every image of a dataset, keyed by
  ``sample_id`` and cached without pickle (:class:`Embeddings`).
* :func:`linear_probe`, :func:`knn_probe` -- per-label probes in patient-grouped k-fold or
  fixed train/test mode, AUROC / AUPRC / F1 / sensitivity / specificity / PPV / NPV with 95 %
  intervals from a bootstrap over patients (:class:`ProbeResult`), ROC and label-efficiency
  figures (:func:`plot_roc`, :func:`plot_label_efficiency`).
* :func:`regression_scores`, :func:`side_scores` -- MAE / RMSE / bias of ``reg`` and
  ``grade`` predictions (``exact`` / ``within_one`` for grades) and side accuracy, with
  intervals from the same patient bootstrap.
* :func:`report_metrics` -- BLEU-1..4, ReXrank's BLEU-2, ROUGE-L and a clinical F1 over the 14
  CheXpert observations for generated reports (:class:`ReportScores`).

scikit-learn, sacrebleu and rouge-score come with ``pip install radharmony[eval]``; they are
imported when a function needs them.
"""

from .embeddings import Embeddings, embed, encoder_fingerprint, table_fingerprint
from .plots import plot_label_efficiency, plot_roc
from .probes import ProbeResult, knn_probe, linear_probe
from .regression import regression_scores, side_scores
from .reports import CHEXPERT_14, ReportScores, report_metrics
from .sides import targets

__all__ = ["CHEXPERT_14", "Embeddings", "ProbeResult", "ReportScores", "embed",
           "encoder_fingerprint", "knn_probe", "linear_probe", "plot_label_efficiency",
           "plot_roc", "regression_scores", "report_metrics", "side_scores", "table_fingerprint",
           "targets"]
