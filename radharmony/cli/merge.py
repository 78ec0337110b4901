"""``radharmony merge KEY... --root KEY=DIR ... -o merged.parquet`` and ``radharmony vocab``.

To wire into :mod:`radharmony.cli`: call :func:`add_parser` with the subparsers object and the
``common`` parent parser (``--json``/``--quiet``); it adds both commands, each with its ``func``.

``merge`` reads each dataset's metadata (no image is read), merges them with
:func:`radharmony.merge` and writes the merged table (``harmonized_df``) as Parquet; it prints
the per-source summary (``merge_report``). ``vocab`` prints the canonical findings and every
dataset's mapping onto them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .output import EXIT_OK, UsageError, emit


def _pairs(values, *, flag: str, keys) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for v in values or ():
        key, sep, path = v.partition("=")
        if not sep or not key or not path:
            raise UsageError(f"{flag} {v!r} is not KEY=PATH (e.g. {flag} nih_cxr14=/data/nih)")
        if key not in keys:
            raise UsageError(f"{flag} {v!r} names {key!r}, which is not among the merged keys "
                             f"{list(keys)}")
        out[key] = Path(path)
    return out


def dataset_arguments(p) -> None:
    """Several datasets on one command line: ``KEY...``, ``--root KEY=DIR`` per key and
    ``--csv-path KEY=FILE`` (read by :func:`_pairs`); ``merge`` and ``audit`` take them."""
    p.add_argument("keys", nargs="+", metavar="KEY", help="dataset keys (see `radharmony list`)")
    p.add_argument("--root", action="append", required=True, metavar="KEY=DIR",
                   help="a dataset's image folder (base_image_dir); one per KEY")
    p.add_argument("--csv-path", action="append", metavar="KEY=FILE",
                   help="a dataset's metadata file (found near its root when omitted)")


def dataset_sources(args: argparse.Namespace) -> tuple[list[str], dict, dict]:
    """The keys (first occurrence each), their roots and metadata files from
    :func:`dataset_arguments`' flags; a key without ``--root`` is a usage error."""
    keys = list(dict.fromkeys(args.keys))
    roots = _pairs(args.root, flag="--root", keys=keys)
    csvs = _pairs(args.csv_path, flag="--csv-path", keys=keys)
    missing = [k for k in keys if k not in roots]
    if missing:
        raise UsageError(f"no --root for {missing}: pass --root KEY=DIR for every KEY")
    return keys, roots, csvs


def add_parser(subparsers, *, parents=()) -> None:
    """Add the ``merge`` and ``vocab`` subcommands."""
    p = subparsers.add_parser(
        "merge", parents=list(parents), help="several datasets in one label space",
        description="Merge datasets into the canonical findings (1 / 0 / -1 / NaN, no invented "
        "negatives) and write the merged table as Parquet; prints, per source, how many "
        "label values were mapped, transferred one way or left unknown.")
    dataset_arguments(p)
    p.add_argument("-o", "--out", required=True, type=Path, metavar="FILE.parquet")
    p.add_argument("--findings", metavar="ID,...",
                   help="comma-separated canonical finding ids (default: all)")
    p.add_argument("--approximate", action="store_true",
                   help="let approximate relations transfer values")
    p.set_defaults(func=run)

    v = subparsers.add_parser(
        "vocab", parents=list(parents), help="the canonical findings and the mappings",
        description="Print the canonical findings (id, name, parents, UMLS CUI) and each "
        "dataset's source labels with their finding and relation.")
    v.add_argument("--dataset", action="append", metavar="KEY",
                   help="only these datasets' mappings (repeatable)")
    v.add_argument("--declared", action="store_true",
                   help="only declared relations (not those the hierarchy adds)")
    v.set_defaults(func=run_vocab)


def run(args: argparse.Namespace) -> int:
    """Merge ``args.keys`` and write ``args.out``; returns the exit code (0)."""
    import warnings

    from ..combine import merge
    from ..registry import get_dataset_class

    out = Path(args.out)
    if out.suffix.lower() != ".parquet":
        raise UsageError(f"--out {out} must end in .parquet")
    keys, roots, csvs = dataset_sources(args)
    findings = [f.strip() for f in args.findings.split(",") if f.strip()] \
        if args.findings else None
    datasets = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in keys:
            datasets.append(get_dataset_class(k)(roots[k], csv_path=csvs.get(k),
                                                 cache_dir=None))
        merged = merge(datasets, findings=findings, approximate=args.approximate)
    out.parent.mkdir(parents=True, exist_ok=True)
    merged.harmonized_df.to_parquet(out, index=False)
    report = merged.merge_report
    result = {"keys": keys, "rows": len(merged), "findings": list(merged.findings),
              "out": str(out), "report": report.to_dict("records"),
              "warnings": [str(w.message) for w in caught]}

    def text(r):
        lines = [str(w) for w in r["warnings"]]
        lines.append(report.to_string(index=False))
        lines.append(f"Wrote {r['rows']:,} rows x {len(r['findings'])} findings to {r['out']}")
        return "\n".join(lines)

    emit(args, result, text)
    return EXIT_OK


def run_vocab(args: argparse.Namespace) -> int:
    """Print the vocabulary and the mapping; returns the exit code (0)."""
    from .. import vocabulary

    f = vocabulary.findings()
    m = vocabulary.mapping(args.dataset, expand=not args.declared)
    f_out = f.assign(parents=f["parents"].map(list))
    result = {"findings": f_out.to_dict("records"), "mapping": m.to_dict("records")}

    def text(_):
        show = f.assign(parents=f["parents"].map(", ".join))[["id", "name", "parents", "kind",
                                                              "umls_cui"]]
        return (f"{len(f)} canonical findings\n{show.to_string(index=False)}\n\n"
                f"{len(m)} mapping rows\n{m.to_string(index=False)}")

    emit(args, result, text)
    return EXIT_OK
