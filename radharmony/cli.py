"""The ``radharmony`` command: list, inspect, harmonize, validate, cache and view datasets.

Exit codes: 0 success, 1 problems found (validation failures, unreadable files, errors
reported by the library), 2 usage errors (bad arguments, unknown dataset key). Results go to
stdout (``--json`` for machine-readable output); progress bars and messages go to stderr.

``KEY`` is a registered dataset key (``rexgradient_train``) or, for ``info``, ``validate``,
``cache`` and ``view``, a dataset family (``rexgradient``: every split of that module).

The work behind ``validate`` and ``cache`` is done by :func:`run_validation` and
:func:`run_pre_cache`; they are the single places to swap in the library's own
``radharmony.validation`` API and ``dataset.pre_cache(num_workers=...)``.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from . import __version__
from .errors import RadHarmonyError, RegistryError

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
#: how many offending paths of each kind ``validate`` lists
FIRST_N = 10


class UsageError(Exception):
    """Arguments that parse but do not fit together (exit code 2)."""


# -- output helpers -------------------------------------------------------------------------------
def _progress(iterable: Iterable, *, total: int | None, desc: str, quiet: bool,
              unit: str = "img"):
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr,
                disable=quiet, dynamic_ncols=True, leave=False)


def _emit(args: argparse.Namespace, result: Any, text: Callable[[Any], str]) -> None:
    if args.json:
        print(json.dumps(result, indent=2, default=_json_default))
    else:
        print(text(result))


def _json_default(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _note(msg: str) -> None:
    print(msg, file=sys.stderr)


def _table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


# -- registry helpers -----------------------------------------------------------------------------
def families() -> dict[str, list[str]]:
    """Dataset family (the dataset module's name) -> its registered keys."""
    from .registry import get_harmonizer_class, list_datasets

    out: dict[str, list[str]] = {}
    for key in list_datasets():
        out.setdefault(get_harmonizer_class(key).__module__.rsplit(".", 1)[-1], []).append(key)
    return out


def resolve_keys(name: str, *, single: bool = False) -> list[str]:
    """The dataset keys ``name`` stands for: itself, or every split of a family."""
    from .registry import list_datasets

    keys = list_datasets()
    if name in keys:
        return [name]
    fams = families()
    if name in fams and not single:
        return fams[name]
    if name in fams:
        raise UsageError(f"{name!r} is a dataset family with splits {fams[name]}; this command "
                         "works on one split: pass one of those keys")
    import difflib

    close = difflib.get_close_matches(name, keys + list(fams), n=3)
    raise RegistryError(f"No dataset registered under {name!r}", expected=f"one of {keys}"
                        + ("" if single else f" or a family {sorted(fams)}"), found=repr(name),
                        fix=f"did you mean {', '.join(map(repr, close))}?" if close else
                        "run `radharmony list` for the valid keys")


def _harmonizer(key: str, args: argparse.Namespace):
    from .registry import get_harmonizer_class

    return get_harmonizer_class(key)(csv_path=getattr(args, "csv_path", None),
                                     base_image_dir=args.root)


def build_dataset(key: str, args: argparse.Namespace, **kwargs):
    """The dataset for ``key`` on ``args.root`` with every output it supports."""
    from .registry import get_dataset_class

    cls = get_dataset_class(key)
    flags = {f"output_{o}": True for o in cls.spec.outputs}
    return cls(args.root, getattr(args, "csv_path", None), **flags, **kwargs)


def _check_csv_path(args: argparse.Namespace, keys: list[str]) -> None:
    if getattr(args, "csv_path", None) is not None and len(keys) > 1:
        raise UsageError(f"--csv-path names one metadata file but {args.key!r} has "
                         f"{len(keys)} splits; pass one split's key")


# -- list -----------------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    from .registry import get_harmonizer_class

    rows = []
    for family, keys in sorted(families().items()):
        for key in keys:
            spec = get_harmonizer_class(key).spec
            rows.append({"key": key, "family": family, "title": spec.title,
                         "splits": keys, "outputs": sorted(spec.outputs),
                         "labels": len(spec.label_cols), "expected": dict(spec.expected),
                         "access": spec.access})

    def text(rows):
        body = _table([[r["key"], r["title"], ",".join(r["outputs"]) or "-", r["labels"],
                        r["expected"].get("images", "?")] for r in rows],
                      ["KEY", "TITLE", "OUTPUTS", "LABELS", "IMAGES"])
        access = {r["family"]: r["access"] for r in rows}
        return body + "\n\nAccess:\n" + "\n".join(f"  {f}: {a}" for f, a in access.items())
    _emit(args, rows, text)
    return EXIT_OK


# -- info -----------------------------------------------------------------------------------------
def table_info(df, *, spec) -> dict:
    """Counts, view positions (raw and canonical), label prevalence and report coverage of a
    harmonized table."""
    import pandas as pd

    from .tables import canonical_views

    n = len(df)
    reports = df["report"].map(lambda r: isinstance(r, str) and r.strip() != "")
    views = df["view_position"].fillna("(missing)").value_counts()
    canonical = pd.Series(canonical_views(df["view_position"], spec.view_map),
                          dtype=object).fillna("(missing)").value_counts()
    labels = {}
    for col in spec.label_cols:
        v = df[col]
        pos = int((v == 1).sum())
        labels[col] = {"positive": pos, "negative": int((v == 0).sum()),
                       "uncertain": int((v == -1).sum()), "missing": int(v.isna().sum()),
                       "prevalence": round(pos / n, 4) if n else None}
    out = {"images": n, "studies": int(df["study_id"].nunique()),
           "patients": int(df["patient_id"].nunique()), "expected": dict(spec.expected),
           "view_positions": {str(k): int(c) for k, c in views.items()},
           "views": {str(k): int(c) for k, c in canonical.items()},
           "labels": labels,
           "reports": {"with_report": int(reports.sum()),
                       "coverage": round(float(reports.mean()), 4) if n else None}}
    if "boxes" in df.columns:
        per_label = pd.Series([b.get("label") for bs in df["boxes"] for b in bs],
                              dtype=object).value_counts()
        out["boxes"] = {"images_with_boxes": int(df["boxes"].map(len).gt(0).sum()),
                        "boxes": int(per_label.sum()),
                        "per_label": {str(k): int(c) for k, c in per_label.items()}}
    return out


def _info_text(results: list[dict]) -> str:
    lines = []
    for r in results:
        exp = r["expected"]
        lines.append(f"{r['key']}  ({r['metadata']})")
        for what in ("images", "studies", "patients"):
            full = f"  (full release: {exp[what]:,})" if what in exp else ""
            lines.append(f"  {what:<9}{r[what]:>10,}{full}")
        lines.append("  view positions: " + ", ".join(f"{k} {v}" for k, v in
                                                      r["view_positions"].items()))
        if r["views"] != r["view_positions"]:
            lines.append("  canonical views: " + ", ".join(f"{k} {v}" for k, v in
                                                         r["views"].items()))
        rep = r["reports"]
        if rep["coverage"] is not None:
            lines.append(f"  reports: {rep['with_report']:,} images "
                         f"({100 * rep['coverage']:.1f}%)")
        if r["labels"]:
            lines.append("  labels (positive / negative / uncertain / missing):")
            for name, c in r["labels"].items():
                lines.append(f"    {name:<28}{c['positive']:>8}{c['negative']:>8}"
                             f"{c['uncertain']:>8}{c['missing']:>8}   "
                             f"{100 * (c['prevalence'] or 0):.1f}%")
        if "boxes" in r:
            b = r["boxes"]
            lines.append(f"  boxes: {b['boxes']:,} on {b['images_with_boxes']:,} images")
    return "\n".join(lines)


def cmd_info(args: argparse.Namespace) -> int:
    keys = resolve_keys(args.key)
    _check_csv_path(args, keys)
    results = []
    for key in _progress(keys, total=len(keys), desc="harmonizing", quiet=args.quiet,
                         unit="split"):
        h = _harmonizer(key, args)
        df = h.harmonize()
        results.append({"key": key, "metadata": str(h.csv_path), **table_info(df, spec=h.spec)})
    _emit(args, results, _info_text)
    return EXIT_OK


# -- harmonize ------------------------------------------------------------------------------------
def cmd_harmonize(args: argparse.Namespace) -> int:
    (key,) = resolve_keys(args.key, single=True)
    out = Path(args.out)
    suffix = out.suffix.lower()
    if suffix not in (".parquet", ".csv"):
        raise UsageError(f"--out {out} must end in .parquet or .csv")
    h = _harmonizer(key, args)
    if suffix == ".parquet":
        h.save(out)  # with the header that harmonizer_path= / BaseHarmonizer.load read back
        df = h.harmonize()
    else:
        df = h.harmonize()
        text = df.copy()
        for col in text.columns:  # nested values (boxes) as JSON, as parse_boxes reads them
            if text[col].map(lambda v: isinstance(v, (list, dict))).any():
                text[col] = text[col].map(json.dumps)
        out.parent.mkdir(parents=True, exist_ok=True)
        text.to_csv(out, index=False)
    result = {"key": key, "out": str(out), "format": suffix[1:], "rows": len(df),
              "columns": list(df.columns), "metadata": str(h.csv_path)}
    _emit(args, result, lambda r: f"Wrote {r['rows']:,} rows of {r['key']} to {r['out']}")
    return EXIT_OK


# -- validate -------------------------------------------------------------------------------------
def check_image_file(root: str, rel: str, *, decode: bool) -> tuple[str, str] | None:
    """``(kind, detail)`` of the first problem with one image, or None (the shared
    :func:`radharmony.validation.check_image`: ``unsafe_path``, ``missing``, ``not_a_file``,
    ``empty``, ``undecodable``; without ``decode`` the header checks only)."""
    from .validation import check_image

    if not isinstance(rel, str) or not rel:
        return "unsafe_path", f"image_path {rel!r} is not a path"
    return check_image(root, rel, decode=decode)


def _check_files(root: str, paths: list[str], *, decode: bool, workers: int, quiet: bool):
    check = functools.partial(check_image_file, root, decode=decode)
    desc = "decoding images" if decode else "checking files"
    if workers <= 1:
        yield from _progress(map(check, paths), total=len(paths), desc=desc, quiet=quiet)
        return
    from concurrent.futures import ProcessPoolExecutor

    chunk = max(1, min(256, len(paths) // workers // 4))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield from _progress(pool.map(check, paths, chunksize=chunk), total=len(paths),
                             desc=desc, quiet=quiet)


def run_validation(key: str, *, root, csv_path=None, images: bool = False, workers: int = 0,
                   quiet: bool = False) -> dict:
    """Validate one split: metadata, schema, path safety, missing (and undecodable) files.

    Returns a JSON-ready report ``{"key", "ok", "rows", "checked", "problems": {kind:
    count}, "first": {kind: [{"image_path", "detail"}]}}``. Metadata faults are reported
    through the shared guard (:func:`radharmony.validation.read_error`) and every file through
    :func:`radharmony.validation.check_image`; unlike ``dataset.validate()`` it keeps going
    past a schema fault so that every unsafe path is listed.
    """
    from .errors import PathSafetyError
    from .registry import get_harmonizer_class
    from .schema import validate
    from .validation import read_error

    report: dict[str, Any] = {"key": key, "root": str(root), "images_decoded": images,
                              "rows": 0, "checked": 0, "problems": {}, "first": {}}

    def add(kind: str, path: str | None, detail: str) -> None:
        report["problems"][kind] = report["problems"].get(kind, 0) + 1
        first = report["first"].setdefault(kind, [])
        if len(first) < FIRST_N:
            first.append({"image_path": path, "detail": detail})

    h = get_harmonizer_class(key)(csv_path=csv_path, base_image_dir=root)
    try:
        meta = h.resolve_metadata_path()
        report["metadata"] = str(meta)
        try:
            raw = h.read(meta)
        except RadHarmonyError:
            raise
        except Exception as exc:  # the shared guard's message: file, line, expected, found
            raise read_error(exc, meta, description=h.metadata_description) from None
        df = h.harmonize_raw(raw, source=str(meta))
    except RadHarmonyError as exc:
        add("metadata", None, str(exc))
        report["ok"] = False
        return report
    report["rows"] = len(df)
    try:
        validate(df, h.spec, source=str(meta))
    except PathSafetyError:
        pass  # every unsafe path is listed by the per-file check below
    except RadHarmonyError as exc:
        add("schema", None, str(exc))
    paths = [p if isinstance(p, str) else "" for p in df["image_path"]]
    for rel, problem in zip(paths, _check_files(str(root), paths, decode=images,
                                                workers=workers, quiet=quiet)):
        report["checked"] += 1
        if problem is not None:
            add(problem[0], rel, problem[1])
    report["ok"] = not report["problems"]
    return report


def _validate_text(reports: list[dict]) -> str:
    lines = []
    for r in reports:
        what = "files checked and decoded" if r["images_decoded"] else "files checked"
        status = "OK" if r["ok"] else "PROBLEMS"
        lines.append(f"{r['key']}: {status} -- {r['rows']:,} rows, {r['checked']:,} {what}")
        for kind, count in r["problems"].items():
            lines.append(f"  {kind}: {count:,}")
            for item in r["first"][kind]:
                where = item["image_path"] if item["image_path"] is not None else "-"
                lines.append(f"    {where}: {item['detail']}")
            if count > len(r["first"][kind]):
                lines.append(f"    ... and {count - len(r['first'][kind]):,} more")
    return "\n".join(lines)


def cmd_validate(args: argparse.Namespace) -> int:
    keys = resolve_keys(args.key)
    _check_csv_path(args, keys)
    reports = [run_validation(k, root=args.root, csv_path=args.csv_path, images=args.images,
                              workers=args.workers, quiet=args.quiet) for k in keys]
    _emit(args, reports, _validate_text)
    return EXIT_OK if all(r["ok"] for r in reports) else EXIT_PROBLEMS


# -- cache ----------------------------------------------------------------------------------------
class _CacheJob:
    """Map-style dataset whose items fill the image cache: ``(index, error or None)``."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        try:
            self.dataset.load_image(index)
        except RadHarmonyError as exc:
            return index, str(exc)
        return index, None


def _as_list(batch):
    return batch


def run_pre_cache(dataset, *, workers: int = 0, quiet: bool = False) -> dict:
    """Preprocess every image of ``dataset`` into its cache with a DataLoader, counting
    failures instead of stopping at the first; when every image succeeded,
    ``dataset.pre_cache`` then consolidates the entries into the pack that
    :class:`radharmony.loader.CachedLoader` reads a batch at a time."""
    import torch

    if dataset.cache_dir is None:
        raise RadHarmonyError("The dataset has no cache", expected="a cache_dir",
                              found="cache_dir=None", fix="pass --cache-dir DIR")
    loader = torch.utils.data.DataLoader(_CacheJob(dataset), batch_size=32,
                                         num_workers=workers, collate_fn=_as_list)
    failures, first, done, start = 0, [], 0, time.perf_counter()
    with _progress(None, total=len(dataset), desc="caching", quiet=quiet) as bar:
        for batch in loader:
            for index, error in batch:
                done += 1
                if error is not None:
                    failures += 1
                    if len(first) < FIRST_N:
                        first.append({"sample_id": dataset.harmonized_df["sample_id"].iat[index],
                                      "detail": error})
            bar.update(len(batch))
    if failures == 0:
        dataset.pre_cache(num_workers=0, progress=not quiet)  # all cached: only packs them
    seconds = time.perf_counter() - start
    return {"key": dataset.spec.key, "cache_dir": str(dataset.cache_dir), "images": done,
            "cached": done - failures, "failed": failures, "first_failures": first,
            "seconds": round(seconds, 3),
            "images_per_second": round(done / seconds, 1) if seconds > 0 else None}


def cmd_cache(args: argparse.Namespace) -> int:
    keys = resolve_keys(args.key)
    _check_csv_path(args, keys)
    reports = [run_pre_cache(build_dataset(k, args, cache_dir=args.cache_dir),
                             workers=args.workers, quiet=args.quiet) for k in keys]

    def text(reports):
        lines = []
        for r in reports:
            lines.append(f"{r['key']}: cached {r['cached']:,} of {r['images']:,} images in "
                         f"{r['cache_dir']} ({r['seconds']:.1f} s)")
            lines += [f"  failed: {f['sample_id']}: {f['detail']}" for f in r["first_failures"]]
        return "\n".join(lines)
    _emit(args, reports, text)
    return EXIT_OK if all(r["failed"] == 0 for r in reports) else EXIT_PROBLEMS


# -- view -----------------------------------------------------------------------------------------
def cmd_view(args: argparse.Namespace) -> int:
    from .viewer import LOOPBACK, make_server

    if args.host not in LOOPBACK and not args.allow_remote:
        raise UsageError(f"--host {args.host} would expose the viewer beyond this machine; "
                         "add --allow-remote to do that on purpose")
    from .transforms import DefaultTransform

    keys = resolve_keys(args.key)
    _check_csv_path(args, keys)
    datasets = [build_dataset(k, args, cache_dir=args.cache_dir,
                              transform=DefaultTransform(size=args.size)) for k in keys]
    server = make_server(datasets, host=args.host, port=args.port,
                         allow_remote=args.allow_remote)
    url = server.url
    if args.json:
        print(json.dumps({"url": url, "keys": keys}), flush=True)
    _note(f"Serving {', '.join(keys)} at {url} (read-only; Ctrl-C to stop)")
    if args.open:
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_OK


# -- demo -----------------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
    from . import demo

    rc = demo.main(args.demo_args)
    return EXIT_OK if rc is None else int(rc)


# -- parser ---------------------------------------------------------------------------------------
def _workers(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError("must be 0 (in-process) or a positive count")
    return n


def _size(text: str) -> int:
    n = int(text)
    if not 16 <= n <= 4096:
        raise argparse.ArgumentTypeError("must be 16 to 4096 pixels")
    return n


def _port(text: str) -> int:
    n = int(text)
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError("must be 0 (any free port) to 65535")
    return n


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    common.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    def dataset_args(p, *, csv=True):
        p.add_argument("key", metavar="KEY", help="dataset key (see `radharmony list`) or a "
                       "dataset family for every split")
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
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("harmonize", parents=[common], help="write the harmonized table",
                       description="Harmonize one split and write the table as Parquet (with "
                       "the header harmonizer_path= reads) or CSV (boxes as JSON).")
    dataset_args(p)
    p.add_argument("--out", required=True, type=Path, metavar="FILE",
                   help="FILE.parquet or FILE.csv")
    p.set_defaults(func=cmd_harmonize)

    p = sub.add_parser("validate", parents=[common], help="check metadata and image files",
                       description="Check the schema, path safety and that every image exists "
                       "(--images: and decodes). Exits 1 and lists the first offending paths "
                       "when there are problems.")
    dataset_args(p)
    p.add_argument("--images", action="store_true", help="also decode every image")
    p.add_argument("--workers", type=_workers, default=0, metavar="N",
                   help="worker processes (default 0: in this process)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("cache", parents=[common], help="pre-build the image cache",
                       description="Preprocess every image into the cache so training reads "
                       "cached arrays. Exits 1 when some images fail.")
    dataset_args(p)
    p.add_argument("--workers", type=_workers, default=0, metavar="N",
                   help="DataLoader workers (default 0: in this process)")
    p.add_argument("--cache-dir", type=Path, default=Path("cache"), metavar="DIR",
                   help="cache folder (default ./cache, as the datasets use)")
    p.set_defaults(func=cmd_cache)

    p = sub.add_parser("view", parents=[common], help="browse samples in a local web page",
                       description="Serve a read-only viewer: images with boxes, reports, "
                       "labels, filters and paging. Binds to 127.0.0.1 unless --allow-remote.")
    dataset_args(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8765, help="port (default 8765; 0: any free)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow --host to be a non-loopback address")
    p.add_argument("--size", type=_size, default=224, help="rendered image size (default 224)")
    p.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                   help="cache preprocessed images here (default: no cache)")
    p.add_argument("--open", action="store_true", help="open the page in a web browser")
    p.set_defaults(func=cmd_view)

    p = sub.add_parser("demo", parents=[common], help="what `make demo` runs",
                       description="Run the demo (radharmony.demo); further arguments are "
                       "passed to it.")
    p.set_defaults(func=cmd_demo)
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
        return args.func(args)
    except (UsageError, RegistryError) as exc:
        code = EXIT_USAGE
        error = exc
    except RadHarmonyError as exc:
        code = EXIT_PROBLEMS
        error = exc
    except KeyboardInterrupt:
        return 130
    if args.json:
        print(json.dumps({"ok": False, "error": _error_payload(error)}, indent=2))
    _note(f"radharmony {args.command}: {error}")
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
