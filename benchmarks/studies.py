"""Study-level speed: cached study epochs against image-level ones, and the Parquet export.

    python -m benchmarks.studies [--images 10000] [--rounds 5] [--out docs/study_benchmarks.md]

(s1) **Study-level cached epoch**: ``DataLoader(XDataset(level="study", max_images=4),
     batch_size=32, collate_fn=radharmony.collate)`` against the image-level plain
     ``DataLoader(XDataset(...), batch_size=64)`` on the same images and the same packed
     cache (``pre_cache`` once), ``num_workers=0``, in alternating rounds (the best round of
     each counts: on a shared machine the slower rounds measure the neighbours). Images per
     second count real images only (``img_mask``). Target: >= 0.8x. A second row counts the
     study batch's image slots, padding included (what it writes), against the same; a
     third the same studies as packed batches (``packed=True``: the real images only).
(s2) **Parquet export of cached images**: :func:`radharmony.export.to_parquet` against
     Hugging Face ``datasets``' ``Dataset.from_generator(gen, features).to_parquet(...)``
     whose generator yields the same cached arrays (the study's views as a list of uint8
     arrays, ``List(Image())``, plus the sections); both read back with
     ``datasets.load_dataset("parquet")`` and compared pixel for pixel. Target: >= 2x.

(s3) **512 px** (``--size512 N``, 0 skips): on ``benchmarks.run``'s corpus of N 600-1000 px
     PNGs, radharmony with ``DefaultTransform(size=512)``: its first epoch against its own
     decode of every file (target <= 1.2x), and its cached plain ``DataLoader`` epoch against
     MONAI's ``PersistentDataset`` running ``benchmarks.run``'s pipeline at 512 (cached epochs,
     best of alternating rounds; target >= 10x; radharmony in bfloat16, and in float32,
     MONAI's dtype, from the same cache). In the same rounds, the bounds of a cached
     epoch here: the conversion alone (pack -> batch tensor), and a plain copy and a plain
     write of the batch tensor's bytes (memory bandwidth).

The corpus is a ReXGradient-format replica (fake writer metadata, ~1.8 images per study)
with small 16-bit PNGs (the cached arrays are 224 px whatever the source size), written once
under ``bench-data/``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def corpus(work: Path, images: int) -> tuple[Path, Path]:
    """A ReXGradient replica with ``images`` 16-bit PNGs of 256-320 px sides (made once)."""
    from radharmony.fake.images import synthetic_cxr, write_png
    from radharmony.fake.rexgradient import _dump, make_metadata

    root = work / f"study-corpus-{images}"
    meta_file = root / "train_metadata_view_position.json"
    if (root / "done").exists():
        return root / "deid_png", meta_file
    shutil.rmtree(root, ignore_errors=True)
    meta, n = {}, 0
    for key, entry in make_metadata(images, seed=5).items():
        if n >= images:
            break
        keep = images - n
        entry = {**entry, **{f: entry[f][:keep] for f in ("ImagePath", "ImageViewPosition",
                                                          "ImageShape", "ImageBodyPart",
                                                          "ImageModality")}}
        meta[key], n = entry, n + len(entry["ImagePath"])
    root.mkdir(parents=True)
    _dump(meta_file, meta)
    rng = np.random.default_rng(3)
    print(f"writing {n} synthetic PNGs under {root} (once) ...", flush=True)
    for e in meta.values():
        for p in e["ImagePath"]:
            write_png(root / p.replace("../", "", 1),
                      synthetic_cxr(int(rng.integers(256, 321)), int(rng.integers(256, 321)),
                                    rng=rng))
    (root / "done").write_text("ok\n")
    return root / "deid_png", meta_file


def datasets_for(base: Path, meta: Path, cache: Path, max_images: int = 4):
    import torch

    from radharmony.datasets.rexgradient import ReXGradientTrainDataset

    images = ReXGradientTrainDataset(base, meta, cache_dir=cache, dtype=torch.bfloat16)
    images.pre_cache(progress=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        studies = ReXGradientTrainDataset(base, meta, cache_dir=cache, dtype=torch.bfloat16,
                                          level="study", max_images=max_images)
    return images, studies


def epoch_rate(loader) -> tuple[int, int, float]:
    """Real images, image slots (padding included) and seconds of one epoch."""
    n = slots = 0
    t0 = time.perf_counter()
    for batch in loader:
        mask = batch.get("img_mask")  # a study batch's; an image batch's images all count
        n += len(batch["img"]) if mask is None else int(mask.sum())
        slots += len(batch["img"]) if mask is None else mask.numel()
    return n, slots, time.perf_counter() - t0


def bench_epochs(images, studies, rounds: int) -> dict:
    import torch

    import radharmony
    from radharmony.data.studies import StudyDataset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the studies over K, counted when `studies` was built
        packed = StudyDataset(images, max_images=studies.max_images, packed=True)
    loaders = {"image": torch.utils.data.DataLoader(images, batch_size=64, shuffle=True)}
    for name, ds in (("study", studies), ("packed", packed)):
        loaders[name] = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True,
                                                    collate_fn=radharmony.collate)
    for dl in loaders.values():  # warm-up
        epoch_rate(dl)
    best, share = dict.fromkeys(loaders, 0.0), 0.0
    for _ in range(rounds):
        for name, dl in loaders.items():
            n, slots, dt = epoch_rate(dl)
            best[name] = max(best[name], n / dt)
            if name == "study":
                share = slots / n  # the study epoch's slots per real image
    return {"image_level_images_per_s": best["image"],
            "study_level_images_per_s": best["study"],
            "ratio": best["study"] / best["image"], "images": len(images),
            "studies": len(studies), "slots_per_image": share,
            "study_level_slots_per_s": best["study"] * share,
            "packed_images_per_s": best["packed"], "packed_ratio": best["packed"] / best["image"]}


def bench_parquet(studies, work: Path) -> dict:
    import datasets

    from radharmony.export import to_parquet
    from radharmony.studies import SECTION_KEYS

    out = work / "pq-radharmony"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    to_parquet(studies, out, shard_size=1000, progress=False)
    ours = time.perf_counter() - t0

    features = datasets.Features({"study_id": datasets.Value("string"),
                                  "images": datasets.List(datasets.Image()),
                                  **{k: datasets.Value("string") for k in SECTION_KEYS}})

    def gen():
        ix = studies.index
        for s in range(len(studies)):
            arrays = studies._quantized(np.asarray(ix.rows[s], np.int64))
            yield {"study_id": str(ix.study_ids[s]), "images": list(arrays),
                   **{k: ix.sections[s][k] for k in SECTION_KEYS}}

    hf_dir = work / "pq-hf"
    shutil.rmtree(hf_dir, ignore_errors=True)
    hf_dir.mkdir(parents=True)
    with tempfile.TemporaryDirectory(dir=work) as cache:
        t0 = time.perf_counter()
        ds = datasets.Dataset.from_generator(gen, features=features, cache_dir=cache)
        ds.to_parquet(str(hf_dir / "hf.parquet"))
        theirs = time.perf_counter() - t0
        del ds
    a = datasets.load_dataset("parquet", data_files=sorted(map(str, out.glob("*.parquet"))),
                              split="train", cache_dir=str(work / "hf-read-a"))
    b = datasets.load_dataset("parquet", data_files=[str(hf_dir / "hf.parquet")],
                              split="train", cache_dir=str(work / "hf-read-b"))
    equal = len(a) == len(b)
    for i in range(len(a)) if equal else ():
        ra, rb = a[i], b[i]
        equal &= ra["study_id"] == rb["study_id"] and all(ra[k] == rb[k] for k in SECTION_KEYS)
        equal &= len(ra["images"]) == len(rb["images"]) and all(
            np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(ra["images"],
                                                                         rb["images"]))
        if not equal:
            break
    return {"radharmony_s": ours, "hf_datasets_s": theirs, "speedup": theirs / ours,
            "equal_read_back": bool(equal), "images": int(sum(len(r) for r in
                                                                studies.index.rows))}


def bench_512(work: Path, n: int, rounds: int) -> dict:
    import torch
    from monai.data import DataLoader as MonaiLoader, PersistentDataset
    from monai.transforms import Compose, Resized, SpatialPadd

    from benchmarks.run import _monai_pipeline, corpus as image_corpus
    from radharmony.datasets.rexgradient import ReXGradientTrainDataset
    from radharmony.imaging.pipeline import DefaultTransform

    base, meta = image_corpus(work, n)
    files = sorted(Path(base).rglob("*.png"))
    pipe = DefaultTransform(size=512)
    pipe.encode(files[-1])  # compile and load the decoder outside the timing
    t0 = time.perf_counter()
    for f in files:
        pipe.encode(f)
    decode = time.perf_counter() - t0
    cache = work / f"cache512-{n}"
    shutil.rmtree(cache, ignore_errors=True)
    ds = ReXGradientTrainDataset(base, meta, cache_dir=cache, transform=pipe,
                                 dtype=torch.bfloat16)
    dl = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True)
    t0 = time.perf_counter()
    epoch_rate(dl)
    first = time.perf_counter() - t0
    steps = [t for t in _monai_pipeline().transforms
             if not isinstance(t, (Resized, SpatialPadd))]
    steps[3:3] = [Resized(keys="img", spatial_size=512, size_mode="longest", mode="area"),
                  SpatialPadd(keys="img", spatial_size=(512, 512), value=-1.0)]
    mcache = work / f"monai512-{n}"
    shutil.rmtree(mcache, ignore_errors=True)
    mds = PersistentDataset([{"img": str(f)} for f in files], transform=Compose(steps),
                            cache_dir=mcache)
    mdl = MonaiLoader(mds, batch_size=64, shuffle=True)
    f32 = torch.utils.data.DataLoader(  # MONAI's dtype, from the same cache
        ReXGradientTrainDataset(base, meta, cache_dir=cache, transform=pipe,
                                dtype=torch.float32), batch_size=64, shuffle=True)
    epoch_rate(mdl), epoch_rate(dl), epoch_rate(f32)  # MONAI fills its cache; all warm up
    ceilings = _ceilings(ds)
    loaders = {"rh": dl, "monai": mdl, "rh_float32": f32}
    best = {**{k: 0.0 for k in loaders}, **{k: 0.0 for k in ceilings}}
    for _ in range(rounds):
        for name, loader in (*loaders.items(), *ceilings.items()):
            got = epoch_rate(loader) if name in loaders else loader()
            best[name] = max(best[name], got[0] / got[-1])
    return {"images": len(files), "decode_s": decode, "first_epoch_s": first,
            "first_over_decode": first / decode, "radharmony_cached_images_per_s": best["rh"],
            "monai_cached_images_per_s": best["monai"], "speedup": best["rh"] / best["monai"],
            "radharmony_float32_images_per_s": best["rh_float32"],
            "conversion_only_images_per_s": best.get("convert", float("nan")),
            "file_checks_only_images_per_s": best.get("check", float("nan")),
            "memcpy_images_per_s": best.get("memcpy", float("nan")),
            "fill_images_per_s": best.get("fill", float("nan"))}


def _ceilings(ds, batch: int = 64) -> dict:
    """What bounds a cached epoch at this size on this machine, each as ``() -> (images, s)``
    over one epoch's worth of 64-image batches: ``convert``: the conversion alone (pack ->
    batch tensor, no lookups, samples or loader); ``check``: the file checks alone (one
    ``lstat`` per image, which keeps a rewritten image from being served stale);
    ``memcpy``: copying the batch tensor's bytes (one image's output in the dataset's dtype
    each); ``fill``: writing them (a constant)."""
    import torch

    from radharmony.data import batches

    files = ds._file_table()
    where = files.pack[ds._file_rows]
    if where[0] < 0 or (where != where[0]).any():  # not all in one pack: no bare conversion
        return {}
    pack = batches._pack(ds.image_cache, files.pack_names[int(where[0])])
    records, file_rows = files.row[ds._file_rows], ds._file_rows
    key_of = batches._key_of(ds)
    size, n = ds.pipeline.size, len(records)
    out = torch.empty((batch, 1, size, size), dtype=ds.dtype)
    raw = out.view(torch.uint8).numpy().reshape(batch, -1)
    src = np.ones_like(raw)
    rng = np.random.default_rng(0)

    def timed(step):
        def run():
            order = rng.permutation(n)
            t0 = time.perf_counter()
            for a in range(0, n, batch):
                step(order[a:a + batch])
            return n, time.perf_counter() - t0
        return run

    return {"convert": timed(lambda r: ds.pipeline.to_tensor(pack.data, ds.dtype,
                                                             rows=records[r], out=out[:len(r)])),
            "check": timed(lambda r: files.identify_many(file_rows[r], key_of)),
            "memcpy": timed(lambda r: np.copyto(raw[:len(r)], src[:len(r)])),
            "fill": timed(lambda r: raw[:len(r)].fill(1))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--images", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--size512", type=int, default=540, metavar="N",
                   help="images of the 512 px comparison (0: skip it)")
    p.add_argument("--max-images", type=int, default=4, help="K of the study epoch (s1)")
    p.add_argument("--parts", default="epochs,parquet,512",
                   help="comma-separated: epochs (s1), parquet (s2), 512 (s3)")
    p.add_argument("--work", type=Path, default=ROOT / "bench-data")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "study_benchmarks.md")
    a = p.parse_args(argv)
    parts = set(a.parts.split(","))
    epochs = parquet = big = None
    if parts & {"epochs", "parquet"}:
        base, meta = corpus(a.work, a.images)
        cache = a.work / f"study-cache-{a.images}"
        images, studies = datasets_for(base, meta, cache, a.max_images)
        if "epochs" in parts:
            epochs = bench_epochs(images, studies, a.rounds)
            print(json.dumps(epochs, indent=1), flush=True)
        if "parquet" in parts:
            parquet = bench_parquet(studies, a.work)
            print(json.dumps(parquet, indent=1), flush=True)
    if "512" in parts and a.size512:
        big = bench_512(a.work, a.size512, a.rounds)
        print(json.dumps(big, indent=1), flush=True)
    size = f" --size512 {a.size512}" if "512" in parts and a.size512 else ""
    text = f"""## Latest run

