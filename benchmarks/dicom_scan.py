"""Grouping and sorting a study's DICOM series: radharmony's header scan against SimpleITK's GDCM
series scan on the same files.

    python -m benchmarks.dicom_scan [--slices 1000] [--runs 7] [--mr-headers]
                                    [--dir bench-data/dicom_scan]

One MR study as the RSNA 2024 Lumbar Spine release ships it, ``<study>/<series>/<n>.dcm``:
``--slices`` small slices (32 x 32, uint16) in 4 series -- sagittal T1, sagittal T2, and two
axial T2 series of three stacks each at different angles (one per disc level), file names the
instance numbers, written once under ``--dir`` and reused.

- radharmony: :func:`radharmony.volumes.dicom_headers.find_files` and ``scan`` over the study
  folder, then per series (``series_of``) its stacks (``stacks_of``) each sorted along its
  normal (``geometry``): every stack's files in slice order.
- SimpleITK: per series folder ``ImageSeriesReader.GetGDCMSeriesIDs`` and, for each id,
  ``GetGDCMSeriesFileNames`` (GDCM's scan and sort: one list per series; it does not split a
  series into its stacks).

Both must find the same series and the same files in each. Each round times both once in
turn (interleaved); the fastest round counts, CPU and wall time both printed (on a shared
machine CPU time says what each costs). The target: radharmony >= 5x faster.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

#: the bar the issue sets (radharmony's time x this <= SimpleITK's)
TARGET = 5.0
SERIES = 4
SIDE = 32
#: the axial stacks' tilts about the left-right axis (degrees): one stack per disc level
AXIAL_TILTS = (-12.0, 0.0, 14.0)


#: ``--mr-headers``: what an MR scanner's header carries besides the geometry (36 elements)
MR_TAGS = {"ImageType": ["ORIGINAL", "PRIMARY", "M", "ND"], "StudyDate": "20240101",
           "SeriesDate": "20240101", "AcquisitionDate": "20240101", "ContentDate": "20240101",
           "StudyTime": "101010", "SeriesTime": "101010", "AcquisitionTime": "101010",
           "ContentTime": "101010", "AccessionNumber": "A1", "Manufacturer": "ACME",
           "InstitutionName": "Hospital", "StationName": "MR1", "ReferringPhysicianName": "X^Y",
           "PatientName": "A^B", "PatientID": "123", "PatientBirthDate": "19700101",
           "PatientSex": "F", "BodyPartExamined": "LSPINE", "ScanningSequence": "SE",
           "SequenceVariant": "SK", "ScanOptions": "FS", "RepetitionTime": "3000",
           "EchoTime": "90", "MagneticFieldStrength": "3", "EchoTrainLength": "17",
           "PercentSampling": "100", "PercentPhaseFieldOfView": "100", "PixelBandwidth": "200",
           "SoftwareVersions": "V1", "ProtocolName": "T2", "FlipAngle": "150", "SAR": "0.5",
           "PatientPosition": "HFS", "StudyID": "1", "SliceLocation": "0"}


def write_study(work: Path, slices: int, *, mr_headers: bool = False) -> Path:
    """The study folder (written once): ``slices`` files in 4 series, 2 of them multi-stack
    (:func:`radharmony.fake.rsna_lumbar_spine.write_stacks`: file names the instance
    numbers); ``mr_headers``: each header also carries :data:`MR_TAGS`."""
    from radharmony.fake.rsna_lumbar_spine import tilted_axial, write_stacks
    from radharmony.fake.volumes import SAGITTAL, slice_positions

    root = Path(work) / f"study-{slices}{'-mr' if mr_headers else ''}"
    done = root / "done.json"
    if done.exists():
        return root
    rng = np.random.default_rng(0)
    per_series = [slices // SERIES + (i < slices % SERIES) for i in range(SERIES)]
    for s, count in enumerate(per_series):
        plan = [(SAGITTAL, count)] if s < 2 else \
            [(tilted_axial(t), count // 3 + (k < count % 3)) for k, t in enumerate(AXIAL_TILTS)]
        stacks = [(orientation, slice_positions(n, orientation, step=1.2,
                                                origin=(-20.0, -20.0, -60.0 + 40.0 * k)),
                   rng.integers(0, 1200, (n, SIDE, SIDE)).astype(np.uint16))
                  for k, (orientation, n) in enumerate(plan)]
        write_stacks(root / str(1000 + s), stacks, series_uid=f"1.2.826.0.1.3680043.10.7.{s + 1}",
                     seed=s, SeriesDescription=("Sagittal T1", "Sagittal T2/STIR", "Axial T2",
                                                "Axial T2")[s], **(MR_TAGS if mr_headers else {}))
    done.write_text(json.dumps({"slices": slices, "series": SERIES}))
    return root


def radharmony_scan(root: Path) -> dict[str, list[list[str]]]:
    """Series UID -> its stacks, each the files in slice order."""
    from radharmony.volumes.dicom import geometry, series_of, stacks_of
    from radharmony.volumes.dicom_headers import find_files, scan

    headers, _ = scan(find_files(root))
    return {uid: [[h.file for h in geometry(stack, root)[0]] for stack in stacks_of(slices, root)]
            for uid, slices in series_of(headers).items()}


def simpleitk_scan(root: Path) -> dict[str, list[str]]:
    """Series UID -> its files as GDCM sorts them."""
    import SimpleITK as sitk

    out = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        for uid in sitk.ImageSeriesReader.GetGDCMSeriesIDs(str(folder)):
            out[uid] = list(sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(folder), uid))
    return out


def _timed(fn) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def bench(work: Path, *, slices: int = 1000, runs: int = 7, mr_headers: bool = False) -> dict:
    """The fastest wall and CPU time of each contender and the ratios."""
    import SimpleITK as sitk

    sitk.ProcessObject_SetGlobalWarningDisplay(False)
    root = write_study(work, slices, mr_headers=mr_headers)
    ours, theirs = radharmony_scan(root), simpleitk_scan(root)
    if set(ours) != set(theirs) or any(
            sorted(f for stack in ours[u] for f in stack) != sorted(theirs[u]) for u in ours):
        raise AssertionError("the two scans disagree on the series or their files")
    best = {"radharmony": [np.inf, np.inf], "simpleitk": [np.inf, np.inf]}
    for _ in range(runs):
        for name, fn in (("radharmony", radharmony_scan), ("simpleitk", simpleitk_scan)):
            wall, cpu = _timed(lambda: fn(root))
            best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
    return {"slices": sum(len(f) for f in theirs.values()), "series": len(ours),
            "headers": "MR-like" if mr_headers else "minimal",
            "stacks": sum(len(s) for s in ours.values()), "runs": runs, "times": best,
            "ratio": {"wall": best["simpleitk"][0] / best["radharmony"][0],
                      "cpu": best["simpleitk"][1] / best["radharmony"][1]}}


def report(out: dict) -> str:
    """The result as a Markdown table and the target's line."""
    lines = [f"A study of {out['slices']} slices in {out['series']} series ({out['stacks']} "
             f"stacks, {out['headers']} headers), grouped and sorted; fastest of {out['runs']} "
             "interleaved rounds:", "",
             "| contender | wall s | CPU s |", "|---|---:|---:|"]
    for name, (wall, cpu) in out["times"].items():
        lines.append(f"| {name} | {wall:.4f} | {cpu:.4f} |")
    ratio = out["ratio"]
    state = "met" if ratio["cpu"] >= TARGET else "NOT met"
    lines += ["", f"- {state}: header scan vs SimpleITK's GDCM series scan {ratio['cpu']:.2f}x "
                  f"CPU ({ratio['wall']:.2f}x wall), bar {TARGET:g}x"]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("bench-data/dicom_scan"))
    ap.add_argument("--slices", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--mr-headers", action="store_true",
                    help="headers with 36 more elements, as MR scanners write them")
    args = ap.parse_args(argv)
    out = bench(args.dir, slices=args.slices, runs=args.runs, mr_headers=args.mr_headers)
    print(json.dumps(out, default=float))
    print(report(out))


if __name__ == "__main__":
    main()
