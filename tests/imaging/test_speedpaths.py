"""The fast paths keep the slow paths' results: resize, percentiles, tensor conversion, JPEG
DCT-domain decoding, the JSON reader, column-wise ReXGradient harmonization, fast fakes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.datasets import rexgradient as rex
from radharmony.reports.format import section_text
from radharmony.fake import rexgradient as fake_rex
from radharmony.fake.images import synthetic_cxr, write_png
from radharmony.imaging.geometry import Letterbox
from radharmony.imaging.read import read_image
from radharmony.errors import MetadataError
from radharmony.table.read_json import load_json
from radharmony.table.schema import validate
from radharmony.imaging import jit
from radharmony.imaging.convert import _scale
from radharmony.imaging.pipeline import DefaultTransform, area_resize, percentiles

REAL = Path(__file__).resolve().parents[3] / "shared" / "real"


# -- image pipeline ----------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(937, 811), (600, 1000), (448, 300), (230, 100), (50, 40)])
def test_area_resize_matches_one_step_area_resize(shape):
    img = synthetic_cxr(*shape, rng=np.random.default_rng(0))
    box = Letterbox.fit(*shape, 224)
    fast = area_resize(img, box).astype(np.float64)
    ref = box.resize(img).astype(np.float64)
    assert fast.shape == ref.shape == (box.new_h, box.new_w)
    assert np.abs(fast - ref).mean() <= 0.005 * 4095  # block-phase rounding only
    assert abs(fast.mean() - ref.mean()) <= 0.002 * 4095


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_percentiles_equal_numpy(dtype):
    rng = np.random.default_rng(1)
    for n in (1, 2, 3, 17, 4000):
        a = rng.integers(0, 255 if dtype == np.uint8 else 4096, n).astype(dtype)
        for q in ((0.5, 99.5), (0.0, 100.0), (10.0, 90.0)):
            assert np.allclose(percentiles(a, q), np.percentile(a, q), rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32,
                                   torch.float64])
def test_to_tensor_table_equals_arithmetic_and_batches_equal_items(dtype):
    q = np.arange(256, dtype=np.uint8).repeat(3).reshape(3, 16, 16)
    ref = _scale(torch.from_numpy(q.astype(np.float32)), 255.0).unsqueeze(-3).to(dtype)
    got = DefaultTransform.to_tensor(q, dtype)
    assert got.shape == (3, 1, 16, 16) and got.dtype == dtype and torch.equal(got, ref)
    assert all(torch.equal(DefaultTransform.to_tensor(q[i], dtype), got[i]) for i in range(3))
    assert got.min() == -1 and abs(float(got.max()) - 1) < 1e-6  # levels 0 and 255 hit
    q16 = (q.astype(np.uint16) * 257)
    ref32 = _scale(torch.from_numpy(q.astype(np.float32)), 255.0).unsqueeze(-3)
    assert torch.allclose(DefaultTransform.to_tensor(q16, torch.float32), ref32, atol=1e-6)
    # rows= converts straight out of a read-only stack (a pack's map), in the order asked
    stack, rows = np.concatenate([q, q[::-1]]), np.array([4, 0, 2, 4])
    stack.setflags(write=False)
    out = torch.full((4, 1, 16, 16), 7, dtype=dtype)
    assert DefaultTransform.to_tensor(stack, dtype, rows=rows, out=out) is out
    assert torch.equal(out, DefaultTransform.to_tensor(stack[rows], dtype))
    assert torch.equal(DefaultTransform.to_tensor(stack, dtype, rows=rows),
                       DefaultTransform.to_tensor(stack[rows], dtype))
    q16s = np.concatenate([q16, q16[::-1]])
    assert torch.equal(DefaultTransform.to_tensor(q16s, torch.float32, rows=rows),
                       DefaultTransform.to_tensor(q16s[rows], torch.float32))
    # a negative row is a padding image, -1 throughout (the study batches' empty slots)
    pads = np.array([-1, 4, -1, 0])
    for src in (stack, q16s):
        got = DefaultTransform.to_tensor(src, dtype if src is stack else torch.float32,
                                         rows=pads, out=torch.full_like(out, 7))
        assert (got[[0, 2]] == -1).all() and torch.equal(got[[1, 3]], DefaultTransform.to_tensor(
            src[[4, 0]], got.dtype))


def _misaligned(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """A contiguous tensor whose data starts one element past a 64-byte boundary."""
    flat = torch.empty(math.prod(shape) + 64, dtype=dtype)
    skip = (-flat.data_ptr() % 64) // flat.element_size() + 1
    return flat[skip:skip + math.prod(shape)].view(shape)


@pytest.mark.parametrize("stream", [False, True], ids=["stores", "non-temporal stores"])
@pytest.mark.parametrize("width", [64, 50], ids=["rows of 32-value steps", "other rows"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_compiled_kernel_gives_the_tables_values(dtype, width, stream, monkeypatch):
    pytest.importorskip("numba")
    from radharmony.imaging import convert
    assert convert.accelerated(dtype)
    rng = np.random.default_rng(7)
    stack = rng.integers(0, 256, (40, 48, width), dtype=np.uint8)
    stack.setflags(write=False)  # as a pack's map
    rows = rng.integers(-4, 40, 33)  # negative: padding images
    assert (rows < 0).any()
    fn, view = convert._kernel(dtype)
    calls = []
    monkeypatch.setitem(jit._loaded, ("convert", str(dtype).removeprefix("torch.")),
                        (lambda *a: calls.append(a[4]) or fn(*a), view))
    monkeypatch.setattr(convert, "MIN_KERNEL_PIXELS", 0)
    monkeypatch.setattr(convert, "STREAM_MIN_BYTES", 0 if stream else 1 << 62)
    threads = torch.get_num_threads()
    try:
        got = {}
        for n in (1, 3):  # split over threads or not
            torch.set_num_threads(n)
            monkeypatch.setattr(convert, "MIN_PIXELS_PER_THREAD", 48 * width)
            odd = _misaligned((33, 1, 48, width), dtype).fill_(7)  # no streaming into it
            got[n] = (DefaultTransform.to_tensor(stack, dtype, rows=rows),
                      DefaultTransform.to_tensor(stack[:7], dtype),
                      DefaultTransform.to_tensor(stack, dtype, rows=rows,
                                                 out=torch.full((33, 1, 48, width), 7,
                                                                dtype=dtype)),
                      DefaultTransform.to_tensor(stack, dtype, rows=rows, out=odd))
    finally:
        torch.set_num_threads(threads)
    assert calls and set(calls) == {stream}
    monkeypatch.setattr(convert, "MIN_KERNEL_PIXELS", 1 << 62)  # the table from here on
    calls.clear()
    table = (DefaultTransform.to_tensor(stack, dtype, rows=rows),
             DefaultTransform.to_tensor(stack[:7], dtype))
    assert not calls
    for n in (1, 3):
        assert torch.equal(got[n][0], table[0]) and torch.equal(got[n][2], table[0])
        assert torch.equal(got[n][3], table[0])
        assert torch.equal(got[n][1], table[1]) and got[n][1].shape == (7, 1, 48, width)
    assert (table[0][rows < 0] == -1).all() and torch.equal(
        table[0][rows >= 0], DefaultTransform.to_tensor(stack[rows[rows >= 0]], dtype))


def test_a_kernel_is_used_only_when_it_gives_every_level_exactly(monkeypatch):
    pytest.importorskip("numba")
    from radharmony.imaging import _jit, convert

    def off_by_one_step(q, rows, out, scale, stream=False):
        for j in range(rows.shape[0]):
            out[j] = np.float32(q[rows[j]][0, 0]) * scale

    monkeypatch.setitem(_jit.KERNELS, "float32", (off_by_one_step, np.float32))
    monkeypatch.setattr(jit, "_loaded", {})
    with pytest.warns(RuntimeWarning, match="differ from the table"):
        assert not convert.accelerated(torch.float32)
    q = np.random.default_rng(8).integers(0, 256, (30, 100, 100), dtype=np.uint8)
    ref = _scale(torch.from_numpy(q.astype(np.float32)), 255.0).unsqueeze(-3)
    assert torch.equal(DefaultTransform.to_tensor(q, torch.float32), ref)  # the table serves
    monkeypatch.setattr(jit, "_loaded", {})
    monkeypatch.setenv("RADHARMONY_JIT", "0")  # switched off: no kernel, no warning
    assert not convert.accelerated(torch.bfloat16)
    monkeypatch.setattr(jit, "_loaded", {})
    monkeypatch.delenv("RADHARMONY_JIT")
    monkeypatch.setitem(__import__("sys").modules, "numba", None)  # not installed
    assert not convert.accelerated(torch.bfloat16)


def test_a_kernel_that_cannot_be_cached_on_disk_is_compiled_in_memory(monkeypatch):
    numba = pytest.importorskip("numba")
    from radharmony.imaging import convert
    njit, asked = numba.njit, []

    def no_disk_cache(*args, cache=False, **kw):  # as in a package folder that is read-only
        asked.append(cache)
        if cache:
            raise RuntimeError("cannot cache function: no locator available")
        return njit(*args, **kw)

    monkeypatch.setattr(numba, "njit", no_disk_cache)
    monkeypatch.setattr(jit, "_loaded", {})
    assert convert.accelerated(torch.float32) and asked[:2] == [True, False]


def _in_forked_child(target, *args, timeout: float):
    """``(what target(*args, queue) put on the queue, the child's exit code)``, run in a child
    forked from this process (as a DataLoader worker started with fork is)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=target, args=(*args, queue), daemon=True)
    child.start()
    try:
        got = queue.get(timeout=timeout)
    finally:
        child.join(5)
        child.kill()
    return got, child.exitcode


