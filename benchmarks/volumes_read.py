"""Reading CT volumes: radharmony's readers against SimpleITK and MONAI, side by side in one run.

    python -m benchmarks.volumes_read [--scale 1.0] [--runs 3] [--dir bench-data/volumes_read]
                                      [--cases nifti dicom folder]

On fake chest CTs (:func:`radharmony.fake.volumes.synthetic_ct`, int16 HU) of
512 x 512 x (150, 300, 450) voxels at ``--scale 1`` (sides and depths scale with it):

(a) ``.nii.gz`` (gzip level 1, as nibabel writes) decoded to an int16 array with its affine:
    ``read_volume(path, ct=True)`` (canonical order, Hounsfield check included) against
    SimpleITK ``ReadImage`` + ``GetArrayViewFromImage`` and MONAI ``LoadImage(image_only=True)``
    (its defaults: nibabel, float32); beside them, not a contender, the floor of any reader
    that inflates with one thread: the files inflated by libdeflate and nothing else, and the
    ceiling each ratio has under it;
(b) one DICOM series of 300 slices (uint16, BitsStored 12, intercept -1024; names shuffled),
    header scan included: ``read_volume(folder)`` against SimpleITK's GDCM series reader
    (``GetGDCMSeriesFileNames`` then ``ImageSeriesReader``);
(c) one folder holding 10 such series (all files side by side), one asked for by its SeriesInstanceUID: ``read_volume(folder,
    series_uid=...)`` against ``GetGDCMSeriesFileNames(folder, uid)`` then the series reader.

Each round times every contender once, in turn (interleaved, so a busy neighbour slows all
alike); the fastest round counts (the timeit convention), wall and CPU time both printed --
on a shared machine CPU time says what each reader costs. Every contender's values are checked
to be the same voxels (their sum) before anything is timed. The data is written once under
``--dir`` and reused.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

#: the bars the issue sets (radharmony's time x this <= the contender's)
TARGETS = {"nifti_vs_simpleitk": 1.5, "nifti_vs_monai": 10.0, "dicom_vs_simpleitk": 3.0,
           "folder_vs_simpleitk": 10.0}
DEPTHS = (150, 300, 450)
#: the nifti case's floor (not a contender: the inflate alone) and where its voxels start
FLOOR, FLOOR_OFFSET = "inflate alone", 352
SERIES_SLICES = 300
FOLDER_SERIES = 10


def write_data(work: Path, scale: float) -> dict:
    """The fake volumes under ``work`` (written once): NIfTI files, one series, a folder."""
    from radharmony.fake.volumes import slice_positions, synthetic_ct, write_dicom_series, \
        write_nifti

    side = max(8, round(512 * scale))
    root = work / f"scale-{scale:g}"
    done = root / "done.json"
    if done.exists():
        return _paths(json.loads(done.read_text()))
    rng = np.random.default_rng(0)
    niftis = []
    for depth in DEPTHS:
        hu = synthetic_ct((max(4, round(depth * scale)), side, side), rng=rng)
        affine = np.diag([-0.75, 0.75, 1.5, 1.0])   # RAS: i toward L, j toward A, k toward S
        path = root / f"ct_{depth}.nii.gz"             # (dcm2niix's usual LAS)
        write_nifti(path, hu.transpose(2, 1, 0)[:, ::-1], affine, compresslevel=1)
        niftis.append(str(path))
    slices = max(4, round(SERIES_SLICES * scale))
    stored = (synthetic_ct((slices, side, side), rng=rng).astype(np.int32) + 1024) \
        .clip(0, 4095).astype(np.uint16)
    positions = slice_positions(slices, step=1.0, origin=(-190.0, -190.0, -300.0))
    write_dicom_series(root / "series", stored, bits_stored=12, positions=positions,
                       series_uid="1.2.826.0.1.3680043.10.1", SeriesDescription="Chest")
    uids = []
    for n in range(FOLDER_SERIES):
        uid = f"1.2.826.0.1.3680043.10.{100 + n}"
        write_dicom_series(root / "folder", stored, bits_stored=12,
                           positions=positions, series_uid=uid, seed=n, names=f"{n}_{{:05d}}",
                           SeriesDescription=f"Recon {n}")
        uids.append(uid)
    info = {"niftis": niftis, "series": str(root / "series"), "folder": str(root / "folder"),
            "uid": uids[FOLDER_SERIES // 2], "side": side, "slices": slices}
    done.write_text(json.dumps(info))
    return _paths(info)


def _paths(info: dict) -> dict:
    return {k: Path(v) if k in ("series", "folder") else v for k, v in info.items()}


def _timed(fn) -> tuple[float, float, int]:
    """(wall s, CPU s, checksum of the voxels) of one call; ``fn`` returns (voxels, their
    owner: a SimpleITK image must outlive the NumPy view on it), or (voxels, owner, (wall s,
    CPU s)) when it timed its reads itself (the checksums of several files left out)."""
    cpu, wall = time.process_time(), time.perf_counter()
    voxels, owner, *times = fn()
    wall, cpu = times[0] if times else (time.perf_counter() - wall, time.process_time() - cpu)
    total = int(np.asarray(voxels).sum(dtype=np.int64))
    del voxels, owner
    return wall, cpu, total


def contenders(data: dict) -> dict:
    """Each case's contenders: name -> zero-argument reader returning the voxel array."""
    import SimpleITK as sitk

    from radharmony.volumes import read_volume

    sitk.ProcessObject_SetGlobalWarningDisplay(False)
    try:
        from monai.transforms import LoadImage
        monai_load = LoadImage(image_only=True)
    except ImportError:  # pragma: no cover - monai is in the bench extra
        monai_load = None

    def series(folder, uid=None):
        files = sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(folder), *([uid] if uid else []))
        reader = sitk.ImageSeriesReader()
        reader.SetFileNames(files)
        image = reader.Execute()
        return sitk.GetArrayViewFromImage(image), image

    def image(path):
        image = sitk.ReadImage(str(path))
        return sitk.GetArrayViewFromImage(image), image

    def volume(*args, **kwargs):
        volume = read_volume(*args, **kwargs)
        return volume.array, volume

    def inflate_only(path):
        """The floor under any reader that inflates with one thread: the file inflated by
        libdeflate into fresh memory (pages mapped by a second thread), nothing else."""
        from radharmony.imaging.inflate import inflate_gzip_into
        from radharmony.volumes.checks import allocate

        with open(path, "rb") as fh:
            fh.seek(-4, 2)
            size = int.from_bytes(fh.read(4), "little")
        out = allocate(size, np.uint8, populate=False)
        if not inflate_gzip_into(path, out):
            raise RuntimeError(f"{path}: not inflated by libdeflate")
        return out[FLOOR_OFFSET:].view(np.int16), out

    def all_niftis(read):
        """Every NIfTI file read in turn (each released before the next); only the reads
        are timed, not the checksums."""
        def run():
            total, wall, cpu = 0, 0.0, 0.0
            for path in data["niftis"]:
                c, w = time.process_time(), time.perf_counter()
                voxels, owner = read(path)
                wall, cpu = wall + time.perf_counter() - w, cpu + time.process_time() - c
                total += int(np.rint(voxels).sum(dtype=np.int64))
                del voxels, owner
            return np.array(total), None, (wall, cpu)
        return run

    cases = {
        "nifti": {
            "radharmony": all_niftis(lambda p: volume(p, ct=True)),
            "simpleitk": all_niftis(image),
        },
        "dicom": {
            "radharmony": lambda: volume(data["series"]),
            "simpleitk": lambda: series(data["series"]),
        },
        "folder": {
            "radharmony": lambda: volume(data["folder"], series_uid=data["uid"]),
            "simpleitk": lambda: series(data["folder"], data["uid"]),
        },
    }
    if monai_load is not None:
        cases["nifti"]["monai"] = all_niftis(lambda p: (np.asarray(monai_load(p)), None))
    try:
        from radharmony.imaging.inflate import _c_api
        if _c_api() is not None:
            cases["nifti"][FLOOR] = all_niftis(inflate_only)
    except ImportError:  # pragma: no cover
        pass
    return cases


