"""Faults and hostile input: stale entries, damaged packs, shared images, hangs, raw exceptions,
memory bounds. Each test pins what happens now; every one of them failed before its guard."""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import radharmony.imaging.read as read_mod
from radharmony import version
from radharmony.data.loader import CachedLoader
from radharmony.datasets.rexgradient import ReXGradientValidDataset, ReXGradientValidHarmonizer
from radharmony.errors import (ImageReadError, MetadataError, PathSafetyError, RadHarmonyError,
                               SavedFileError, SharedImageWarning)
from radharmony.fake import synthetic_cxr, write_png
from radharmony.fake.rexgradient import write_rexgradient
from radharmony.files import TMP_PREFIX
from radharmony.imaging import packs as packs_mod
from radharmony.imaging.cache import ImageCache
from radharmony.table.read_csv import read_csv_table
from radharmony.table.read_json import load_json, read_jsonl
from radharmony.table.schema import sample_ids
from radharmony.table.store import TableCache, load_table, save_table

PARAMS = {"name": "t", "size": 16}


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    return write_rexgradient(tmp_path_factory.mktemp("rex"), studies={"valid": 4},
                             image_size=(96, 80))


def _ds(root, cache, **kw):
    return ReXGradientValidDataset(root, cache_dir=cache, dtype=torch.float32, **kw)


def _stored_png(path: Path, seed: int) -> None:
    """A PNG without compression: its byte size depends only on its dimensions."""
    import cv2

    img = synthetic_cxr(96, 80, rng=np.random.default_rng(seed), bits=16)
    ok, buf = cv2.imencode(".png", img, [cv2.IMWRITE_PNG_COMPRESSION, 0])
    path.write_bytes(buf.tobytes())


def _other_image(path: Path, seed: int) -> Path:
    """A new file beside ``path`` of exactly its byte size, holding another image."""
    other = path.with_name("other.png")
    _stored_png(other, seed)
    assert other.stat().st_size == path.stat().st_size
    return other


def _copy_tree(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src.parent, dst)
    return dst / src.name


# -- stale: same size, mtime restored ---------------------------------------------------------------
@pytest.mark.parametrize("how", ["in_place", "rename"])
@pytest.mark.parametrize("key", ["identity", "content"])
def test_rewrite_with_same_size_and_mtime_is_not_served_stale(replica, tmp_path, how, key):
    root = _copy_tree(replica, tmp_path / "r")
    ds = _ds(root, tmp_path / "c", cache_key=key)
    target = ds.image_file(0)
    _stored_png(target, 0)
    before = ds[0]["img"].clone()
    st = target.stat()
    other = _other_image(target, 1)
    if how == "in_place":
        with open(target, "r+b") as fh:  # same inode, like an editor saving in place
            fh.write(other.read_bytes())
        other.unlink()
    else:  # rsync -a / tar -x: a new file renamed over the old one
        os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(other, target)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_size == st.st_size and target.stat().st_mtime_ns == st.st_mtime_ns
    fresh = _ds(root, None)[0]["img"]
    after = _ds(root, tmp_path / "c", cache_key=key)[0]["img"]
    assert not torch.equal(before, fresh)
    assert torch.equal(after, fresh)


def test_content_keys_are_shared_by_copies_and_checked(replica, tmp_path):
    a = _copy_tree(replica, tmp_path / "a")
    b = _copy_tree(replica, tmp_path / "b")
    ka = _ds(a, tmp_path / "c", cache_key="content").cache_keys()
    kb = _ds(b, tmp_path / "c", cache_key="content").cache_keys()
    assert ka == kb  # same bytes at another path: same entries
    assert _ds(a, tmp_path / "c").cache_keys() != _ds(b, tmp_path / "c").cache_keys()
    with pytest.raises(RadHarmonyError, match="cache_key"):
        _ds(a, tmp_path / "c", cache_key="mtime")


# -- pipeline version ------------------------------------------------------------------------------
#: the recorded (version, digest) pairs: append when the pipeline changes, never edit
RECORDED = {1: "4caa047c0d40", 2: "41fceb83c364", 3: "9ecca9d70495", 4: "9de521d37769",
            5: "0bc3a1a05772",
            6: "4bdb6706806f"}


