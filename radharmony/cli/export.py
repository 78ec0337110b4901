"""``radharmony export KEY --format webdataset -o DIR``: the command behind the export.

Wiring: ``add_parser(subparsers, parents=[common])`` in the main parser; it sets
``func=run``. Exit codes as the main command: 0 written, 1 samples failed (listed, and in the
manifest), 2 usage errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .output import EXIT_OK, EXIT_PROBLEMS, UsageError, positive as _positive
from .output import workers as _workers
from .studies import add_export_args, run_export as run_study_export

FORMATS = ("webdataset", "llava", "parquet")  # llava, parquet: --level study


def engine_args(p: argparse.ArgumentParser) -> None:
    """``--engine local|ray`` and ``--address`` (shared by ``cache`` and ``export``)."""
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="'local' (default) or 'ray': run the work as Ray tasks on the cluster "
                   "at --address, or on a local one (pip install radharmony[ray])")
    p.add_argument("--address", metavar="ADDR", default=None,
                   help="with --engine ray: the cluster to join ('auto' on a cluster node, "
                   "ray://HEAD:10001, HEAD:6379); default: start a local cluster")


def _check_engine(args: argparse.Namespace) -> None:
    if args.address is not None and args.engine != "ray":
        raise UsageError("--address needs --engine ray")


def add_parser(subparsers, *, parents=()) -> argparse.ArgumentParser:
    """Add the ``export`` subcommand to ``subparsers`` (an argparse subparsers action)."""
    p = subparsers.add_parser(
        "export", parents=list(parents), help="write WebDataset tar shards",
        description="Preprocess every image with the built-in pipeline and write WebDataset "
        "tar shards (PNG image, JSON outputs) with manifest.json (counts, SHA-256 per shard, "
        "dataset fingerprint). Intact shards of an earlier run are kept. Exits 1 when some "
        "samples fail (they are listed, and recorded in the manifest).")
    if not parents:
        p.add_argument("--json", action="store_true", help="print the manifest summary as JSON")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.add_argument("key", metavar="KEY", help="dataset key, or a family with --split")
    p.add_argument("--root", required=True, type=Path, metavar="DIR",
                   help="the dataset's image folder (base_image_dir)")
    p.add_argument("--csv-path", type=Path, metavar="FILE",
                   help="the metadata file (found near --root when omitted)")
    p.add_argument("--format", choices=FORMATS, default="webdataset",
                   help="output format (default webdataset)")
    p.add_argument("-o", "--out", required=True, type=Path, metavar="DIR",
                   help="export folder (one export per folder)")
    p.add_argument("--shard-size", type=_positive, default=1000, metavar="N",
                   help="samples per shard (default 1000)")
    p.add_argument("--split", metavar="NAME", help="with a family KEY (rexgradient): which "
                   "registered split; with a full KEY: 'train' or 'valid', the sides of "
                   "get_datasets(n_splits=--n-splits, seed=--seed), grouped by patient")
    p.add_argument("--n-splits", type=_positive, default=10, metavar="N",
                   help="folds for --split train|valid with a full KEY (default 10)")
    p.add_argument("--seed", type=int, default=0, help="split seed (default 0)")
    p.add_argument("--workers", type=_workers, default=0, metavar="N",
                   help="processes writing shards (default 0: in this process); with "
                   "--engine ray and no --address, CPUs of the local Ray cluster (0: all)")
    p.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                   help="use and fill this image cache (default: none)")
    p.add_argument("--bits", type=int, choices=(8, 16), default=None,
                   help="store images at this depth (default: the pipeline's, 8)")
    p.add_argument("--on-error", choices=("raise", "skip"), default="raise",
                   help="failed samples: 'raise' (exit 1 after writing) or 'skip' (record, "
                   "warn, exit 1)")
    engine_args(p)
    add_export_args(p)
    p.set_defaults(func=run)
    return p


def select(args: argparse.Namespace):
    """``(dataset, split name or None)`` for the arguments."""
    from ..registry import families
    from .commands import build_dataset, resolve_keys

    fams = families()
    split = args.split
    if args.key in fams and split is not None:
        key = f"{args.key}_{split}"
        if key not in fams[args.key]:
            raise UsageError(f"{args.key!r} has no split {split!r}; its keys are "
                             f"{fams[args.key]}")
        return build_dataset(key, args, cache_dir=args.cache_dir), split
    key = resolve_keys(args.key, single=True)[0]
    ds = build_dataset(key, args, cache_dir=args.cache_dir)
    if split is None:
        return ds, None
    if split not in ("train", "valid"):
        raise UsageError(f"--split {split!r} with the dataset key {key!r}: expected 'train' "
                         "or 'valid' (the patient-grouped sides of --n-splits folds)")
    if args.n_splits < 2:
        raise UsageError("--n-splits must be at least 2 to make a train/valid split")
    train, valid = ds.get_datasets(n_splits=args.n_splits, seed=args.seed)
    return (train if split == "train" else valid), split


def run(args: argparse.Namespace) -> int:
    """Run ``radharmony export``; returns the exit code."""
    import warnings

    from ..export.writer import to_webdataset

    _check_engine(args)
    ds, split = select(args)
    if args.level == "study":
        return run_study_export(args, ds, split)
    if args.format != "webdataset":
        raise UsageError(f"--format {args.format} needs --level study")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        manifest = to_webdataset(ds, args.out, shard_size=args.shard_size, split=split,
                                 num_workers=args.workers, progress=not args.quiet,
                                 dtype_bits=args.bits, on_error=args.on_error,
                                 engine=args.engine, address=args.address)
    for w in caught:
        print(f"radharmony export: {w.message}", file=sys.stderr)
    summary = {"key": manifest["fingerprint"]["key"], "split": split, "out": str(args.out),
               "format": args.format, "samples": manifest["num_samples"],
               "shards": len(manifest["shards"]), "failed": len(manifest["failures"]),
               "failures": [f["sample_id"] for f in manifest["failures"][:10]],
               "bytes": sum(s["bytes"] for s in manifest["shards"])}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{summary['key']}: exported {summary['samples']:,} samples in "
              f"{summary['shards']} shards ({summary['bytes'] / 1e6:.1f} MB) to {args.out}")
        for sid in summary["failures"]:
            print(f"  failed: {sid}")
    return EXIT_OK if not manifest["failures"] else EXIT_PROBLEMS


__all__ = ["add_parser", "engine_args", "run", "select"]
