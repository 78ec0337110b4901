"""Per-sample cost of each built-in augmentation against MONAI's equivalent dictionary transform.

    python -m benchmarks.augment [--size 224] [--calls 200] [--threads 1]

Each contender is applied with probability 1 to one sample as the built-in pipeline yields it
after the cache: ``img`` (1, size, size) bfloat16 in [-1, 1] and ``mask`` (1, size, size) uint8
for both libraries, plus three boxes with labels for radharmony (MONAI's image transforms do
not move boxes, so radharmony does a little more work). One torch thread, as in a DataLoader
worker. Reported: the best of five rounds of ``calls`` calls, in microseconds per sample.
"""

from __future__ import annotations

import argparse
import math
import time

import torch


def _sample(size: int) -> dict:
    img = torch.full((1, size, size), -1.0)
    img[:, size // 4:size // 2, size // 3:2 * size // 3] = 1.0
    return {"img": img.to(torch.bfloat16), "mask": (img > 0).to(torch.uint8),
            "bbox": torch.tensor([[10.0, 10.0, 60.0, 80.0], [size / 3, size / 4, 2 * size / 3,
                                                              size / 2], [100.0, 120.0, 150.0,
                                                                          200.0]]),
            "bbox_labels": ["Nodule", "Mass", "Effusion"], "bbox_annotators": ["R1"] * 3}


def contenders(size: int) -> list[tuple[str, object, object]]:
    """``(name, radharmony augmentation, MONAI transform)`` at probability 1."""
    from monai import transforms as mt

    from radharmony.augment import Compose, RandomAffine, RandomFlip, RandomIntensity

    keys = ["img", "mask"]
    off = dict(gamma=None, contrast=None, brightness=None, blur=None, noise=None)

    def only(**kw):
        return RandomIntensity(p=1, **{**off, **kw})

    affine = dict(degrees=10, scale=(0.9, 1.1), translate=(0.05, 0.05), shear=5)
    m_affine = mt.RandAffined(keys=keys, prob=1, rotate_range=math.radians(10),
                              scale_range=0.1, translate_range=0.05 * size,
                              shear_range=math.tan(math.radians(5)),
                              mode=["bilinear", "nearest"], padding_mode="zeros")
    m_gamma = mt.RandAdjustContrastd(keys=["img"], prob=1, gamma=(0.7, 1.5))
    m_noise = mt.RandGaussianNoised(keys=["img"], prob=1, std=0.03)
    m_blur = mt.RandGaussianSmoothd(keys=["img"], prob=1, sigma_x=(0.1, 1.0),
                                    sigma_y=(0.1, 1.0))
    m_flip = mt.RandFlipd(keys=keys, prob=1, spatial_axis=1)
    return [
        ("flip (RandFlipd)", RandomFlip(p=1), m_flip),
        ("affine: rotation, scale, translation, shear (RandAffined)",
         RandomAffine(p=1, **affine), m_affine),
        ("gamma (RandAdjustContrastd)", only(gamma=(0.7, 1.5)), m_gamma),
        ("noise (RandGaussianNoised)", only(noise=(0.03, 0.03)), m_noise),
        ("blur (RandGaussianSmoothd)", only(blur=(0.1, 1.0)), m_blur),
        ("intensity: gamma + noise + blur (the three above)",
         only(gamma=(0.7, 1.5), noise=(0.03, 0.03), blur=(0.1, 1.0)),
         mt.Compose([m_gamma, m_noise, m_blur])),
        ("flip + affine (Compose)", Compose([RandomFlip(p=1), RandomAffine(p=1, **affine)]),
         mt.Compose([m_flip, m_affine])),
    ]


def _time(fn, sample: dict, calls: int, rounds: int = 5) -> float:
    for _ in range(max(5, calls // 10)):
        fn(dict(sample))
    best = math.inf
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(dict(sample))
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e6


def bench(*, size: int = 224, calls: int = 200, threads: int | None = 1,
          verbose: bool = True) -> list[dict]:
    """Time every contender; print (``verbose``) and return the rows
    ``{"name", "radharmony_us", "monai_us", "ratio"}`` (ratio: MONAI's time / radharmony's)."""
    from monai.utils import set_determinism

    if threads is not None:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    set_determinism(seed=0)
    sample = _sample(size)
    monai_sample = {k: sample[k] for k in ("img", "mask")}
    rows = []
    for name, ours, theirs in contenders(size):
        rows.append({"name": name, "radharmony_us": _time(ours, sample, calls),
                     "monai_us": _time(theirs, monai_sample, calls)})
        rows[-1]["ratio"] = rows[-1]["monai_us"] / rows[-1]["radharmony_us"]
    set_determinism(seed=None)
    if verbose:
        print(table(rows, size=size, threads=threads))
    return rows


def table(rows: list[dict], *, size: int = 224, threads: int | None = 1) -> str:
    head = (f"Per sample at {size}×{size} (bfloat16 img + uint8 mask; radharmony also moves 3 "
            f"boxes), {threads or torch.get_num_threads()} torch thread(s), best of 5 rounds.\n\n"
            "| augmentation (MONAI equivalent) | radharmony µs/sample | MONAI µs/sample "
            "| MONAI / radharmony |\n|---|---:|---:|---:|")
    lines = [head] + [f"| {r['name']} | {r['radharmony_us']:,.0f} | {r['monai_us']:,.0f} "
                      f"| {r['ratio']:.1f}× |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    bench(size=args.size, calls=args.calls, threads=args.threads)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