def test_pipeline_change_requires_a_version_bump():
    assert {v: version.PIPELINE_HISTORY[v] for v in RECORDED} == RECORDED, \
        "a recorded pipeline version was edited: add a new version instead"
    assert version.PIPELINE_VERSION == max(version.PIPELINE_HISTORY)
    assert version.pipeline_source_digest() == version.PIPELINE_HISTORY[version.PIPELINE_VERSION], (
        "the image pipeline's code changed: add PIPELINE_HISTORY[%d] = %r in "
        "radharmony/version.py (and to RECORDED here)"
        % (version.PIPELINE_VERSION + 1, version.pipeline_source_digest()))
    assert len(set(version.PIPELINE_HISTORY.values())) == len(version.PIPELINE_HISTORY)


def test_pipeline_digest_ignores_docstrings_but_not_code(tmp_path, monkeypatch):
    src = (Path(version.__file__).parent / "imaging" / "pipeline.py").read_text()
    (tmp_path / "imaging").mkdir()
    monkeypatch.setattr(version, "_PACKAGE", tmp_path)
    files = ("imaging/pipeline.py",)
    (tmp_path / "imaging" / "pipeline.py").write_text(src)
    base = version.pipeline_source_digest(files)
    (tmp_path / "imaging" / "pipeline.py").write_text(src.replace('"""The default', '"""A', 1)
                                                     + "\n# a comment\n")
    assert version.pipeline_source_digest(files) == base
    (tmp_path / "imaging" / "pipeline.py").write_text(src.replace("size: int = 224",
                                                                  "size: int = 225"))
    assert version.pipeline_source_digest(files) != base


def test_pipeline_version_is_in_the_image_key(tmp_path, monkeypatch):
    import radharmony.imaging.cache as cache_mod

    a = ImageCache(tmp_path, PARAMS)
    monkeypatch.setattr(cache_mod, "PIPELINE_VERSION", version.PIPELINE_VERSION + 1)
    b = ImageCache(tmp_path, PARAMS)
    assert a.salt != b.salt and a.prefix != b.prefix


def test_edited_pipeline_source_misses_the_image_cache(replica, tmp_path, monkeypatch):
    """An editable install whose pipeline was edited (the version constant left alone): the
    digest of the installed code keys the cache, so the old arrays are not served."""
    import shutil

    from radharmony.imaging.pipeline import DefaultTransform

    ds = _ds(replica, tmp_path / "c")
    ds[0]
    fork = tmp_path / "fork"
    for rel in version.PIPELINE_SOURCES:
        (fork / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(version.__file__).parent / rel, fork / rel)
    src = (fork / "imaging" / "pipeline.py").read_text()
    (fork / "imaging" / "pipeline.py").write_text(src + "\nEDITED = True\n")
    decoded = []
    real = DefaultTransform.encode
    monkeypatch.setattr(DefaultTransform, "encode",
                        lambda self, path: decoded.append(path) or real(self, path))
    _ds(replica, tmp_path / "c")[0]
    assert decoded == []  # same code: a hit
    monkeypatch.setattr(version, "_PACKAGE", fork)
    version.pipeline_digest.cache_clear()
    try:
        edited = _ds(replica, tmp_path / "c")
        assert edited.image_cache.salt != ds.image_cache.salt
        edited[0]
        assert len(decoded) == 1  # a miss: decoded by the edited code
    finally:
        version.pipeline_digest.cache_clear()


def test_table_code_is_in_the_table_key(tmp_path, monkeypatch):
    import radharmony.table.store as store

    c = TableCache(tmp_path)
    owner = {"class": "x", "module_file": None}
    before = c.path(owner, [])
    store._code_digest.cache_clear()
    monkeypatch.setattr(store, "TABLE_SOURCES", store.TABLE_SOURCES[:-1])
    assert c.path(owner, []) != before
    store._code_digest.cache_clear()


