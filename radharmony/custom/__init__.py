"""Your own dataset without writing Python: a YAML or JSON file describes a table + images.

A hospital export -- a CSV, TSV, JSON or JSON Lines table and a folder of images -- is described
by a config (see ``docs/custom_datasets.md``): what one row means, which columns hold the ids,
path, view and report, how labels, boxes and masks are encoded and in which pixel space, and how
the labels map onto :data:`radharmony.vocabulary.FINDINGS`. :func:`load_config` returns a
harmonizer class and a dataset class built from the generic bases, so the table cache,
validation, splits grouped by patient, the image cache, the CLI (``--config FILE``) and the
viewer all work as for a built-in dataset. Derivations are a closed set of operators
(templates, prefix/suffix stripping, regex captures); nothing in a config is executed.

>>> import json, tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "export.csv").write_text("PatientID,File,Effusion\\nP1,a.png,1\\nP2,b.png,\\n")
>>> _ = (folder / "mine.json").write_text(json.dumps({
...     "key": "mine_cxr", "title": "Mine", "table": {"path": "export.csv"},
...     "ids": {"patient": "PatientID"}, "image": {"path": "File"},
...     "labels": {"columns": ["Effusion"]},
...     "label_map": {"Effusion": "pleural_effusion"}}))
>>> H, D = load_config(folder / "mine.json")
>>> df = H(base_image_dir=folder).harmonize()
>>> df[["patient_id", "image_path", "Effusion"]].values.tolist()
[['P1', 'a.png', 1.0], ['P2', 'b.png', nan]]
"""

from __future__ import annotations

import os
from pathlib import Path

from .build import ConfigDataset, ConfigHarmonizer, build_classes, config_spec
from .config import ConfigError, read_config, validate_config
from .harmonize import harmonize_table


def load_config(path: str | os.PathLike) -> tuple[type[ConfigHarmonizer], type[ConfigDataset]]:
    """``(harmonizer class, dataset class)`` for the config file at ``path`` (``.yaml``,
    ``.yml`` or ``.json``); raises :class:`ConfigError` naming the first wrong field. The
    table's ``path`` is relative to the config file's folder."""
    path = Path(path)
    cfg = validate_config(read_config(path), where=str(path))
    return build_classes(cfg, path)


def register_config(path: str | os.PathLike) -> type[ConfigDataset]:
    """Load the config at ``path`` and register its dataset under its ``key``
    (:func:`radharmony.register_dataset`), so the CLI, the viewer and
    :func:`radharmony.get_dataset_class` find it; returns the dataset class."""
    from ..registry import register_dataset

    _, dataset = load_config(path)
    return register_dataset(dataset)


__all__ = ["ConfigDataset", "ConfigError", "ConfigHarmonizer", "build_classes", "config_spec",
           "harmonize_table", "load_config", "read_config", "register_config",
           "validate_config"]
