"""The ``radharmony`` command's parser and dispatch."""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

from . import audit, evaluate, export, label_reports, new
from . import merge as merge_cmd
from . import mix as mix_cmd
from . import studies as study_cli
from .listing import cmd_list
from .output import workers as _workers
from .output import EXIT_PROBLEMS, EXIT_USAGE, UsageError, note
from ..errors import RadHarmonyError, RegistryError
from ..version import __version__
from ..viewer.serving import port_arg, size_arg


def _lazy(name: str):
    """The command function ``name`` of :mod:`radharmony.cli.commands`, imported when the
    command runs: building the parser (``--help``, ``list``) imports neither torch nor pandas."""
    def run(args: argparse.Namespace) -> int:
        from . import commands

        return getattr(commands, name)(args)
    run.__name__ = run.__qualname__ = name
    return run


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    common.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bars and no warnings")
    common.add_argument("--config", action="append", type=Path, metavar="FILE", default=[],
                        help="register the dataset a YAML/JSON config describes (repeatable)")

    def dataset_args(p, *, csv=True, family=True):
        p.add_argument("key", metavar="KEY", help="dataset key (see `radharmony list`)" +
                       (" or a dataset family for every split" if family else
                        "; one split, not a family"))
        p.add_argument("--root", required=True, type=Path, metavar="DIR",
                       help="the dataset's image folder (base_image_dir)")
        if csv:
            p.add_argument("--csv-path", type=Path, metavar="FILE",
                           help="the metadata file (found near --root when omitted)")

    parser = argparse.ArgumentParser(
        prog="radharmony", description="Public chest X-ray datasets as one harmonized table "
        "and ready-to-train PyTorch datasets.", epilog="Exit codes: 0 success, 1 problems "
        "found, 2 usage error. Run `radharmony COMMAND --help` for a command's options.")
    parser.add_argument("--version", action="version", version=f"radharmony {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("list", parents=[common], help="registered datasets",
                       description="Registered datasets: key, title, splits, supported "
                       "outputs, published counts and access terms.")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("info", parents=[common], help="counts, views, labels, reports",
                       description="Images, studies and patients per split, view positions, "
                       "label prevalence and report coverage (reads metadata only).")
    dataset_args(p)
    study_cli.add_info_args(p)
    p.set_defaults(func=_lazy("cmd_info"))

    p = sub.add_parser("harmonize", parents=[common], help="write the harmonized table",
                       description="Harmonize a split (or every split of a dataset family) "
                       "and write each table as Parquet (with the header harmonizer_path= "
                       "reads) or CSV (boxes as JSON).")
    dataset_args(p)
    p.add_argument("--out", required=True, type=Path, metavar="PATH",
                   help="FILE.parquet or FILE.csv for one split; a FOLDER for a family (or a "
                   "split): one FOLDER/<key>.parquet per split")
    p.add_argument("--format", choices=("parquet", "csv"), default=None,
                   help="the files' format when --out is a folder (default parquet)")
    p.set_defaults(func=_lazy("cmd_harmonize"))

    p = sub.add_parser("validate", parents=[common], help="check metadata and image files",
                       description="Check the schema, path safety and that every image exists "
                       "(--images: and decodes). Exits 1 and lists the first offending paths "
                       "when there are problems.")
    dataset_args(p)
    p.add_argument("--images", action="store_true", help="also decode every image")
    p.add_argument("--workers", type=_workers, default=0, metavar="N",
                   help="worker processes (default 0: in this process)")
    p.set_defaults(func=_lazy("cmd_validate"))

    p = sub.add_parser("cache", parents=[common], help="pre-build the image cache",
                       description="Preprocess every image into the cache so training reads "
                       "cached arrays. Exits 1 when some images fail.")
    dataset_args(p)
    p.add_argument("--workers", type=_workers, default=0, metavar="N",
                   help="DataLoader workers (default 0: in this process); with --engine ray "
                   "and no --address, CPUs of the local Ray cluster (0: every core)")
    p.add_argument("--cache-dir", type=Path, default=Path("cache"), metavar="DIR",
                   help="cache folder (default ./cache, as the datasets use)")
    export.engine_args(p)
    p.set_defaults(func=_lazy("cmd_cache"))

    p = sub.add_parser("view", parents=[common], help="browse samples in a local web page",
                       description="Serve a read-only viewer: images with boxes, reports, "
                       "labels, filters and paging. Binds to 127.0.0.1 unless --allow-remote.")
    dataset_args(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=port_arg, default=8765, help="port (default 8765; 0: any free)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow --host to be a non-loopback address")
    p.add_argument("--size", type=size_arg, default=224, help="rendered image size (default 224)")
    p.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                   help="cache preprocessed images here (default: no cache)")
    p.add_argument("--open", action="store_true", help="open the page in a web browser")
    p.set_defaults(func=_lazy("cmd_view"))

    p = sub.add_parser("demo", parents=[common], help="what `make demo` runs",
                       description="Run the demo (radharmony.demo); further arguments are "
                       "passed to it.")
    p.set_defaults(func=_lazy("cmd_demo"))

    label_reports.add_parser(sub, parents=[common])
    export.add_parser(sub, parents=[common])
    merge_cmd.add_parser(sub, parents=[common])
    evaluate.add_parser(sub)
    new.add_parser(sub, parents=[common])
    audit.add_parser(sub, parents=[common])
    mix_cmd.add_parser(sub, parents=[common])
    return parser


def _error_payload(exc: BaseException) -> dict:
    if isinstance(exc, RadHarmonyError):
        return {"type": type(exc).__name__, "message": str(exc), "what": exc.what,
                "expected": exc.expected, "found": exc.found, "fix": exc.fix}
    return {"type": type(exc).__name__, "message": str(exc)}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``radharmony`` command; returns the exit code."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "demo":
        args.demo_args = extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        with warnings.catch_warnings():
            if args.quiet:
                warnings.simplefilter("ignore")
            for config in getattr(args, "config", None) or ():
                from ..custom import register_config

                register_config(config)
            return args.func(args)
    except (UsageError, RegistryError) as exc:
        code = EXIT_USAGE
        error = exc
    except RadHarmonyError as exc:
        code = EXIT_PROBLEMS
        error = exc
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug or an unguarded fault: --json still prints JSON
        if not args.json:
            raise
        import traceback

        traceback.print_exc()
        code, error = EXIT_PROBLEMS, exc
    if args.json:
        print(json.dumps({"ok": False, "error": _error_payload(error)}, indent=2))
    note(f"radharmony {args.command}: {error}")
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
