"""The built-in datasets' keys, families and specs, readable without importing the dataset
modules (which import torch, pandas and the image stack).

``catalog.json`` beside this module is written from the real registry by ``python -m
tools.gen_docs`` (:func:`write`). It is used only while it is current: while the digest of the
code it was built from (every file of ``radharmony/datasets/`` and ``spec.py``) equals the
code's digest now, and while :mod:`radharmony.registry` is not loaded (once it is, a user may
have registered datasets of their own, and the registry answers). Otherwise every function
here answers from the registry itself, so the answer never differs, only its speed;
``tests/test_catalog.py`` checks that the file equals the registry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from functools import lru_cache
from pathlib import Path

from .spec import DatasetSpec, Identity

PACKAGE = Path(__file__).resolve().parent
INDEX = PACKAGE / "catalog.json"


def source_digest() -> str:
    """Digest of the code the catalog is built from (the dataset modules and the spec)."""
    h = hashlib.blake2b(digest_size=12)
    for path in sorted((PACKAGE / "datasets").glob("*.py")) + [PACKAGE / "spec.py"]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def _stored() -> dict | None:
    try:
        index = json.loads(INDEX.read_text())
    except (OSError, ValueError):
        return None
    return index if index.get("digest") == source_digest() else None


def _index() -> dict | None:
    """The stored index when it may answer (current, and no registry loaded), else None."""
    if "radharmony.registry" in sys.modules:
        return None
    return _stored()


def _decode(value):
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    return value


def _encode(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # e.g. an Identity
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (frozenset, set)):
        return sorted(value)
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _encode(v) for k, v in value.items()}
    return value


def _spec_from(record: dict) -> DatasetSpec:
    kinds = {f.name: f for f in dataclasses.fields(DatasetSpec)}
    values = {}
    for name, value in record.items():
        value = _decode(value)
        default = kinds[name].default
        if isinstance(default, frozenset):
            value = frozenset(value)
        elif name == "identity" and value is not None:
            value = Identity(**value)
        values[name] = value
    return DatasetSpec(**values)


def list_datasets() -> list[str]:
    """Sorted keys of every registered dataset (as :func:`radharmony.list_datasets`)."""
    index = _index()
    if index is None:
        from .registry import list_datasets

        return list_datasets()
    return sorted(index["specs"])


def families() -> dict[str, list[str]]:
    """Dataset family -> its keys (as :func:`radharmony.families`)."""
    index = _index()
    if index is None:
        from .registry import families

        return families()
    return {f: list(keys) for f, keys in index["families"].items()}


def spec(key: str) -> DatasetSpec:
    """The spec of the dataset registered under ``key`` (a wrong key raises the registry's
    :class:`~radharmony.errors.RegistryError`, with the nearest keys)."""
    index = _index()
    if index is None or key not in index["specs"]:
        from .registry import get_harmonizer_class

        return get_harmonizer_class(key).spec
    return _spec_from(index["specs"][key])


def build() -> dict:
    """The index of the real registry's built-in datasets (imports every dataset module)."""
    from . import datasets
    from .registry import families as real_families

    specs = {key: h.spec for key, h in sorted(datasets.HARMONIZERS.items())}
    fams = {f: [k for k in keys if k in specs] for f, keys in real_families().items()}
    return {"digest": source_digest(),
            "families": {f: keys for f, keys in fams.items() if keys},
            "specs": {key: {f.name: _encode(getattr(s, f.name)) for f in dataclasses.fields(s)}
                      for key, s in specs.items()}}


def write() -> bool:
    """Rewrite ``catalog.json`` from the registry; True when it changed."""
    text = json.dumps(build(), indent=1, ensure_ascii=False) + "\n"
    if INDEX.is_file() and INDEX.read_text() == text:
        return False
    INDEX.write_text(text)
    _stored.cache_clear()
    return True
