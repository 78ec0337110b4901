"""``--level study`` of ``radharmony export`` and ``radharmony info``.

``export KEY --root DIR --level study --format llava|parquet|webdataset -o OUT``: whole
studies (:mod:`radharmony.export.study_formats`), or one record per question for a VQA key;
``info KEY --root DIR --level study``:
studies, images per study, section coverage (:func:`radharmony.studies.info.study_info`).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings

from .output import EXIT_OK, UsageError, positive as _positive

STUDY_FORMATS = ("llava", "parquet", "webdataset")


def add_export_args(p: argparse.ArgumentParser) -> None:
    """The study options of ``radharmony export``."""
    p.add_argument("--level", choices=("image", "study"), default="image",
                   help="'image' (default): one sample per image; 'study': one per study "
                   "(every view, report sections) for --format llava|parquet|webdataset")
    p.add_argument("--max-images", type=_positive, default=None, metavar="K",
                   help="with --level study: images per study (default: the largest study)")
    p.add_argument("--images", choices=("cache", "original"), default="cache",
                   help="with --level study: the preprocessed images (default) or the "
                   "original files")
    p.add_argument("--answer", choices=("findings", "findings_impression"),
                   default="findings", help="with --format llava: the assistant's answer")


def add_info_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level", choices=("image", "study"), default="image",
                   help="'study': also count studies, images per study and section coverage")


def run_export(args: argparse.Namespace, ds, split) -> int:
    """Export the study-level form of ``ds`` (the image-level dataset the arguments select)."""
    from ..data.studies import StudyDataset
    from ..export import to_llava, to_parquet, to_study_webdataset
    from ..export.studies import is_vqa

    if args.format not in STUDY_FORMATS:
        raise UsageError(f"--level study writes {STUDY_FORMATS}, not {args.format!r}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        studies = ds if is_vqa(ds) else StudyDataset(ds, max_images=args.max_images)
        common = {"images": args.images, "progress": not args.quiet}
        if args.format == "llava":
            out = args.out if args.out.suffix == ".json" else args.out / "llava.json"
            manifest = to_llava(studies, out, answer=args.answer,
                                shard_size=args.shard_size, **common)
        else:
            write = to_parquet if args.format == "parquet" else to_study_webdataset
            out = args.out
            manifest = write(studies, out, shard_size=args.shard_size, **common)
    for w in caught:
        print(f"radharmony export: {w.message}", file=sys.stderr)
    summary = {"key": ds.spec.key, "split": split, "level": "study", "format": args.format,
               "out": str(out), "studies": manifest["num_studies"],
               "images": manifest["num_images"], "shards": len(manifest["shards"]),
               "image_source": manifest["images"]["description"]}
    unit = "studies"
    if is_vqa(ds):  # one record per question
        unit = "questions"
        summary["questions"] = summary.pop("studies")
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{summary['key']}: exported {summary[unit]:,} {unit} "
              f"({summary['images']:,} images, {summary['image_source']}) as "
              f"{args.format} in {summary['shards']} shards to {out}")
    return EXIT_OK