def bench(work: Path, *, scale: float = 1.0, runs: int = 3, only=None) -> dict:
    """Every case's fastest wall and CPU time per contender, and the ratios (``only``: the
    cases to run, e.g. ("nifti",) for a process that has run no DICOM reader)."""
    data = write_data(Path(work), scale)
    cases = {case: fns for case, fns in contenders(data).items() if not only or case in only}
    best: dict = {case: {name: [np.inf, np.inf] for name in fns} for case, fns in cases.items()}
    for case, fns in cases.items():
        sums = {name: _timed(fn)[2] for name, fn in fns.items()}   # warm-up and agreement
        if len(set(sums.values())) != 1:
            raise AssertionError(f"{case}: the readers disagree on the voxels: {sums}")
    for _ in range(runs):
        for case, fns in cases.items():
            for name, fn in fns.items():
                wall, cpu, _ = _timed(fn)
                best[case][name] = [min(best[case][name][0], wall), min(best[case][name][1], cpu)]
    out = {"scale": scale, "runs": runs, "side": data["side"], "slices": data["slices"],
           "times": best, "ratios": {}}
    for key in TARGETS:
        case, _, peer = key.split("_")
        if case in best and peer in best[case]:
            ours, theirs = best[case]["radharmony"], best[case][peer]
            out["ratios"][key] = {"wall": theirs[0] / ours[0], "cpu": theirs[1] / ours[1]}
    return out


