"""The contract that keeps the table cache honest, over every registered dataset.

A harmonizer declares what it reads once (``inputs()``); ``read`` may open or list nothing
else, and the table cache keys on exactly that. Checked on each dataset's fake replica:

* every file ``read`` opens and every folder it lists under the replica is declared (an audit
  hook records Python's ``open`` and ``os.scandir``/``os.listdir`` events);
* touching any file ``read`` opened, or a file in a folder it listed, is a cache miss;
* removing such a file -- or moving a side file into an ancestor's ``metadata/`` folder, where
  discovery also finds it -- gives the same table through the cache as without it.
"""

from __future__ import annotations

import inspect
import os
import shutil
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

import radharmony
from radharmony.fake import FAKES, _load_all, make_fake
from radharmony.table.harmonizer import BaseHarmonizer

_load_all()
KEYS = [k for k in radharmony.list_datasets() if k in FAKES]
_EVENTS: list | None = None


def _hook(event, args):
    if _EVENTS is not None and event in ("open", "os.scandir", "os.listdir") and args:
        target = args[0]
        if isinstance(target, (str, bytes, os.PathLike)):
            _EVENTS.append((event, os.path.realpath(os.fsdecode(target))))


sys.addaudithook(_hook)


def _harmonizer(key, kwargs):
    cls = radharmony.get_harmonizer_class(key)
    params = inspect.signature(cls).parameters
    return cls(**{k: v for k, v in kwargs.items() if k in params})


def _reads(h) -> tuple[set[str], set[str]]:
    """``(files opened, folders listed)`` while ``h`` reads its declared inputs."""
    global _EVENTS
    inputs = h.inputs(h.resolve_metadata_path())
    _EVENTS = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            h.read(inputs)
    finally:
        events, _EVENTS = _EVENTS, None
    return ({p for e, p in events if e == "open" and os.path.isfile(p)},
            {p for e, p in events if e != "open"})


def _declared(inputs) -> tuple[set[str], list[str]]:
    files = {os.path.realpath(inputs.metadata)} | {
        os.path.realpath(p) for p in inputs.files.values() if p is not None}
    folders = [os.path.realpath(p) for p, _ in inputs.folders.values() if p is not None]
    if inputs.metadata.is_dir():  # a folder of images is the index (NLM TB)
        folders.append(os.path.realpath(inputs.metadata))
    return files, folders


def _under(path: str, folders) -> bool:
    return any(path == f or path.startswith(f.rstrip(os.sep) + os.sep) for f in folders)