`python -m benchmarks.studies --images {a.images} --parts {a.parts}{size}` on
{platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()};
DataLoader `num_workers=0`.

| measurement | radharmony | baseline | ratio | target |
|---|---|---|---|---|
"""
    if epochs:
        ok1 = epochs["ratio"] >= 0.8
        text += (f"| cached epoch, images/s ({epochs['images']:,} images in "
                 f"{epochs['studies']:,} studies, K={a.max_images}) | study level "
                 f"{epochs['study_level_images_per_s']:,.0f} | image-level plain DataLoader "
                 f"{epochs['image_level_images_per_s']:,.0f} | {epochs['ratio']:.2f}x | "
                 f">= 0.8x: {'met' if ok1 else 'NOT met'} |\n"
                 f"| same, image slots/s (a study batch's {epochs['slots_per_image']:.2f} "
                 f"slots per real image: {1 - 1 / epochs['slots_per_image']:.0%} padding) | "
                 f"study level {epochs['study_level_slots_per_s']:,.0f} | image level "
                 f"{epochs['image_level_images_per_s']:,.0f} | "
                 f"{epochs['study_level_slots_per_s'] / epochs['image_level_images_per_s']:.2f}x"
                 f" | - |\n"
                 f"| same, packed study batches (`packed=True`: the real images only) | "
                 f"study level {epochs['packed_images_per_s']:,.0f} | image level "
                 f"{epochs['image_level_images_per_s']:,.0f} | {epochs['packed_ratio']:.2f}x | "
                 f">= 0.8x: {'met' if epochs['packed_ratio'] >= 0.8 else 'NOT met'} |\n")
    if parquet:
        ok2 = parquet["speedup"] >= 2 and parquet["equal_read_back"]
        text += (f"| Parquet export of {parquet['images']:,} cached images, s | `to_parquet` "
                 f"{parquet['radharmony_s']:.1f} | HF `Dataset.from_generator(...).to_parquet` "
                 f"{parquet['hf_datasets_s']:.1f} | {parquet['speedup']:.2f}x | >= 2x, equal "
                 f"read-back ({parquet['equal_read_back']}): {'met' if ok2 else 'NOT met'} |\n")
    if big:
        ok3, ok4 = big["speedup"] >= 10, big["first_over_decode"] <= 1.2
        text += (f"| 512 px cached plain DataLoader, images/s ({big['images']} images) | "
                 f"{big['radharmony_cached_images_per_s']:,.0f} | MONAI PersistentDataset "
                 f"{big['monai_cached_images_per_s']:,.0f} | {big['speedup']:.1f}x | >= 10x: "
                 f"{'met' if ok3 else 'NOT met'} |\n"
                 f"| same, radharmony in float32 (MONAI's dtype) | "
                 f"{big['radharmony_float32_images_per_s']:,.0f} | MONAI PersistentDataset "
                 f"{big['monai_cached_images_per_s']:,.0f} | "
                 f"{big['radharmony_float32_images_per_s'] / big['monai_cached_images_per_s']:.1f}x"
                 f" | - |\n"
                 f"| 512 px first epoch, s | {big['first_epoch_s']:.1f} | own decode of the "
                 f"corpus {big['decode_s']:.1f} | {big['first_over_decode']:.2f}x | <= 1.2x: "
                 f"{'met' if ok4 else 'NOT met'} |\n"
                 f"| 512 px ceilings, images/s | conversion alone "
                 f"{big['conversion_only_images_per_s']:,.0f} | memcpy of the output bytes "
                 f"{big['memcpy_images_per_s']:,.0f}, writing them "
                 f"{big['fill_images_per_s']:,.0f} | 10x MONAI needs "
                 f"{10 * big['monai_cached_images_per_s']:,.0f} | - |\n"
                 f"| 512 px, us per image | loader {_us(big['radharmony_cached_images_per_s'])}"
                 f" = conversion {_us(big['conversion_only_images_per_s'])} + file checks "
                 f"{_us(big['file_checks_only_images_per_s'])} + the rest "
                 f"{_rest_us(big)} | 10x MONAI allows "
                 f"{_us(10 * big['monai_cached_images_per_s'])} | - | - |\n"
                 f"| 512 px cached plain DataLoader against a memcpy of its output bytes "
                 f"| {big['radharmony_cached_images_per_s']:,.0f} | "
                 f"{big['memcpy_images_per_s']:,.0f} | "
                 f"{big['radharmony_cached_images_per_s'] / big['memcpy_images_per_s']:.0%} "
                 f"| - |\n")
    text += "\nWhat each row runs: see `benchmarks/studies.py` (module docstring).\n"
    write_section(a.out, text)
    print(text)
    return 0


def _us(rate: float) -> str:
    return f"{1e6 / rate:.1f}"


def _rest_us(big: dict) -> str:
    """Microseconds per image of the loader outside the bare conversion and file checks."""
    parts = ("conversion_only_images_per_s", "file_checks_only_images_per_s")
    rest = 1 / big["radharmony_cached_images_per_s"] - sum(1 / big[k] for k in parts)
    return f"{1e6 * rest:.1f}"


#: the section of the page that a run rewrites (the analysis above it stays)
START, END = "<!-- benchmarks.studies: latest run -->", "<!-- end of the latest run -->"


def write_section(path: Path, text: str) -> None:
    """Put ``text`` between :data:`START` and :data:`END` of the page at ``path`` (appended
    when the page has no such section; a new file holds the section alone)."""
    block = f"{START}\n{text}{END}\n"
    page = path.read_text() if path.is_file() else ""
    if START in page and END in page:
        page = page[:page.index(START)] + block + page[page.index(END) + len(END) + 1:]
    else:
        page = (page.rstrip("\n") + "\n\n" if page else "") + block
    path.write_text(page)


if __name__ == "__main__":
    raise SystemExit(main())
