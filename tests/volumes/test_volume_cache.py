"""The volume cache: exact round trips, keys that never serve a stale volume, damaged entries
rebuilt, patch reads, and the in-memory tier's byte budget."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.volumes import Volume, VolumeSource
from radharmony.volumes import cache as cache_mod
from radharmony.volumes.cache import VolumeCache, VolumeCacheError

pytest.importorskip("blosc2")

AFFINE = np.array([[0, 0, 0.7, -120.0], [0, 0.7, 0, -90.5], [2.5, 0, 0, 14.0], [0, 0, 0, 1]])


def _volume(seed=0, shape=(20, 70, 90)) -> Volume:
    rng = np.random.default_rng(seed)
    array = np.full(shape, -1024, np.int16)
    array[:, 5:-5, 5:-5] = rng.normal(40, 15, (shape[0], shape[1] - 10, shape[2] - 10))
    return Volume.from_array(array, AFFINE, source=VolumeSource(
        files=("a.nii.gz",), reader="nifti", rescale=(1.0, -1024.0), notes=("sform used",)))


class Loader:
    """A loader that counts its calls."""

    def __init__(self, volume):
        self.volume, self.calls = volume, 0

    def __call__(self):
        self.calls += 1
        return self.volume


@pytest.fixture
def source(tmp_path):
    f = tmp_path / "ct.nii.gz"
    f.write_bytes(b"stands for a NIfTI file")
    return f


def test_round_trip_is_exact_and_loads_once(tmp_path, source):
    vol, load = _volume(), Loader(_volume())
    cache = VolumeCache(tmp_path / "cache")
    first = cache.get([source], {"reader": "nifti"}, load)
    again = VolumeCache(tmp_path / "cache").get([source], {"reader": "nifti"}, load)
    assert load.calls == 1
    for got in (first, again):
        assert got.array.dtype == np.int16 and np.array_equal(got.array, vol.array)
        assert np.array_equal(got.affine, AFFINE) and got.space == "LPS"
        assert got.source == vol.source  # files, reader, rescale, notes: tuples again
    files = list((tmp_path / "cache" / "volumes").rglob("*"))
    entry = [f for f in files if f.suffix == ".b2nd"]
    assert len(entry) == 1 and not [f for f in files if f.name.startswith(".tmp-")]
    assert entry[0].stat().st_size < vol.array.nbytes / 2  # compressed


def test_compact_stores_bit_shuffled_smaller_entries(tmp_path, source):
    import blosc2

    vol = _volume()
    sizes = {}
    for compact in (True, False):
        cache = VolumeCache(tmp_path / str(compact), compact=compact)
        assert np.array_equal(cache.get([source], {}, Loader(vol)).array, vol.array)
        entry = next((tmp_path / str(compact)).rglob("*.b2nd"))
        filters = blosc2.open(str(entry)).schunk.cparams.filters
        assert (blosc2.Filter.BITSHUFFLE in filters) is compact
        sizes[compact] = entry.stat().st_size
    assert sizes[True] < sizes[False]  # byte-shuffled by default: faster patch reads


@pytest.mark.parametrize("change", ["touch", "rewrite", "params", "code", "release"])
def test_nothing_stale_is_served(tmp_path, source, change, monkeypatch):
    load = Loader(_volume())
    cache = VolumeCache(tmp_path / "cache")
    params = {"reader": "nifti", "series_uid": None}
    cache.get([source], params, load)
    if change == "touch":
        st = source.stat()
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    elif change == "rewrite":  # same size, mtime restored: the change time and inode differ
        st = source.stat()
        tmp = source.with_suffix(".new")
        tmp.write_bytes(b"stands for a NIfTI fil3")
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, source)
    elif change == "params":
        params = {**params, "series_uid": "1.2.3"}
    elif change == "code":
        monkeypatch.setattr(cache_mod, "_code_digest", lambda files: "edited-reader")
    else:
        monkeypatch.setattr(cache_mod, "__version__", "9.9.9")
    cache.get([source], params, load)
    assert load.calls == 2


def test_a_folder_input_counts_every_file_below_it(tmp_path):
    series = tmp_path / "series"
    (series / "sub").mkdir(parents=True)
    (series / "1.dcm").write_bytes(b"a")
    load = Loader(_volume())
    cache = VolumeCache(tmp_path / "cache")
    cache.get([series], {}, load)
    cache.get([series], {}, load)
    (series / "sub" / "2.dcm").write_bytes(b"b")  # a slice dropped in later
    cache.get([series], {}, load)
    assert load.calls == 2


def test_a_file_changed_while_read_is_served_but_not_stored(tmp_path, source):
    vol = _volume()

    def load():
        source.write_bytes(b"rewritten meanwhile, longer")
        return vol

    cache = VolumeCache(tmp_path / "cache")
    assert np.array_equal(cache.get([source], {}, load).array, vol.array)
    assert not list((tmp_path / "cache").rglob("*.b2nd"))


def test_a_failing_loader_stores_nothing(tmp_path, source):
    def load():
        raise RadHarmonyError("truncated file", fix="download it again")

    cache = VolumeCache(tmp_path / "cache")
    with pytest.raises(RadHarmonyError, match="truncated"):
        cache.get([source], {}, load)
    assert not [f for f in (tmp_path / "cache").rglob("*") if f.is_file()]


def test_a_damaged_entry_is_rebuilt(tmp_path, source):
    load = Loader(_volume())
    cache = VolumeCache(tmp_path / "cache")
    cache.get([source], {}, load)
    entry = next((tmp_path / "cache").rglob("*.b2nd"))
    entry.write_bytes(entry.read_bytes()[:len(entry.read_bytes()) // 2])
    with pytest.warns(RuntimeWarning, match="failed its check"):
        got = cache.get([source], {}, load)
    assert load.calls == 2 and np.array_equal(got.array, _volume().array)
    assert np.array_equal(cache.get([source], {}, load).array, _volume().array)
    assert load.calls == 2


def test_patch_reads_equal_the_array(tmp_path, source):
    vol, load = _volume(shape=(40, 150, 140)), None
    load = Loader(vol)
    cache = VolumeCache(tmp_path / "cache")
    got = cache.patch([source], {}, load, (3, 17, 9), (30, 128, 128))
    assert got.shape == (30, 128, 128)
    assert np.array_equal(got, vol.array[3:33, 17:145, 9:137])
    assert np.array_equal(cache.patch([source], {}, load, (0, 0, 0), (5, 6, 7)),
                          vol.array[:5, :6, :7])
    assert load.calls == 1


def test_stored_is_the_entry_read_by_index_or_the_volume_when_nothing_is_stored(tmp_path,
                                                                                source):
    vol, load = _volume(), Loader(_volume())
    cache = VolumeCache(tmp_path / "cache")
    array, meta = cache.stored([source], {}, load)
    assert type(array).__module__.startswith("blosc2") and array.shape == (20, 70, 90)
    assert np.array_equal(array[:, 33, :], vol.array[:, 33, :])  # a coronal plane, read alone
    assert meta["affine"] == vol.affine.tolist() and meta["space"] == vol.space
    assert cache.stored([source], {}, load)[1] == meta and load.calls == 1
    folder = tmp_path / "unwritable"
    folder.mkdir()
    (folder / "volumes").write_bytes(b"")
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        array, meta = VolumeCache(folder).stored([source], {}, Loader(_volume()))
    assert isinstance(array, np.ndarray) and np.array_equal(array, vol.array)
    assert meta["affine"] == vol.affine.tolist()


def test_memory_tier_honours_its_byte_budget(tmp_path):
    files = []
    for i in range(4):
        files.append(tmp_path / f"{i}.nii.gz")
        files[-1].write_bytes(bytes([i]))
    loads = [Loader(_volume(seed=i)) for i in range(4)]
    probe = VolumeCache(None, memory_bytes=1 << 30)
    probe.get([files[0]], {}, Loader(_volume(seed=0)))
    one = probe.memory_used
    cache = VolumeCache(None, memory_bytes=int(2.5 * one))  # room for two entries
    for f, load in zip(files, loads):
        cache.get([f], {}, load)
        assert cache.memory_used <= int(2.5 * one)
    assert len(cache._memory) == 2
    cache.get([files[3]], {}, loads[3])  # most recent: held
    cache.get([files[0]], {}, loads[0])  # dropped first: loaded again
    assert [load.calls for load in loads] == [2, 1, 1, 1]
    tiny = VolumeCache(None, memory_bytes=one // 2)  # an entry over the budget is never held
    tiny.get([files[1]], {}, loads[1])
    assert tiny.memory_used == 0


def test_memory_tier_in_front_of_disk(tmp_path, source):
    load = Loader(_volume())
    VolumeCache(tmp_path / "cache").get([source], {}, load)
    cache = VolumeCache(tmp_path / "cache", memory_bytes=1 << 30)
    cache.get([source], {}, load)
    assert cache.memory_used > 0
    next((tmp_path / "cache").rglob("*.b2nd")).unlink()
    assert np.array_equal(cache.get([source], {}, load).array, _volume().array)
    assert load.calls == 1
    clone = pickle.loads(pickle.dumps(cache))  # a DataLoader worker: its own, empty tier
    assert clone.memory_used == 0 and clone.root == cache.root


def test_an_unwritable_cache_warns_once_and_serves(tmp_path, source):
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "volumes").write_bytes(b"")  # a file where the entries' folder should be
    cache = VolumeCache(folder)
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        got = cache.get([source], {}, Loader(_volume()))
    assert np.array_equal(got.array, _volume().array) and not cache.writable
    assert np.array_equal(cache.patch([source], {}, Loader(_volume()), (0, 0, 0), (2, 2, 2)),
                          _volume().array[:2, :2, :2])


def test_errors_name_the_input_and_the_fix(tmp_path, source):
    cache = VolumeCache(tmp_path / "cache")
    with pytest.raises(VolumeCacheError, match="missing.nii.gz.*cannot be read.*Fix"):
        cache.get([tmp_path / "missing.nii.gz"], {}, Loader(_volume()))
    with pytest.raises(VolumeCacheError, match="a radharmony Volume"):
        cache.get([source], {}, lambda: np.zeros((2, 2, 2)))
    with pytest.raises(RadHarmonyError, match="memory_bytes"):
        VolumeCache(None)


def _flat(cache, source, built):
    """A flat entry of ``source`` through ``cache.fetch``: (array, meta), ``built`` counting
    the builds."""
    def build():
        built.append(1)
        return _volume().array, {"lo": -1000.0, "hi": np.float32(1000.0)}
    return cache.fetch([source], {"preset": "p"}, build, flat=True)


@pytest.mark.parametrize("damage", ["truncated", "longer", "another key", "not flat", "empty"])
def test_a_flat_entry_is_read_in_place_and_rebuilt_when_damaged(tmp_path, source, damage):
    """A preset's output: stored uncompressed, served as a read-only view of the file's pages;
    a damaged file is reported, removed and rebuilt, never served."""
    built = []
    cache = VolumeCache(tmp_path / "cache")
    first, meta = _flat(cache, source, built)
    again, meta = _flat(cache, source, built)
    assert np.array_equal(again, _volume().array) and meta == {"lo": -1000.0, "hi": 1000.0}
    assert not again.flags.writeable and len(built) == 1
    entry = next((tmp_path / "cache").rglob("*.raw"))
    assert not list((tmp_path / "cache").rglob("*.b2nd"))
    data = entry.read_bytes()
    del again
    if damage == "truncated":
        entry.write_bytes(data[:-10])
    elif damage == "longer":
        entry.write_bytes(data + b"\0" * 2)
    elif damage == "another key":
        entry.write_bytes(data.replace(entry.stem.encode(), b"0" * len(entry.stem), 1))
    elif damage == "not flat":
        entry.write_bytes(b"x" * len(data))
    else:
        entry.write_bytes(b"")
    said = {"truncated": "a truncated write", "longer": "a truncated write",
            "another key": "another key", "not flat": "not a flat entry"}.get(damage, "empty")
    with pytest.warns(RuntimeWarning, match=rf"\.raw failed its check.*{said}"):
        got, _ = _flat(cache, source, built)
    assert np.array_equal(got, _volume().array) and len(built) == 2
    assert entry.read_bytes() == data                      # rebuilt as it was


def test_flat_entries_in_the_memory_tier(tmp_path, source):
    built = []
    _flat(VolumeCache(tmp_path / "cache"), source, built)
    cache = VolumeCache(tmp_path / "cache", memory_bytes=1 << 30)
    _flat(cache, source, built)
    assert cache.memory_used > _volume().array.nbytes
    next((tmp_path / "cache").rglob("*.raw")).unlink()
    got, _ = _flat(cache, source, built)
    assert np.array_equal(got, _volume().array) and len(built) == 1
    assert cache.has(cache.key([source], {"preset": "p"}))
    memory_only = VolumeCache(None, memory_bytes=1 << 30)
    _flat(memory_only, source, built)
    got, _ = _flat(memory_only, source, built)
    assert np.array_equal(got, _volume().array) and len(built) == 2