def _kernel_in_child(queue):
    from radharmony.imaging import convert
    queue.put(convert.accelerated(torch.float16))  # no float16 kernel: False, without waiting


def test_a_forked_child_is_not_held_up_by_a_kernel_load_in_the_parent(monkeypatch):
    from radharmony.imaging import convert
    monkeypatch.setattr(jit, "_loaded", {})
    with jit._lock:  # a parent thread is loading a kernel when the worker forks
        got, exitcode = _in_forked_child(_kernel_in_child, timeout=30)
    assert got is False and exitcode == 0


def test_flat_image_is_minus_one_and_padding_is_minus_one(tmp_path):
    write_png(tmp_path / "flat.png", np.full((300, 100), 1000, np.uint16))
    q, box = DefaultTransform().encode(tmp_path / "flat.png")
    assert q.dtype == np.uint8 and (q == 0).all()
    write_png(tmp_path / "tall.png", synthetic_cxr(400, 200, rng=np.random.default_rng(2)))
    q, box = DefaultTransform().encode(tmp_path / "tall.png")
    assert box.left > 0 and (q[:, :box.left] == 0).all()
    assert q[:, box.left:box.left + box.new_w].max() == 255


def test_bad_transform_parameters_are_refused():
    from radharmony.errors import RadHarmonyError

    with pytest.raises(RadHarmonyError, match="bits must be 8 or 16"):
        DefaultTransform(bits=12)
    with pytest.raises(RadHarmonyError, match="percentiles are out of order"):
        DefaultTransform(low_percentile=99, high_percentile=1)