def report(out: dict) -> str:
    """The result as a Markdown table and one line per target."""
    lines = [f"Volumes read at scale {out['scale']:g} ({out['side']}^2 in-plane; series of "
             f"{out['slices']} slices), fastest of {out['runs']} interleaved rounds:", "",
             "| case | contender | wall s | CPU s |", "|---|---|---:|---:|"]
    for case, names in out["times"].items():
        for name, (wall, cpu) in names.items():
            lines.append(f"| {case} | {name} | {wall:.3f} | {cpu:.3f} |")
    lines.append("")
    floor = out["times"].get("nifti", {}).get(FLOOR)
    if floor is not None:
        for peer in ("simpleitk", "monai"):
            if peer in out["times"]["nifti"]:
                lines.append(f"- ceiling: nifti vs {peer} can be at most "
                             f"{out['times']['nifti'][peer][0] / floor[0]:.2f}x wall for a "
                             f"reader that inflates with one thread (the {FLOOR}: "
                             f"{floor[0]:.3f} s)")
    for key, bar in TARGETS.items():
        if key.split("_")[0] not in out["times"]:
            continue
        if key not in out["ratios"]:
            lines.append(f"- {key}: not measured (contender not installed)")
            continue
        ratio = out["ratios"][key]
        state = "met" if ratio["wall"] >= bar else "NOT met"
        lines.append(f"- {state}: {key.replace('_', ' ')} {ratio['wall']:.2f}x wall "
                     f"({ratio['cpu']:.2f}x CPU), bar {bar:g}x")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("bench-data/volumes_read"))
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cases", nargs="+", choices=("nifti", "dicom", "folder"),
                    help="only these cases (default: all; SimpleITK reads .nii.gz faster in a "
                         "process that has run its DICOM series reader)")
    args = ap.parse_args(argv)
    out = bench(args.dir, scale=args.scale, runs=args.runs, only=args.cases)
    print(json.dumps(out, default=float))
    print(report(out))


if __name__ == "__main__":
    main()
