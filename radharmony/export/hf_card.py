"""The split each exported row belongs to, and the dataset card that tells Hugging Face
``datasets`` so.

``datasets.load_dataset(folder)`` infers splits from file names (``train``, ``valid``,
``test``, ... as a word of the name) and puts every other file in ``train``: a Parquet export
``medical_diff_vqa-000000.parquet`` became one ``train`` split whatever its rows' official
splits. :func:`~radharmony.export.study_formats.to_parquet` therefore writes each split's rows
to their own shards ``<prefix>-<split>-000000.parquet`` (:func:`split_groups`) and a
``README.md`` whose YAML header lists each split's files (:func:`write_card`), which
``load_dataset(folder)`` reads before any file name.

A row's split is its table's ``split`` (``train``/``valid``/``test``; a study's is its first
image's), else the one its dataset key names (``rexgradient_test`` -> ``test``; ``_val`` and
``_dev`` are ``valid``). Hugging Face's names are used: ``train``, ``validation`` (radharmony's
``valid``), ``test``. Rows without a split go to ``train`` when no row of the export has one
(Hugging Face's name for unsplit data), else to ``unsplit``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .studies import is_vqa
from .tarfiles import _save_shard

#: radharmony's split names -> Hugging Face's
HF_SPLITS = {"train": "train", "valid": "validation", "test": "test"}
#: the split of rows without one, in an export where other rows have one
UNSPLIT = "unsplit"
#: the last word of a dataset key that names its split
KEY_SPLITS = {"train": "train", "valid": "valid", "val": "valid", "dev": "valid",
              "test": "test"}
CARD = "README.md"


def row_splits(ds) -> list[str | None]:
    """radharmony's split (``train``/``valid``/``test``) of each record of ``ds`` (a study, or
    a VQA dataset's question), None where unknown (see the module notes)."""
    if is_vqa(ds):
        table, first = ds.harmonized_df, None
    else:
        table = ds.images.harmonized_df
        first = np.fromiter((int(r[0]) for r in ds.index.rows), np.int64, len(ds))
    if "split" in table.columns:
        values = table["split"].to_numpy(object)
        values = values if first is None else values[first]
        return [v if isinstance(v, str) and v in HF_SPLITS else None for v in values]
    word = str(getattr(ds.spec, "key", "")).rsplit("_", 1)[-1]
    return [KEY_SPLITS.get(word)] * len(ds)


def split_groups(ds) -> list[tuple[str, np.ndarray | range]]:
    """``[(Hugging Face split, record indices in order)]``, splits in the order train,
    validation, test, unsplit, each present once."""
    splits = row_splits(ds)
    if all(s is None for s in splits):
        return [("train", range(len(ds)))]
    names = np.array([UNSPLIT if s is None else HF_SPLITS[s] for s in splits], object)
    return [(name, np.flatnonzero(names == name))
            for name in (*HF_SPLITS.values(), UNSPLIT) if (names == name).any()]


def write_card(folder: Path, manifest: dict, *, title: str) -> Path:
    """Write ``folder/README.md``: a dataset card whose YAML header (``configs``) names each
    split's shard files, as ``manifest`` lists them, so ``datasets.load_dataset(folder)``
    gives each row the split it belongs to."""
    by_split: dict[str, list[str]] = {}
    for shard in manifest["shards"]:
        by_split.setdefault(shard.get("split", "train"), []).append(shard["name"])
    lines = ["---", *(["configs:", "- config_name: default", "  data_files:"] if by_split
                      else ["{}"])]  # an empty export: no data files to name
    for split, names in by_split.items():
        lines += [f"  - split: {split}", "    path:", *(f"    - {json.dumps(n)}" for n in names)]
    counts = {split: sum(s["count"] for s in manifest["shards"] if s.get("split", "train") ==
                         split) for split in by_split}
    lines += ["---", "", f"# {title}", "",
              "Written by `radharmony.export.to_parquet`; `manifest.json` lists every shard "
              "with its SHA-256. " + ("Rows per split: " + ", ".join(
                  f"{k} {v:,}" for k, v in counts.items()) + "." if counts else "No rows."),
              ""]
    path = Path(folder) / CARD
    _save_shard(path, "\n".join(lines).encode())
    return path


__all__ = ["CARD", "HF_SPLITS", "KEY_SPLITS", "UNSPLIT", "row_splits", "split_groups",
           "write_card"]
