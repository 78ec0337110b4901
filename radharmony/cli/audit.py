"""``radharmony audit KEY... --root KEY=DIR ...``: duplicates, image sanity and the HTML page.

To wire into :mod:`radharmony.cli`: call :func:`add_parser` with the subparsers object and the
``common`` parent parser. Builds each dataset (metadata only), runs :func:`radharmony.audit`
over them together (identity families joined, see docs/audit.md), prints the counts, and
writes the page (``--html``) and the exclusion list (``--exclusions``). Exits 1 when a
duplicate pair straddles splits or patients or an image is unreadable, else 0.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .merge import dataset_arguments, dataset_sources
from .output import EXIT_OK, EXIT_PROBLEMS, UsageError, emit
from .output import workers as _workers


def add_parser(subparsers, *, parents=()) -> None:
    """Add the ``audit`` subcommand."""
    p = subparsers.add_parser(
        "audit", parents=list(parents), help="duplicate and faulty images, one HTML page",
        description="Read every image once: exact duplicates (same bytes), near duplicates "
        "(perceptual hash: resized, re-encoded, re-windowed copies; not flips) within and "
        "across the datasets, pairs straddling splits or patients, and blank, inverted, tiny "
        "or unreadable images. Nothing is dropped; --exclusions writes the sample ids a "
        "dataset's exclude= takes. Exits 1 when a pair straddles splits or patients or an "
        "image is unreadable.")
    dataset_arguments(p)
    p.add_argument("--html", type=Path, metavar="FILE.html", help="write the audit page")
    p.add_argument("--exclusions", type=Path, metavar="FILE.txt",
                   help="write the sample ids to leave out (all but one of each duplicate "
                   "group; with --exclude-flags also the flagged images)")
    p.add_argument("--exclude-flags", metavar="FLAG,...", default="",
                   help="flags whose images --exclusions lists too (unreadable, blank, "
                   "inverted, tiny)")
    p.add_argument("--straddling-only", action="store_true",
                   help="--exclusions lists only groups with a pair straddling splits or "
                   "patients")
    p.add_argument("--max-distance", type=int, default=None, metavar="BITS",
                   help="near-duplicate threshold in bits of 256 (default 26)")
    p.add_argument("--workers", type=_workers, default=0, metavar="N",
                   help="reading threads (default 0: one per core)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..audit import MAX_DISTANCE, audit
    from ..registry import get_dataset_class

    keys, roots, csvs = dataset_sources(args)
    flags = [f.strip() for f in args.exclude_flags.split(",") if f.strip()]
    bad = sorted(set(flags) - {"unreadable", "blank", "inverted", "tiny"})
    if bad:
        raise UsageError(f"--exclude-flags {bad}: use unreadable, blank, inverted or tiny")
    datasets = [get_dataset_class(k)(roots[k], csv_path=csvs.get(k), cache_dir=None)
                for k in keys]
    report = audit(datasets, max_distance=args.max_distance or MAX_DISTANCE,
                   workers=args.workers or None, progress=not args.quiet)
    result = report.summary()
    if args.html:
        report.to_html(args.html)
        result["html"] = str(args.html)
    if args.exclusions:
        report.write_exclusions(args.exclusions, flags=flags,
                                straddling_only=args.straddling_only)
        result["exclusions"] = str(args.exclusions)
        result["excluded"] = len(report.exclusions(flags=flags,
                                                   straddling_only=args.straddling_only))

    def text(r):
        lines = [f"{r['images']:,} images ({r['files']:,} files) of {', '.join(keys)}",
                 f"duplicates: {r['pairs']['exact']:,} exact, {r['pairs']['near']:,} near; "
                 f"{r['straddling_split']:,} straddle splits, {r['straddling_patient']:,} "
                 f"straddle patients",
                 "flagged: " + (", ".join(f"{k} {v:,}" for k, v in r["flags"].items())
                                or "none"),
                 "families joined: " + (", ".join(r["families_joined"]) or "none")]
        if "html" in r:
            lines.append(f"page: {r['html']}")
        if "exclusions" in r:
            lines.append(f"exclusions: {r['excluded']:,} sample ids in {r['exclusions']}")
        return "\n".join(lines)

    emit(args, result, text)
    problems = result["straddling_split"] + result["straddling_patient"] + \
        result["flags"].get("unreadable", 0)
    return EXIT_PROBLEMS if problems else EXIT_OK
