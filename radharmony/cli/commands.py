"""The work behind each ``radharmony`` subcommand (parsing is in :mod:`radharmony.cli.main`).

``KEY`` is a registered dataset key (``rexgradient_train``) or, for ``info``, ``harmonize``,
``validate``, ``cache`` and ``view``, a dataset family (``rexgradient``: every split of that
module).
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

from .output import EXIT_OK, EXIT_PROBLEMS, FIRST_N, UsageError, emit, note, progress
from ..errors import RadHarmonyError, RegistryError, UnsupportedOutputWarning
from ..registry import families, get_dataset_class, get_harmonizer_class, list_datasets

# -- registry helpers -----------------------------------------------------------------------------
def resolve_keys(name: str, *, single: bool = False) -> list[str]:
    """The dataset keys ``name`` stands for: itself, or every split of a family."""
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
    guess = f": did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise RegistryError(f"No dataset registered under {name!r}{guess}",
                        expected=f"one of the {len(keys)} keys `radharmony list` prints" +
                        ("" if single else " or a family (every split of it)"), found=repr(name),
                        fix=f"use {close[0]!r}" if close else
                        "run `radharmony list` for every key, its title and access terms")


def _harmonizer(key: str, args: argparse.Namespace):
    return get_harmonizer_class(key)(csv_path=getattr(args, "csv_path", None),
                                     base_image_dir=args.root)


def build_dataset(key: str, args: argparse.Namespace, **kwargs):
    """The dataset for ``key`` on ``args.root`` with every output it supports (the user asked
    for none of them, so an output this copy of the data cannot give is left out silently)."""
    cls = get_dataset_class(key)
    flags = {f"output_{o}": True for o in cls.spec.outputs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedOutputWarning)
        return cls(args.root, getattr(args, "csv_path", None), **flags, **kwargs)


def _check_csv_path(args: argparse.Namespace, keys: list[str]) -> None:
    if getattr(args, "csv_path", None) is not None and len(keys) > 1:
        raise UsageError(f"--csv-path names one metadata file but {args.key!r} has "
                         f"{len(keys)} splits; pass one split's key")


# -- info -----------------------------------------------------------------------------------------
def table_info(df, *, spec) -> dict:
    """Counts, view positions (raw and canonical), label prevalence and report coverage of a
    harmonized table."""
    import pandas as pd

    from ..table.schema import canonical_views

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
    out = {"row_unit": spec.row_unit, "images": n, "studies": int(df["study_id"].nunique()),
           "patients": int(df["patient_id"].nunique()), "expected": dict(spec.expected),
           "view_positions": {str(k): int(c) for k, c in views.items()},
           "views": {str(k): int(c) for k, c in canonical.items()},
           "labels": labels,
           "reports": {"with_report": int(reports.sum()),
                       "coverage": round(float(reports.mean()), 4) if n else None}}
    if spec.reg_cols:  # regression targets: how many known, their range
        out["targets"] = {c: {"known": int(df[c].notna().sum()),
                              "mean": round(float(df[c].mean()), 2) if df[c].notna().any()
                              else None,
                              "min": float(df[c].min()) if df[c].notna().any() else None,
                              "max": float(df[c].max()) if df[c].notna().any() else None}
                          for c in spec.reg_cols}
    if spec.grades:  # graded findings: images per grade 0-4 (and unknown), sides given
        out["grades"] = {f: {**{str(g): int((df[c] == g).sum()) for g in range(5)},
                             "missing": int(df[c].isna().sum())}
                         for f, c in zip(spec.grades, spec.grade_cols)}
        out["sides"] = {f: {str(k): int(v) for k, v in df[c].value_counts().items()}
                        for f, c in zip(spec.sides, spec.side_cols)}
    if "boxes" in df.columns:
        per_label = pd.Series([b.get("label") for bs in df["boxes"] for b in bs],
                              dtype=object).value_counts()
        out["boxes"] = {"images_with_boxes": int(df["boxes"].map(len).gt(0).sum()),
                        "boxes": int(per_label.sum()),
                        "per_label": {str(k): int(c) for k, c in per_label.items()}}
    if spec.row_unit == "question":  # a VQA table: one row per question
        from .vqa import question_info

        out["questions"] = question_info(df)
        out["images"] = out["questions"]["images"]
    return out


def _info_text(results: list[dict]) -> str:
    lines = []
    for r in results:
        exp = r["expected"]
        lines.append(f"{r['key']}  ({r['metadata']})")
        # a volume dataset's rows are volumes (the JSON keeps "images")
        unit = "volumes" if r.get("row_unit") == "volume" else "images"
        for what in ("images", "studies", "patients"):
            full = f"  (full release: {exp[what]:,})" if what in exp else ""
            lines.append(f"  {unit if what == 'images' else what:<9}{r[what]:>10,}{full}")
        lines.append("  view positions: " + ", ".join(f"{k} {v}" for k, v in
                                                      r["view_positions"].items()))
        if r["views"] != r["view_positions"]:
            lines.append("  canonical views: " + ", ".join(f"{k} {v}" for k, v in
                                                         r["views"].items()))
        rep = r["reports"]
        if rep["coverage"] is not None:
            lines.append(f"  reports: {rep['with_report']:,} {unit} "
                         f"({100 * rep['coverage']:.1f}%)")
        if r["labels"]:
            lines.append("  labels (positive / negative / uncertain / missing):")
            for name, c in r["labels"].items():
                lines.append(f"    {name:<28}{c['positive']:>8}{c['negative']:>8}"
                             f"{c['uncertain']:>8}{c['missing']:>8}   "
                             f"{100 * (c['prevalence'] or 0):.1f}%")
        for name, t in r.get("targets", {}).items():
            lines.append(f"  {name}: {t['known']:,} known" + (
                f", mean {t['mean']:g}, {t['min']:g} to {t['max']:g}" if t["known"] else ""))
        if r.get("grades"):
            lines.append("  grades (none / questionable / mild / moderate / severe / missing)"
                         " and sides:")
            for name, c in r["grades"].items():
                sides = ", ".join(f"{k} {v}" for k, v in r["sides"].get(name, {}).items())
                lines.append(f"    {name:<28}" + "".join(f"{c[str(g)]:>8}" for g in range(5))
                             + f"{c['missing']:>8}" + (f"   {sides}" if sides else ""))
        if "study_level" in r:
            from ..studies.info import study_info_text

            lines += study_info_text(r["study_level"])
        if "boxes" in r:
            b = r["boxes"]
            lines.append(f"  boxes: {b['boxes']:,} on {b['images_with_boxes']:,} images")
        if "questions" in r:
            from .vqa import question_lines

            lines += question_lines(r["questions"])
    return "\n".join(lines)


def cmd_info(args: argparse.Namespace) -> int:
    keys = resolve_keys(args.key)
    _check_csv_path(args, keys)
    results = []
    for key in progress(keys, total=len(keys), desc="harmonizing", quiet=args.quiet,
                         unit="split"):
        h = _harmonizer(key, args)
        df = h.harmonize()
        results.append({"key": key, "metadata": str(h.csv_path), **table_info(df, spec=h.spec)})
        if getattr(args, "level", "image") == "study":
            from ..studies.info import study_info

            results[-1]["study_level"] = study_info(df, h.spec)
    emit(args, results, _info_text)
    return EXIT_OK


# -- harmonize ------------------------------------------------------------------------------------
FORMATS = (".parquet", ".csv")


def harmonize_targets(keys: list[str], out: Path, fmt: str | None, *,
                      family: bool) -> list[tuple[str, Path]]:
    """``(key, file)`` per split: ``out`` itself for one key and a ``.parquet``/``.csv`` name,
    else ``out/<key>.<format>`` (``fmt``, default parquet): a family writes one file per
    split."""
    suffix = out.suffix.lower()
    if suffix in FORMATS and not out.is_dir():
        if family:
            raise UsageError(f"a dataset family writes one file per split ({', '.join(keys)}): "
                             f"pass --out FOLDER (FOLDER/<key>.parquet; --format csv for CSV), "
                             f"not the file {out}")
        if fmt is not None and f".{fmt}" != suffix:
            raise UsageError(f"--format {fmt} but --out {out} ends in {suffix}: drop one")
        return [(keys[0], out)]
    if suffix and not out.is_dir():
        raise UsageError(f"--out {out} must end in .parquet or .csv, or be a folder")
    return [(key, out / f"{key}.{fmt or 'parquet'}") for key in keys]


def cmd_harmonize(args: argparse.Namespace) -> int:
    keys = resolve_keys(args.key)
    _check_csv_path(args, keys)
    family = args.key not in keys
    targets = harmonize_targets(keys, Path(args.out), args.format, family=family)
    results = []
    for key, out in progress(targets, total=len(targets), desc="harmonizing",
                             quiet=args.quiet or len(targets) == 1, unit="split"):
        h = _harmonizer(key, args)
        if out.suffix == ".parquet":
            h.save(out)  # with the header harmonizer_path= / radharmony.load_harmonizer read
            df = h.harmonize()
        else:
            from ..cells import encode_json_columns

            df = h.harmonize()
            text, _ = encode_json_columns(df)  # nested values (boxes) as JSON, as read back
            out.parent.mkdir(parents=True, exist_ok=True)
            text.to_csv(out, index=False)
        results.append({"key": key, "out": str(out), "format": out.suffix[1:],
                        "rows": len(df), "columns": list(df.columns),
                        "metadata": str(h.csv_path)})
    emit(args, results if family else results[0], lambda r: "\n".join(
        f"Wrote {x['rows']:,} rows of {x['key']} to {x['out']}"
        for x in (r if family else [r])))
    return EXIT_OK


# -- validate -------------------------------------------------------------------------------------
def run_validation(key: str, *, root, csv_path=None, images: bool = False, workers: int = 0,
                   quiet: bool = False) -> dict:
    """Validate one split (:func:`radharmony.data.checks.validate_split`): metadata, schema,
    path safety, missing (and, with ``images``, undecodable) files; JSON-ready."""
    from ..data.checks import validate_split

    h = get_harmonizer_class(key)(csv_path=csv_path, base_image_dir=root)
    return validate_split(h, decode=images, num_workers=workers, progress=not quiet,
                          first_n=FIRST_N)


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
    emit(args, reports, _validate_text)
    return EXIT_OK if all(r["ok"] for r in reports) else EXIT_PROBLEMS


# -- cache ----------------------------------------------------------------------------------------
def run_pre_cache(dataset, *, workers: int = 0, quiet: bool = False, engine: str = "local",
                  address: str | None = None) -> dict:
    """Pre-cache every image of ``dataset``, counting failures instead of stopping at the first
    (:func:`radharmony.data.precache.pre_cache` with ``keep_going``, on ``engine``);
    JSON-ready."""
    from ..data.precache import pre_cache

    if dataset.cache_dir is None:
        raise RadHarmonyError("The dataset has no cache", expected="a cache_dir",
                              found="cache_dir=None", fix="pass --cache-dir DIR")
    report = pre_cache(dataset, num_workers=workers, progress=not quiet, keep_going=True,
                       engine=engine, address=address)
    return {"key": dataset.spec.key, "cache_dir": str(dataset.cache_dir), "engine": engine,
            **report.as_dict()}


def cmd_cache(args: argparse.Namespace) -> int:
    keys = resolve_keys(args.key)
    _check_csv_path(args, keys)
    reports = [run_pre_cache(build_dataset(k, args, cache_dir=args.cache_dir),
                             workers=args.workers, quiet=args.quiet, engine=args.engine,
                             address=args.address) for k in keys]

    def text(reports):
        lines = []
        for r in reports:
            lines.append(f"{r['key']}: cached {r['cached']:,} of {r['images']:,} images in "
                         f"{r['cache_dir']} ({r['seconds']:.1f} s)")
            lines += [f"  failed: {f['sample_id']}: {f['detail']}" for f in r["first_failures"]]
        return "\n".join(lines)
    emit(args, reports, text)
    return EXIT_OK if all(r["failed"] == 0 for r in reports) else EXIT_PROBLEMS


# -- view -----------------------------------------------------------------------------------------
def cmd_view(args: argparse.Namespace) -> int:
    from ..viewer import LOOPBACK, make_server

    if args.host not in LOOPBACK and not args.allow_remote:
        raise UsageError(f"--host {args.host} would expose the viewer beyond this machine; "
                         "add --allow-remote to do that on purpose")
    from ..imaging.pipeline import DefaultTransform

    keys = resolve_keys(args.key)
    _check_csv_path(args, keys)
    datasets = [build_dataset(k, args, cache_dir=args.cache_dir, **(  # volumes: as read
        {} if get_dataset_class(k).spec.row_unit == "volume" else
        {"transform": DefaultTransform(size=args.size)})) for k in keys]
    server = make_server(datasets, host=args.host, port=args.port,
                         allow_remote=args.allow_remote)
    url = server.url
    if args.json:
        print(json.dumps({"url": url, "keys": keys}), flush=True)
    note(f"Serving {', '.join(keys)} at {url} (read-only; Ctrl-C to stop)")
    from ..viewer.serving import serve

    serve(server, open_browser=args.open)
    return EXIT_OK


# -- demo -----------------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
    from .. import demo

    rc = demo.main(args.demo_args)
    return EXIT_OK if rc is None else int(rc)