# -- CachedLoader: a file changed while it runs ------------------------------------------------------
def test_cached_loader_serves_the_changed_file(replica, tmp_path):
    root = _copy_tree(replica, tmp_path / "r")
    ds = _ds(root, tmp_path / "c")
    target = ds.image_file(1)
    _stored_png(target, 0)
    loader = CachedLoader(ds, batch_size=len(ds), progress=False)
    first = next(iter(loader))["img"]
    other = _other_image(target, 7)
    os.replace(other, target)
    batch = next(iter(loader))["img"]
    fresh = torch.stack([_ds(root, None)[i]["img"] for i in range(len(ds))])
    assert not torch.equal(first[1], fresh[1])
    assert torch.equal(batch, fresh)


# -- packs: checksums over key, info and pixels; strict headers --------------------------------------
def _packed(replica, tmp_path):
    root = _copy_tree(replica, tmp_path / "r")
    ds = _ds(root, tmp_path / "c", output_bbox=False)
    ds.pre_cache(progress=False)
    (pack_file,) = (tmp_path / "c" / "images" / "packs").glob("*.rhp")
    return ds, pack_file, packs_mod.Pack(pack_file)


def test_pack_checksum_covers_info_fields_and_order(replica, tmp_path):
    ds, f, pack = _packed(replica, tmp_path)
    rows = np.arange(pack.count)
    assert pack.read(rows)[1].all()
    blob = bytearray(f.read_bytes())
    off = pack.data_offset - 1  # info lies before the data: flip a bit in the last info field
    info_off = json.loads(bytes(blob[12:12 + int.from_bytes(blob[8:12], "little")]))["offsets"]["info"]
    blob[info_off] ^= 0x04
    f.write_bytes(blob)
    assert not packs_mod.Pack(f).read(rows)[1][0]
    blob[info_off] ^= 0x04  # restore, then swap two records
    rec = pack.data[0].nbytes
    d = pack.data_offset
    blob[d:d + rec], blob[d + rec:d + 2 * rec] = blob[d + rec:d + 2 * rec], blob[d:d + rec]
    f.write_bytes(blob)
    ok = packs_mod.Pack(f).read(rows)[1]
    assert not ok[0] and not ok[1] and ok[2:].all()
    del off


@pytest.mark.parametrize("damage", ["bad_json", "count_str", "offset_out", "dtype_object",
                                    "shape_neg", "header_len"])
def test_damaged_pack_header_is_dropped_and_rebuilt(replica, tmp_path, damage):
    ds, f, pack = _packed(replica, tmp_path)
    want = [ds[i]["img"] for i in range(len(ds))]
    blob = bytearray(f.read_bytes())
    n = int.from_bytes(blob[8:12], "little")
    head = json.loads(bytes(blob[12:12 + n]))
    if damage == "bad_json":
        blob[12] = ord("]")
    elif damage == "header_len":
        blob[8:12] = (10 ** 6).to_bytes(4, "little")
    else:
        if damage == "count_str":
            head["count"] = str(head["count"])
        elif damage == "offset_out":
            head["offsets"]["keys"] = 10 ** 9
        elif damage == "dtype_object":
            head["dtype"] = "|O"
        elif damage == "shape_neg":
            head["shape"] = [-1, 224]
        meta = json.dumps(head).encode()
        blob[8:12] = len(meta).to_bytes(4, "little")
        blob[12:12 + 1024] = meta.ljust(1024, b" ")
    f.write_bytes(blob)
    ds2 = _ds(ds.image_root(0).parent / ds.image_root(0).name, tmp_path / "c")
    with pytest.warns(RuntimeWarning, match="failed its check"):
        got = [ds2[i]["img"] for i in range(len(ds2))]
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert not f.exists()
    ds2.pre_cache(progress=False)  # rebuilt
    assert list((tmp_path / "c" / "images" / "packs").glob("*.rhp"))


# -- the same image under two patients; sample_id collisions -------------------------------------------
def test_image_linked_under_two_patients_warns_naming_both(replica, tmp_path):
    root = _copy_tree(replica, tmp_path / "r")
    ds = _ds(root, tmp_path / "c")
    df = ds.harmonized_df
    a, b = 0, int(np.flatnonzero(df["patient_id"] != df["patient_id"].iat[0])[0])
    fb = ds.image_file(b)
    fb.unlink()
    os.link(ds.image_file(a), fb)  # a hard link: another path, the same file
    with pytest.warns(SharedImageWarning) as rec:
        ds.cache_keys()
    msg = str(rec[0].message)
    assert df["patient_id"].iat[a] in msg and df["patient_id"].iat[b] in msg


