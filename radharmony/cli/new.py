"""``radharmony new KEY --from TABLE [-o KEY.yaml]``: draft a dataset config from a table."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .output import EXIT_OK, UsageError, emit, note


def add_parser(subparsers, *, parents=()) -> argparse.ArgumentParser:
    """Add the ``new`` subcommand."""
    p = subparsers.add_parser(
        "new", parents=list(parents), help="draft a dataset config from a table",
        description="Draft a YAML config describing your own dataset from its table's header "
        "and first rows (ids, image path, view, report, labels and boxes are guessed; unsure "
        "guesses are marked TODO). Then: radharmony info KEY --config KEY.yaml --root DIR.")
    p.add_argument("key", metavar="KEY", help="the new dataset's key, e.g. my_hospital_cxr")
    p.add_argument("--from", dest="table", required=True, type=Path, metavar="TABLE",
                   help="the export's table (.csv, .tsv, .json or .jsonl)")
    p.add_argument("-o", "--out", type=Path, metavar="FILE",
                   help="where to write the config (default KEY.yaml; - for stdout)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ..custom import load_config
    from ..custom.config import KEY_RE
    from ..custom.draft import draft_config, sample_table

    if not KEY_RE.match(args.key):
        raise UsageError(f"KEY {args.key!r} is not a valid key: use 2-64 lower-case letters, "
                         "digits or '_', starting with a letter")
    out = args.out if args.out is not None else Path(f"{args.key}.yaml")
    to_stdout = str(out) == "-"
    if not to_stdout and out.suffix.lower() not in (".yaml", ".yml"):
        raise UsageError(f"--out {out} must end in .yaml or .yml (the draft has comments)")
    if not to_stdout and out.exists() and not args.force:
        raise UsageError(f"{out} exists; pass --force to overwrite it")
    table, fmt = sample_table(args.table)
    base = Path.cwd() if to_stdout else out.absolute().parent
    rel = os.path.relpath(args.table.absolute(), base)
    text = draft_config(args.key, table, table_path=Path(rel).as_posix(), fmt=fmt)
    if to_stdout:
        print(text)
        return EXIT_OK
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    load_config(out)  # the draft must load; fails loudly (ConfigError) if it does not
    todo = text.count("TODO")
    emit(args, {"config": str(out), "table": str(args.table), "todo": todo},
         lambda r: f"Wrote {r['config']} ({r['todo']} TODO to check). Next: radharmony info "
                   f"{args.key} --config {r['config']} --root IMAGE_FOLDER")
    if todo and not args.json:
        note(f"radharmony new: {todo} TODO marks in {out}")
    return EXIT_OK
