"""``radharmony evaluate probe ...`` and ``radharmony evaluate reports HYP.jsonl REF.jsonl``.

:func:`add_parser` adds the ``evaluate`` command to the main parser's subparsers and
:func:`run` executes it (exit code 0, 1 for errors the library reports, 2 for bad usage).

``probe`` scores a dataset's labels from embeddings: ``--embeddings FILE.npz`` (written by
``Embeddings.save`` or found in an ``embed`` cache), or ``--encoder MODULE:FUNCTION``, a
function importable on this machine that returns the encoder (it runs your code, as any
model loading does). ``reports`` reads two JSON-lines files; a line is a JSON string or an
object with the text under ``--text-key`` (default: the first of ``report``, ``text``,
``findings``) and an id under ``--id-key`` (default: the first of ``study_id``,
``sample_id``, ``id``); pairs are matched by id when both files have ids, else by line order.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import RadHarmonyError

TEXT_KEYS = ("report", "text", "findings")
ID_KEYS = ("study_id", "sample_id", "id")


class _Usage(Exception):
    pass


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``evaluate`` (with ``probe`` and ``reports``) to ``subparsers``; returns it."""
    p = subparsers.add_parser("evaluate", help="probe embeddings, score generated reports",
                              description="Evaluate encoders (linear / kNN probes) and "
                              "report generators (BLEU, ROUGE-L, clinical F1), offline.")
    p.set_defaults(func=run)
    sub = p.add_subparsers(dest="evaluate_command", metavar="WHAT", required=True)

    q = sub.add_parser("probe", help="linear or kNN probe per label",
                       description="Per-label probe with patient-grouped k-fold (or --test-key) "
                       "and bootstrap intervals over patients; prints or writes the tidy table.")
    q.add_argument("key", metavar="KEY", help="dataset key (see `radharmony list`)")
    q.add_argument("--root", required=True, type=Path, metavar="DIR",
                   help="the dataset's image folder (base_image_dir)")
    q.add_argument("--csv-path", type=Path, metavar="FILE", help="the metadata file")
    src = q.add_mutually_exclusive_group(required=True)
    src.add_argument("--embeddings", type=Path, metavar="FILE", action="append",
                     help="embeddings .npz (repeat for train and test)")
    src.add_argument("--encoder", metavar="MODULE:FUNCTION",
                     help="a function returning the encoder (torch.nn.Module or callable)")
    q.add_argument("--test-key", metavar="KEY", help="fixed split: score this dataset")
    q.add_argument("--test-root", type=Path, metavar="DIR", help="its image folder")
    q.add_argument("--knn", type=int, metavar="K", help="kNN probe with K neighbours "
                   "(default: linear probe)")
    q.add_argument("--folds", type=int, default=5, help="k-fold folds (default 5)")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                   help="bootstrap resamples (default 1000; 0: no intervals)")
    q.add_argument("--n-train", metavar="N[,N...]", help="training patients, e.g. 10,100,1000")
    q.add_argument("--threshold", default="youden", help="youden, f1 or a number")
    q.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                   help="image and embedding cache (default: none)")
    q.add_argument("--batch-size", type=int, default=64)
    q.add_argument("--out", type=Path, metavar="FILE.csv", help="write the metrics table")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    q.add_argument("--config", action="append", type=Path, metavar="FILE", default=[],
                   help="register the dataset a YAML/JSON config describes (repeatable), so "
                   "KEY or --test-key can name your own dataset")

    r = sub.add_parser("reports", help="BLEU, ROUGE-L and clinical F1 of generated reports",
                       description="Score generated reports (HYP) against references (REF).")
    r.add_argument("hyp", type=Path, metavar="HYP.jsonl")
    r.add_argument("ref", type=Path, metavar="REF.jsonl")
    r.add_argument("--text-key", default=None, help=f"text field (default: {TEXT_KEYS})")
    r.add_argument("--id-key", default=None, help=f"id field (default: {ID_KEYS})")
    r.add_argument("--no-clinical", action="store_true", help="skip the clinical F1")
    r.add_argument("--out", type=Path, metavar="DIR", help="write summary/per_report/per_label "
                   "CSVs here")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.add_argument("-q", "--quiet", action="store_true", help="(no effect; accepted)")
    return p


def run(args: argparse.Namespace) -> int:
    """Execute ``radharmony evaluate ...``; returns the exit code."""
    try:
        if args.evaluate_command == "probe":
            return _probe(args)
        return _reports(args)
    except _Usage as exc:
        print(f"radharmony evaluate: {exc}", file=sys.stderr)
        return 2
    except RadHarmonyError as exc:
        if getattr(args, "json", False):
            print(json.dumps({"ok": False, "error": {"type": type(exc).__name__,
                                                     "message": str(exc)}}, indent=2))
        print(f"radharmony evaluate: {exc}", file=sys.stderr)
        return 1