def _table(key, kwargs, cache_dir):
    """The harmonized table (or the type of error harmonizing raises)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return _harmonizer(key, kwargs).harmonize(cache_dir=cache_dir)
        except radharmony.RadHarmonyError as exc:
            return type(exc)


def _same(a, b, what):
    if isinstance(a, type) or isinstance(b, type):
        assert a == b, f"{what}: {a!r} vs {b!r}"
    else:
        pd.testing.assert_frame_equal(a, b, obj=what)


@pytest.fixture(scope="module", params=KEYS)
def replica(request, tmp_path_factory):
    key = request.param
    root = tmp_path_factory.mktemp(f"inputs-{key}")
    kwargs = make_fake(key, root / "data" / "release")
    return key, kwargs, root


def test_read_touches_only_declared_inputs(replica):
    key, kwargs, root = replica
    h = _harmonizer(key, kwargs)
    inputs = h.inputs(h.resolve_metadata_path())
    files, folders = _declared(inputs)
    opened, listed = _reads(h)
    base = os.path.realpath(root)
    stray = sorted(p for p in opened | listed
                   if _under(p, [base]) and p not in files and not _under(p, folders))
    assert not stray, f"{key}: read() opened or listed undeclared paths {stray[:5]}"


def _probes(key, kwargs) -> list[str]:
    """The files whose change must reach the table: every file read opened under the
    replica, and one file from each folder it listed."""
    h = _harmonizer(key, kwargs)
    opened, listed = _reads(h)
    inputs = h.inputs(h.resolve_metadata_path())
    out = sorted(opened)
    for folder in sorted(listed):
        for role, (path, suffixes) in inputs.folders.items():
            if path is not None and _under(folder, [os.path.realpath(path)]):
                names = [n for n in inputs.listing(role)
                         if os.path.realpath(path / n).startswith(folder)]
                if names:
                    out.append(os.path.realpath(path / sorted(names)[-1]))
                break
    return list(dict.fromkeys(out))[:8]


def test_every_input_keys_the_table_cache(replica, tmp_path, monkeypatch):
    key, kwargs, _ = replica
    builds = []
    real = BaseHarmonizer._harmonize_inputs
    monkeypatch.setattr(BaseHarmonizer, "_harmonize_inputs",
                        lambda self, inputs: builds.append(1) or real(self, inputs))
    cache = tmp_path / "cache"
    first = _table(key, kwargs, cache)
    assert not isinstance(first, type), f"{key}: the replica does not harmonize ({first})"
    for n, path in enumerate(_probes(key, kwargs)):
        before = len(builds)
        _same(_table(key, kwargs, cache), first, f"{key}: unchanged inputs")
        assert len(builds) == before, f"{key}: unchanged inputs were harmonized again"
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9 * (n + 1)))
        _table(key, kwargs, cache)
        assert len(builds) == before + 1, f"{key}: touching {path} did not miss the cache"

        backup = tmp_path / f"backup-{n}"
        shutil.move(path, backup)
        try:
            _same(_table(key, kwargs, cache), _table(key, kwargs, None),
                  f"{key} without {path}")
        finally:
            shutil.move(backup, path)
        _same(_table(key, kwargs, cache), _table(key, kwargs, None), f"{key} restored {path}")


def test_a_side_file_moved_to_an_ancestors_metadata_folder_is_followed(replica, tmp_path):
    key, kwargs, root = replica
    h = _harmonizer(key, kwargs)
    inputs = h.inputs(h.resolve_metadata_path())
    cache = tmp_path / "cache"
    moved = 0
    for role, path in inputs.files.items():
        if path is None:
            continue
        _table(key, kwargs, cache)  # cached with the side file where it was
        target = root / "metadata" / path.name  # two levels above the release folder
        target.parent.mkdir(exist_ok=True)
        shutil.move(path, target)
        try:
            again = _harmonizer(key, kwargs)
            found = again.inputs(again.resolve_metadata_path()).files.get(role)
            if found is not None and Path(found).resolve() == target.resolve():
                moved += 1
            _same(_table(key, kwargs, cache), _table(key, kwargs, None),
                  f"{key}: {role} moved to {target}")
        finally:
            shutil.move(target, path)
    if not moved:
        pytest.skip(f"{key} finds no side file in an ancestor's metadata/")


def _texts(path: Path) -> list[bytes]:
    """The bytes of a metadata file, decompressed (gzip, zip and tar members too)."""
    import gzip
    import tarfile
    import zipfile

    if path.is_dir():
        return [p.read_bytes() for p in sorted(path.iterdir()) if p.suffix in (".txt", ".csv")]
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return [z.read(n) for n in z.namelist()]
    try:
        with tarfile.open(fileobj=__import__("io").BytesIO(data)) as tar:
            return [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
    except tarfile.TarError:
        return [data]


def test_view_position_is_spelled_as_the_metadata_spells_it(replica):
    """``view_position`` is raw: each value is text the dataset's own files hold (the
    canonical spelling lives in ``view`` alone)."""
    key, kwargs, _ = replica
    h = _harmonizer(key, kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = h.harmonize()
    values = sorted(set(df["view_position"].dropna()))
    if not values:
        pytest.skip(f"{key} ships no view positions")
    inputs = h.inputs(h.csv_path)
    blobs = [b for p in [inputs.metadata, *(f for f in inputs.files.values() if f)]
             for b in _texts(Path(p))]
    missing = [v for v in values if not any(v.encode() in b for b in blobs)]
    assert not missing, f"{key}: view_position values {missing} are not in its metadata"
