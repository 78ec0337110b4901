"""``radharmony label-reports KEY --root DIR -o labels.parquet [--explain]``.

To wire into :mod:`radharmony.cli`: call :func:`add_parser` with the subparsers object (and
the ``common`` parent parser for ``--json``/``--quiet``); it sets ``func=run``.

The harmonized table of ``KEY`` is read (metadata only), its ``report`` column labelled, and
the labels written as Parquet beside the table's id columns; the schema metadata carries
``radharmony.report_labels`` = the labeler key (version + rules hash), the vocabulary and
``--probable`` (how probable hedges are valued).
``--explain`` also writes ``<out>.explain.parquet`` (one row per label with the sentence,
mention and cue that decided it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import RadHarmonyError

ID_COLUMNS = ("sample_id", "patient_id", "study_id", "image_path")


def add_parser(subparsers, *, parents=()) -> argparse.ArgumentParser:
    """Add the ``label-reports`` subcommand."""
    p = subparsers.add_parser(
        "label-reports", parents=list(parents), help="labels from the reports (rule-based)",
        description="Label a dataset's reports with radharmony's rule-based labeler "
        "(CheXpert's 14 observations or the canonical findings) and write them as Parquet.")
    p.add_argument("key", metavar="KEY", help="dataset key with reports (see `radharmony list`)")
    p.add_argument("--root", required=True, type=Path, metavar="DIR",
                   help="the dataset's image folder (base_image_dir)")
    p.add_argument("--csv-path", type=Path, metavar="FILE",
                   help="the metadata file (found near --root when omitted)")
    p.add_argument("-o", "--out", required=True, type=Path, metavar="FILE.parquet")
    p.add_argument("--vocabulary", choices=("chexpert", "canonical"), default="chexpert")
    p.add_argument("--rules", type=Path, action="append", metavar="TSV",
                   help="extra rule file or folder (repeatable), added to the built-in rules")
    p.add_argument("--probable", choices=("uncertain", "positive"), default="uncertain",
                   help="value of a probable hedge ('probable', 'likely', 'X versus Y'): "
                        "uncertain -1 (CheXpert, default) or positive 1")
    p.add_argument("--explain", action="store_true",
                   help="also write OUT.explain.parquet with the deciding sentence and cue")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Label ``args.key``'s reports and write ``args.out``; returns the exit code (0)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..registry import get_harmonizer_class
    from ..reports.labeler import label_reports
    from ..reports.rules import resolve_rules

    out = Path(args.out)
    if out.suffix.lower() != ".parquet":
        raise RadHarmonyError(f"--out {out} is not a .parquet file", expected="FILE.parquet",
                              found=out.name, fix="pass -o labels.parquet")
    harmonizer = get_harmonizer_class(args.key)(csv_path=args.csv_path,
                                                base_image_dir=args.root)
    df = harmonizer.harmonize()
    if "report" not in df.columns:
        raise RadHarmonyError(f"Dataset {args.key!r} has no reports", expected="a table with "
                              "a 'report' column", found=f"columns {list(df.columns)[:8]}",
                              fix="pick a dataset whose outputs include 'report'")
    rules = resolve_rules(args.rules)
    result = label_reports(df["report"], vocabulary=args.vocabulary, explain=args.explain,
                           rules=rules, probable=args.probable)
    labels, evidence = result if args.explain else (result, None)
    ids = df[[c for c in ID_COLUMNS if c in df.columns]].reset_index(drop=True)
    table = pa.Table.from_pandas(ids.join(labels.reset_index(drop=True)), preserve_index=False)
    meta = {**(table.schema.metadata or {}),
            b"radharmony.report_labels": json.dumps({"key": rules.key, "dataset": args.key,
                                                     "vocabulary": args.vocabulary,
                                                     "probable": args.probable}).encode()}
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.replace_schema_metadata(meta), out)
    written = [str(out)]
    if evidence is not None:
        ev_path = out.with_name(out.stem + ".explain.parquet")
        evidence.to_parquet(ev_path, index=False)
        written.append(str(ev_path))
    result = {"key": args.key, "rows": len(labels), "labeler": rules.key, "out": written,
              "positive": {c: int((labels[c] == 1).sum()) for c in labels.columns}}
    if getattr(args, "json", False):
        print(json.dumps(result, indent=2))
    else:
        print(f"Labelled {len(labels):,} reports of {args.key} ({rules.key}); wrote "
              + ", ".join(written))
    return 0