def test_jpeg_is_decoded_reduced_in_the_dct_domain(tmp_path):
    img = (synthetic_cxr(1000, 900, rng=np.random.default_rng(3), bits=8))
    path = tmp_path / "x.jpg"
    assert cv2.imwrite(str(path), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
    small, src = read_image(path, min_side=224)
    full, _ = read_image(path)
    assert src == (1000, 900) and full.shape == (1000, 900)
    assert small.shape[0] < 1000 and min(small.shape) >= 224  # reduced, never below target
    box = Letterbox.fit(1000, 900, 224)
    a = area_resize(small, box).astype(float)
    b = area_resize(full, box).astype(float)
    assert np.abs(a - b).mean() < 2.0  # 8-bit levels


# -- JSON ----------------------------------------------------------------------------------------
def test_load_json_reads_bare_nan_and_leaves_strings_alone(tmp_path):
    obj = {"a": float("nan"), "b": [float("nan"), 1.5, float("inf"), -float("inf")],
           "text": "NaN,\n is not a value here: NaN", "n": {"w": float("nan")}}
    for indent in (2, None):
        path = tmp_path / f"{indent}.json"
        path.write_text(json.dumps(obj, indent=indent))
        got = load_json(path)
        assert got["text"] == obj["text"] and got["b"][1] == 1.5
        for v in (got["a"], got["b"][0], got["n"]["w"]):
            assert v is None or math.isnan(v)  # None (fast path) or NaN (stdlib fallback)
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": ')
    with pytest.raises(ValueError):
        load_json(bad)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_load_json_fast_path_rewrites_only_line_ending_nans(tmp_path, newline):
    pytest.importorskip("orjson")
    obj = {"a": float("nan"), "b": [float("nan"), 2], "c": "x NaN", "d": " NaN NaN",
           "e": float("nan")}
    text = json.dumps(obj, indent=2).replace("\n", newline)
    path = tmp_path / "m.json"
    path.write_bytes(text.encode())
    got = load_json(path)
    assert got == {"a": None, "b": [None, 2], "c": "x NaN", "d": " NaN NaN", "e": None}
    compact = tmp_path / "compact.json"  # no line ends: the stdlib parser, NaN as float
    compact.write_text(json.dumps({"a": float("nan"), "t": "NaN"}))
    got = load_json(compact)
    assert math.isnan(got["a"]) and got["t"] == "NaN"


def _tables_both_ways(path, monkeypatch) -> tuple:
    """ReXGradient's table read as records (msgspec) and as dicts (msgspec hidden)."""
    from radharmony.table import read_json

    records = rex.ReXGradientValidHarmonizer(csv_path=path).harmonize()
    with monkeypatch.context() as m:
        m.setattr(read_json, "msgspec", None)
        dicts = rex.ReXGradientValidHarmonizer(csv_path=path).harmonize()
    return records, dicts


@pytest.mark.parametrize("bbox", [None, "label_studio_json"])
def test_records_and_dicts_give_the_same_table(tmp_path, monkeypatch, bbox):
    pytest.importorskip("msgspec")
    from radharmony.table.read_json import is_record

    root = fake_rex.write_rexgradient(tmp_path, studies={"valid": 40}, images=False, bbox=bbox)
    path = root.parent / "download" / "metadata" / "valid_metadata_view_position.json"
    meta = json.loads(path.read_text())
    keys = list(meta)
    del meta[keys[0]]["Findings"], meta[keys[1]]["ImageViewPosition"]  # keys an entry lacks
    meta[keys[2]]["PatientAge"] = float("nan")
    path.write_text(json.dumps(meta, indent=2))  # bare NaN at line ends, as shipped
    raw = load_json(path, counted=("ImagePath",), entry_fields=rex.ENTRY_FIELDS)
    assert all(is_record(e) for e in raw.values()) and raw[keys[0]].Findings is None
    records, dicts = _tables_both_ways(path, monkeypatch)
    pd.testing.assert_frame_equal(records, dicts)
    assert records["report"].iloc[0] is not None and ("boxes" in records) == (bbox is not None)
    meta[keys[3]]["ImagePath"] = None  # a broken entry: the same error either way
    path.write_text(json.dumps(meta, indent=2))
    with pytest.raises(MetadataError, match=f"{keys[3]}.*has no ImagePath list"):
        rex.ReXGradientValidHarmonizer(csv_path=path).harmonize()
    from radharmony.table import read_json
    monkeypatch.setattr(read_json, "msgspec", None)
    with pytest.raises(MetadataError, match=f"{keys[3]}.*has no ImagePath list"):
        rex.ReXGradientValidHarmonizer(csv_path=path).harmonize()


# -- ReXGradient harmonization -------------------------------------------------------------------
def _reference_harmonize(raw: dict) -> pd.DataFrame:
    """The straightforward per-image loop the column-wise harmonize_raw must equal."""
    rows = []
    for e in raw.values():
        views = e.get("ImageViewPosition") or [None] * len(e["ImagePath"])
        for path, view in zip(e["ImagePath"], views):
            date = e.get("StudyDate")
            rows.append({
                "patient_id": e.get("PatientID"), "study_id": e.get("StudyInstanceUid"),
                "image_path": path[len("../deid_png/"):],
                "view_position": view if isinstance(view, str) and view else None,
                "report": rex.format_report(e.get("Indication"), e.get("Comparison"),
                                            e.get("Findings"), e.get("Impression")),
                "accession_number": rex._optional_text(e.get("AccessionNumber")),
                "patient_sex": rex._optional_text(e.get("PatientSex")),
                "patient_age": rex._optional_text(e.get("PatientAge")),
                "study_date": None if date is None or date != date or date == "" else int(date)})
    df = pd.DataFrame(rows)
    df["study_date"] = df["study_date"].astype("Int64")
    return df


def test_columnwise_harmonize_equals_per_image_loop():
    spec = rex.ReXGradientTrainHarmonizer.spec
    raws = [fake_rex.make_metadata(300, seed=4)]
    if (REAL / "rexgradient" / "test_metadata_excerpt.json").is_file():
        raws.append(json.loads((REAL / "rexgradient" / "test_metadata_excerpt.json").read_text()))
    for raw in raws:
        got = validate(rex.ReXGradientTrainHarmonizer.harmonize_raw(raw), spec)
        ref = validate(_reference_harmonize(raw), spec)
        pd.testing.assert_frame_equal(got, ref)


@pytest.mark.parametrize("value, expected", [
    (None, None), (float("nan"), None), ("", None), ("  None. ", None), ("None", None),
    ("Comparison: None.", None), ("N/A", None), ("null", None), ("Comparison:   none..", None),
    ("Comparison: 1/15/1999", "Comparison: 1/15/1999"), ("Cough", "Cough"),
    ("Nonexistent", "Nonexistent"), ("  Fever.  ", "Fever."), (7, "7"),
    ("A long findings text: None of the above is acute.",
     "A long findings text: None of the above is acute.")])
def test_section_text_pins_none_like_rules(value, expected):
    assert section_text(value) == expected


def test_fast_fake_picks_keep_the_seeded_stream():
    values = ["a", "b", "c", "d"]
    p = [0.1, 0.2, 0.3, 0.4]
    fast, slow = np.random.default_rng(9), np.random.default_rng(9)
    for i in range(500):
        pp = p if i % 2 else None
        assert fake_rex._pick(fast, values, pp) == values[slow.choice(len(values), p=pp)]
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert fake_rex._gid(a) == "GRDN" + "".join(b.choice(fake_rex._ALNUM, 12))


def _convert_in_child(stack, rows, queue):
    queue.put(DefaultTransform.to_tensor(stack, torch.float32, rows=rows,
                                         out=torch.empty(len(rows), 1, 16, 16)).numpy())


def test_rows_conversion_in_threads_equals_one_thread_and_survives_fork(monkeypatch):
    # a batch from a pack is split over torch.get_num_threads() threads; the result must not
    # depend on that, every row lands where asked, and a forked child (a DataLoader worker
    # started with fork, whose parent's helper threads are gone) must not wait on them
    from radharmony.imaging import convert
    stack = np.random.default_rng(5).integers(0, 256, (40, 16, 16), dtype=np.uint8)
    rows = np.random.default_rng(6).integers(0, 40, 37)
    ref = DefaultTransform.to_tensor(stack[rows], torch.float32)
    monkeypatch.setattr(convert, "MIN_PIXELS_PER_THREAD", 16 * 16)
    from radharmony import threads as rh_threads
    monkeypatch.setattr(rh_threads, "_pool", None)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        for _ in range(3):  # the parent's helper thread is up and idle when the child forks
            assert torch.equal(DefaultTransform.to_tensor(stack, torch.float32, rows=rows,
                                                          out=torch.empty(37, 1, 16, 16)), ref)
        got, exitcode = _in_forked_child(_convert_in_child, stack, rows, timeout=60)
        assert exitcode == 0 and np.array_equal(got, ref.numpy())
        for n in (1, 2, 3, 5):
            torch.set_num_threads(n)
            got = DefaultTransform.to_tensor(stack, torch.float32, rows=rows,
                                             out=torch.full((37, 1, 16, 16), 7.0))
            assert torch.equal(got, ref), n
        assert rh_threads._pool[1]._max_workers >= 4  # 5 threads asked: 4 helpers
    finally:
        torch.set_num_threads(threads)


def test_helper_threads_run_nested_work_inline_and_hand_back_errors():
    # work handed to the helper threads that hands out work again runs it in place (waiting
    # on the same threads could deadlock); each item's exception comes back, in order
    import threading

    from radharmony import threads

    def inner(k):
        if k == 2:
            raise ValueError("two")
        return threads.each(lambda x: (x * k, threading.current_thread().name), [1, 2, 3])

    box = {}
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        worker = threading.Thread(target=lambda: box.update(out=threads.each(inner, [1, 2, 3])),
                                  daemon=True)
        worker.start()
        worker.join(60)
    finally:
        torch.set_num_threads(n)
    assert not worker.is_alive(), "nested helper work deadlocked"
    first, second, third = box["out"]
    assert [v for v, _ in first] == [1, 2, 3] and [v for v, _ in third] == [3, 6, 9]
    assert all(name.startswith("radharmony-helper") for _, name in first + third)
    assert isinstance(threads.raised(second), ValueError) and threads.raised(first) is None