def test_sample_ids_unique_across_extensions_and_case():
    from radharmony.spec import DatasetSpec

    spec = DatasetSpec(key="k", title="t", id_col="image_path")
    df = pd.DataFrame({"image_path": ["d/I.png", "d/I.PNG", "d/I.jpg", "d/J.png", "d/I.png.png"]})
    ids = sample_ids(df, spec)
    assert len(set(ids)) == 5
    assert ids[3] == "k:d/J"  # no collision: extension stripped as before
    rev = sample_ids(df.iloc[::-1].reset_index(drop=True), spec)[::-1]
    assert list(ids) == list(rev)  # independent of row order


@pytest.mark.parametrize("paths, want", [
    # one extension throughout (the fast path): stripped, unless two ids would then be equal
    (["d/a.png", "d/b.tar.png", ".png", "e/.png"], ["d/a", "d/b.tar", "", "e/"]),
    (["d/a.png", "d/a.png.png"], ["d/a", "d/a.png"]),
    (["d/a.png", "d/a.png.png", "d/a.png.png.png"], ["d/a", "d/a.png", "d/a.png.png"]),
    (["x.dcm", "y.dcm"], ["x", "y"]),
    # mixed: each path on its own
    (["d/a.png", "d/b", "d/c.j", "d/e.jpeg"], ["d/a", "d/b", "d/c.j", "d/e"]),
    (["a.png", "a.jpg", "b.png"], ["a.png", "a.jpg", "b"]),
])
def test_sample_ids_strip_one_extension(paths, want):
    from radharmony.spec import DatasetSpec

    spec = DatasetSpec(key="k", title="t", id_col="image_path")
    assert list(sample_ids(pd.DataFrame({"image_path": paths}), spec)) == ["k:" + w for w in want]


# -- stale temporary files --------------------------------------------------------------------------
def test_stale_tmp_files_are_swept_when_a_cache_opens(tmp_path):
    (tmp_path / "images" / "ab").mkdir(parents=True)
    (tmp_path / "tables").mkdir()
    old = [tmp_path / "images" / "ab" / f"{TMP_PREFIX}x.rhc", tmp_path / "tables" /
           f"{TMP_PREFIX}y.arrow", tmp_path / "images" / f"{TMP_PREFIX}z.rhp"]
    young = tmp_path / "images" / "ab" / f"{TMP_PREFIX}w.rhc"
    for f in old + [young]:
        f.write_bytes(b"x" * 100)
    for f in old:
        os.utime(f, (time.time() - 7200, time.time() - 7200))
    ImageCache(tmp_path, PARAMS)
    TableCache(tmp_path)
    assert not any(f.exists() for f in old) and young.exists()


# -- hangs: FIFOs and other non-regular files ------------------------------------------------------------
def _with_fifo(replica, tmp_path):
    root = _copy_tree(replica, tmp_path / "r")
    ds = _ds(root, tmp_path / "c")
    f = ds.image_file(0)
    f.unlink()
    os.mkfifo(f)
    return root, ds


def _within(seconds, fn):
    out = {}

    def run():
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001
            out["exc"] = exc
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        with open(out.get("fifo", "/dev/null"), "wb"):
            pass
        pytest.fail("blocked on a FIFO")
    return out.get("exc")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_fifo_is_refused_not_opened(replica, tmp_path):
    root, ds = _with_fifo(replica, tmp_path)
    fifo = str(ds.image_file(0))

    def unblock():  # if anything opens the FIFO for reading, a writer releases it
        time.sleep(8)
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
    threading.Thread(target=unblock, daemon=True).start()
    for fn in (lambda: ds[0], lambda: _ds(root, None)[0],
               lambda: read_mod.read_image(ds.image_file(0))):
        t0 = time.perf_counter()
        with pytest.raises(ImageReadError, match="FIFO"):
            fn()
        assert time.perf_counter() - t0 < 5
    from radharmony.data.precache import pre_cache

    rep = pre_cache(ds, progress=False, keep_going=True)
    assert rep.failed == 1 and "FIFO" in rep.first_failures[0]["detail"]


