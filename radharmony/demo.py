"""``make demo`` / ``radharmony demo``: the ReXGradient page's code on a synthetic replica.

Writes a small ReXGradient-160K replica (synthetic CXR-like 16-bit PNGs and reports) in the
real layout, then runs what the public page shows: harmonize, build the three splits, split
train 10-fold, iterate a DataLoader with a progress bar (first epoch: decode and cache), then the
cached epoch through :class:`radharmony.CachedLoader`. Prints images, studies, patients
and view positions per split and writes a PNG grid of samples with their impressions.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def _summary(name: str, df) -> str:
    views = df["view_position"].fillna("(missing)").value_counts()
    view_text = ", ".join(f"{v} {n}" for v, n in views.items())
    return (f"{name:<6} {len(df):>6} images {df['study_id'].nunique():>5} studies "
            f"{df['patient_id'].nunique():>5} patients | views: {view_text}")


def _impression(report: str | None) -> str:
    if not report:
        return "(no report)"
    if "IMPRESSION:\n" not in report:
        return "(no impression)"
    return "IMPRESSION: " + report.rsplit("IMPRESSION:\n", 1)[-1]


def sample_grid(ds, n: int = 8):
    """The first ``n`` samples of ``ds`` in a grid, each titled with its patient, view and a
    finding or its report's first words (``ds.title``), its impression below it."""
    from .plotting import plot_grid

    rows = range(min(n, len(ds)))
    samples = [ds[i] for i in rows]
    return plot_grid(samples, captions=[_impression(s["report"]) for s in samples],
                     titles=[ds.title(i) for i in rows], ncols=4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="radharmony demo", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="demo_output", help="folder for the replica, cache "
                        "and outputs (default: ./demo_output)")
    parser.add_argument("--studies", type=int, default=120, help="train studies (valid and "
                        "test get a quarter each; default 120)")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    args = parser.parse_args(argv)

    import torch
    from torch.utils.data import DataLoader
    from tqdm import tqdm

    from .data.collate import collate
    from .dataset import ReXGradientTestDataset, ReXGradientTrainDataset, ReXGradientValidDataset
    from .fake import write_rexgradient
    from .harmonizer import ReXGradientValidHarmonizer
    from .data.loader import CachedLoader

    t0 = time.perf_counter()
    out = Path(args.out).absolute()
    root = out / "ReXGradient-160K"
    quarter = max(4, args.studies // 4)
    print(f"Writing a synthetic ReXGradient-160K replica to {root} ...")
    base = write_rexgradient(root, studies={"train": args.studies, "valid": quarter,
                                            "test": quarter}, image_size=(640, 560))

    h = ReXGradientValidHarmonizer(
        csv_path=root / "download/metadata/valid_metadata_view_position.json",
        base_image_dir=base)
    df = h.harmonize()
    print("Harmonized columns:", df.columns.tolist())
    df.to_csv(out / "rexgradient_valid_harmonized.csv", index=False)
    h.save(out / "rexgradient_valid_harmonizer.parquet")

    cache = out / "cache"
    kw = dict(base_image_dir=base, output_report=True, cache_dir=cache)
    train = ReXGradientTrainDataset(**kw, dtype=torch.float32)
    valid = ReXGradientValidDataset(**kw, harmonizer_path=out /
                                    "rexgradient_valid_harmonizer.parquet")
    test = ReXGradientTestDataset(**kw)
    train_ds, val_ds = train.get_datasets(n_splits=10)
    folds = train.get_folds(10)

    print("\nPer split:")
    for name, ds in (("train", train), ("valid", valid), ("test", test)):
        print(" ", _summary(name, ds.harmonized_df))
    print(f"\nTrain split 10-fold by patient: fold sizes "
          f"{[len(v) for _, v in folds]} images; train/val of fold 0: {len(train_ds)}/"
          f"{len(val_ds)}; shared patients: "
          f"{len(set(train_ds.harmonized_df.patient_id) & set(val_ds.harmonized_df.patient_id))}")

    loader = DataLoader(train_ds, batch_size=16, shuffle=True, num_workers=args.workers,
                        collate_fn=collate, generator=torch.Generator().manual_seed(0))
    seen = 0
    for batch in tqdm(loader, desc="train epoch (first: decode + cache)", unit="batch"):
        seen += batch["img"].shape[0]
    fast = CachedLoader(train_ds, batch_size=16, shuffle=True, num_workers=2)
    for batch in tqdm(fast, desc="train epoch (cached, batch reads)", unit="batch"):
        pass
    print(f"Iterated {seen} samples; batch img {tuple(batch['img'].shape)} "
          f"{batch['img'].dtype}, range [{batch['img'].min():.2f}, {batch['img'].max():.2f}]")

    grid = out / "samples.png"
    sample_grid(val_ds).savefig(grid, dpi=110)
    print(f"\nWrote {grid}\nDone in {time.perf_counter() - t0:.1f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