def read_jsonl(path: Path, *, text_key=None, id_key=None) -> tuple[list, list[str]]:
    """``(ids or None per line, texts)`` of a JSON-lines file."""
    if not path.is_file():
        raise RadHarmonyError(f"{path} does not exist", expected="a JSON-lines file",
                              found="no such file", fix="check the path")
    ids, texts = [], []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RadHarmonyError(f"{path}, line {n} is not JSON", expected="one JSON "
                                      "value per line", found=str(exc), fix="fix that line") \
                    from None
            if isinstance(obj, str):
                ids.append(None)
                texts.append(obj)
                continue
            if not isinstance(obj, dict):
                raise RadHarmonyError(f"{path}, line {n} is neither a string nor an object",
                                      expected="a JSON string or object",
                                      found=type(obj).__name__, fix="write one report per line")
            tk = text_key or next((k for k in TEXT_KEYS if k in obj), None)
            if tk is None or tk not in obj:
                raise RadHarmonyError(f"{path}, line {n} has no report text",
                                      expected=f"a field {text_key or ' / '.join(TEXT_KEYS)}",
                                      found=f"fields {sorted(obj)}", fix="pass --text-key")
            ik = id_key or next((k for k in ID_KEYS if k in obj), None)
            ids.append(None if ik is None else obj.get(ik))
            texts.append(obj[tk])
    return ids, texts


def _reports(args) -> int:
    from ..evaluate.reports import report_metrics

    h_ids, hyp = read_jsonl(args.hyp, text_key=args.text_key, id_key=args.id_key)
    r_ids, ref = read_jsonl(args.ref, text_key=args.text_key, id_key=args.id_key)
    ids = None
    if all(i is not None for i in h_ids + r_ids):
        index = {str(i): t for i, t in zip(r_ids, ref)}
        missing = [i for i in h_ids if str(i) not in index]
        if missing:
            raise RadHarmonyError(f"{len(missing)} hypotheses have no reference",
                                  expected="every hypothesis id in REF",
                                  found=f"e.g. {missing[:3]}", fix="score matching files")
        ref, ids = [index[str(i)] for i in h_ids], h_ids
    scores = report_metrics(hyp, ref, clinical=not args.no_clinical, ids=ids)
    if args.out:
        scores.to_csv(args.out)
    if args.json:
        print(json.dumps({"ok": True, "n": len(hyp), "metrics": scores.to_dict()}, indent=2))
    else:
        print(f"{len(hyp)} report pairs")
        for m, v in scores.to_dict().items():
            print(f"  {m:<28}{v:.4f}")
    return 0


def _load_encoder(spec: str):
    import importlib

    module, _, name = spec.partition(":")
    if not module or not name:
        raise _Usage(f"--encoder {spec!r}: expected MODULE:FUNCTION")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise RadHarmonyError(f"Cannot load the encoder {spec!r}", expected="an importable "
                              "MODULE:FUNCTION", found=str(exc), fix="check the name") from None
    return fn()


def _probe(args) -> int:
    from ..registry import get_dataset_class
    from ..evaluate.embeddings import Embeddings, embed
    from ..evaluate.probes import knn_probe, linear_probe

    if (args.test_key is None) != (args.test_root is None):
        raise _Usage("--test-key and --test-root go together")
    try:
        threshold = float(args.threshold)
    except ValueError:
        threshold = args.threshold
    n_train = None
    if args.n_train:
        try:
            n_train = [int(v) for v in args.n_train.split(",")]
        except ValueError:
            raise _Usage(f"--n-train {args.n_train!r}: expected integers such as 10,100") \
                from None

    def build(key, root, csv=None):
        return get_dataset_class(key)(root, csv, cache_dir=args.cache_dir)

    ds = build(args.key, args.root, args.csv_path)
    test = build(args.test_key, args.test_root) if args.test_key else None
    if args.embeddings:
        emb = Embeddings.concat(Embeddings.load(p) for p in args.embeddings)
    else:
        encoder = _load_encoder(args.encoder)
        parts = [embed(encoder, d, batch_size=args.batch_size, cache_dir=args.cache_dir,
                       fingerprint=args.encoder, progress=not args.quiet)
                 for d in ([ds] if test is None else [ds, test])]
        emb = Embeddings.concat(parts)
    kw = dict(folds=args.folds, seed=args.seed, n_bootstrap=args.bootstrap, test=test,
              n_train=n_train, threshold=threshold)
    res = knn_probe(emb, ds, k=args.knn, **kw) if args.knn else linear_probe(emb, ds, **kw)
    if args.out:
        res.to_csv(args.out)
    if args.json:
        print(res.metrics.to_json(orient="records", indent=2))
    else:
        view = res.metrics[res.metrics["metric"] == "auroc"]
        print(view.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0