# -- raw exceptions ---------------------------------------------------------------------------------------
def test_unwritable_cache_degrades_to_uncached_with_one_warning(replica, tmp_path, monkeypatch):
    import radharmony.files as files

    ds_ref = _ds(replica, None)
    want = [ds_ref[i]["img"] for i in range(len(ds_ref))]

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(files.tempfile, "mkstemp", full)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        ds = _ds(replica, tmp_path / "c")
        got = [ds[i]["img"] for i in range(len(ds))]
        loader_batch = next(iter(CachedLoader(ds, batch_size=len(ds), progress=False)))["img"]
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert torch.equal(loader_batch, torch.stack(want))
    texts = [str(w.message) for w in rec if issubclass(w.category, RuntimeWarning)]
    assert sum("Image cache" in t and "cannot be written" in t for t in texts) == 1
    assert sum("Table cache" in t and "cannot be written" in t for t in texts) == 1
    assert not list((tmp_path / "c").rglob("*.rhc"))


def test_read_only_cache_dir_with_a_damaged_entry(replica, tmp_path, monkeypatch):
    """EROFS everywhere under the cache (simulated: the suite may run as root)."""
    import radharmony.files as files

    ds = _ds(replica, tmp_path / "c")
    want = ds[0]["img"]
    (entry,) = [p for p in (tmp_path / "c" / "images").rglob("*.rhc")]
    entry.write_bytes(entry.read_bytes()[:-3] + b"xyz")
    cache_root = str(tmp_path / "c")

    def erofs(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")
    real_unlink = Path.unlink

    def unlink(self, *a, **k):
        if str(self).startswith(cache_root):
            erofs()
        return real_unlink(self, *a, **k)
    monkeypatch.setattr(files.tempfile, "mkstemp", erofs)
    monkeypatch.setattr(Path, "unlink", unlink)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        ds2 = _ds(replica, tmp_path / "c")
        got = [ds2[0]["img"], ds2[0]["img"]]
    assert all(torch.equal(g, want) for g in got)
    texts = [str(w.message) for w in rec]
    assert any("failed its check" in t for t in texts)
    assert sum("Image cache" in t and "cannot be written" in t for t in texts) == 1


def test_symlink_loop_and_long_path_raise_named_errors(replica, tmp_path):
    root = _copy_tree(replica, tmp_path / "r")
    ds = _ds(root, tmp_path / "c")
    f = ds.image_file(0)
    f.unlink()
    os.symlink(f.name, f)  # points at itself
    with pytest.raises((PathSafetyError, ImageReadError), match=ds.sample_ids[0]):
        ds[0]
    df = ds.harmonized_df.drop(columns=["sample_id", "view"]).copy()
    df.loc[1, "image_path"] = "a/" * 2100 + "x.png"
    ds2 = ReXGradientValidDataset(root, harmonized_df=df, cache_dir=tmp_path / "c")
    with pytest.raises((PathSafetyError, ImageReadError)):
        ds2[1]


def test_cli_cache_json_prints_json_for_a_loop(replica, tmp_path, capsys):
    from radharmony.cli import main

    root = _copy_tree(replica, tmp_path / "r")
    f = _ds(root, None).image_file(0)
    f.unlink()
    os.symlink(f.name, f)
    code = main(["cache", "rexgradient_valid", "--root", str(root), "--cache-dir",
                 str(tmp_path / "c"), "--json", "-q"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out[0]["failed"] == 1


def test_lone_surrogates_in_metadata(tmp_path):
    root = write_rexgradient(tmp_path, studies={"valid": 3}, images=False)
    path = root.parent / "download" / "metadata" / "valid_metadata_view_position.json"
    meta = json.loads(path.read_text())
    k = next(iter(meta))
    meta[k]["Findings"] = "x \ud800 y"
    meta[k]["PatientID"] = "P\udfff"
    path.write_text(json.dumps(meta))  # ASCII JSON with \\ud800 escapes: valid JSON
    try:
        df = ReXGradientValidHarmonizer(csv_path=path).harmonize(cache_dir=tmp_path / "c")
    except RadHarmonyError as exc:
        assert "surrogate" in str(exc) or "UTF-8" in str(exc)
    else:
        assert len(df) > 0


def test_latin1_csv_names_the_line(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes(b"a,b\n1,2\n3,caf\xe9\n")
    with pytest.raises(MetadataError, match="line 3"):
        read_csv_table(p, ["a", "b"], description="a table")


def test_deeply_nested_jsonl_line_names_the_line(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"a": 1}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(MetadataError, match="line 2"):
        read_jsonl(p)


def test_saved_file_with_unknown_format_version_is_refused(tmp_path):
    df = pd.DataFrame({"a": [1, 2]})
    p = save_table(tmp_path / "t.parquet", df, {"class": "x"})
    assert load_table(p)[1].shape == (2, 1)
    import radharmony.table.store as store

    old = store.SAVED_FORMAT_VERSION
    store.SAVED_FORMAT_VERSION = 99
    try:
        save_table(tmp_path / "u.parquet", df, {"class": "x"})
    finally:
        store.SAVED_FORMAT_VERSION = old
    with pytest.raises(SavedFileError, match="format version 99"):
        load_table(tmp_path / "u.parquet")


# -- data loss: repeated JSON keys -------------------------------------------------------------------------
def test_repeated_study_key_and_image_path_key_are_detected(tmp_path):
    root = write_rexgradient(tmp_path, studies={"valid": 3}, images=False)
    path = root.parent / "download" / "metadata" / "valid_metadata_view_position.json"
    text = path.read_text()
    meta = json.loads(text)
    k = next(iter(meta))
    entry = json.dumps(meta[k])
    dup = text.rstrip().rstrip("}") + f', "{k}": {entry}' + "}"
    path.write_text(dup)
    with pytest.raises(MetadataError, match=k):
        ReXGradientValidHarmonizer(csv_path=path).harmonize()
    path.write_text(text.replace('"ImagePath":', '"ImagePath": ["x/y.png"], "ImagePath":', 1))
    with pytest.raises(MetadataError, match="ImagePath"):
        ReXGradientValidHarmonizer(csv_path=path).harmonize()
    path.write_text(text)
    assert len(ReXGradientValidHarmonizer(csv_path=path).harmonize()) > 0


def test_image_path_text_inside_a_value_is_not_a_false_alarm(tmp_path):
    p = tmp_path / "a.json"
    p.write_text(json.dumps({"s": {"ImagePath": ["a.png"], "Findings": 'said "ImagePath"'}}))
    assert load_json(p, counted=("ImagePath",))["s"]["ImagePath"] == ["a.png"]


# -- memory --------------------------------------------------------------------------------------------
def test_dicom_decoded_size_is_bounded_from_the_header(tmp_path, monkeypatch):
    from radharmony.fake.dicom import write_dicom

    p = tmp_path / "a.dcm"
    write_dicom(p, np.zeros((64, 64), np.uint16))
    read_mod.read_image(p)
    monkeypatch.setattr(read_mod, "MAX_BYTES", 64 * 64 * 2 - 1)
    with pytest.raises(ImageReadError, match="MAX_BYTES"):
        read_mod.read_image(p)


def test_png_decoded_size_counts_channels_and_depth(tmp_path, monkeypatch):
    p = tmp_path / "a.png"
    write_png(p, np.zeros((40, 30, 4), np.uint16))
    monkeypatch.setattr(read_mod, "MAX_BYTES", 40 * 30 * 8 - 1)
    with pytest.raises(ImageReadError, match="bytes"):
        read_mod.read_image(p)


def test_saved_parquet_decoded_size_is_bounded(tmp_path, monkeypatch):
    import radharmony.table.store as store

    df = pd.DataFrame({"a": np.zeros(50_000, np.int64)})
    p = save_table(tmp_path / "t.parquet", df, {"class": "x"})
    monkeypatch.setattr(store, "MAX_TABLE_BYTES", 100_000)
    with pytest.raises(SavedFileError, match="MAX_TABLE_BYTES"):
        load_table(p)
