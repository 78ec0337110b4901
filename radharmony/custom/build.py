"""A validated config -> a harmonizer class and a dataset class, built from the generic bases.

:class:`ConfigHarmonizer` is a :class:`~radharmony.table.harmonizer.BaseHarmonizer` whose
``inputs``, ``read`` and ``harmonize_raw`` follow its class's ``config``;
:class:`ConfigDataset` is a :class:`~radharmony.data.dataset.BaseRadiologicalDataset` whose
``source_mask`` decodes the config's masks. :func:`build_classes` makes one subclass of each per
config (the spec comes from the config), so everything a built-in dataset has -- the table
cache, validation, splits, image cache, CLI and viewer -- works unchanged.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import ClassVar

import cv2
import numpy as np
import pandas as pd

from ..annotations.labels import UncertainLabelsMixin
from ..annotations.masks import merge_masks, rle_decode
from ..data.dataset import BaseRadiologicalDataset
from ..errors import ImageReadError, MetadataNotFoundError
from ..imaging.read import safe_path
from ..spec import DatasetSpec, Identity
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.locate import discover
from .config import GROUPS
from .harmonize import harmonize_table
from .reading import read_rows


# -- the spec --------------------------------------------------------------------------------------
def config_spec(cfg: dict) -> DatasetSpec:
    """The :class:`DatasetSpec` a validated config describes."""
    labels = cfg["labels"]
    names = tuple(labels["names"]) if labels else ()
    extra = list(cfg["extras"])
    if "image" in cfg["ids"]:
        extra.insert(0, "image_id")
    if cfg["splits"]["column"]:
        extra.append("split")
    mask = cfg["mask"]
    if mask and mask["kind"] == "rle":
        extra += ["mask_rle", "mask_height", "mask_width"]
    elif mask:
        extra.append("mask_files")
    outputs = set()
    if labels:
        outputs.add("cls")
    if cfg["report"]:
        outputs.add("report")
    if cfg["boxes"]:
        outputs.add("bbox")
    if mask:
        outputs.add("mask")
    boxes = cfg["boxes"] or []
    pixel = any(b["units"] == "pixel" and b["image_size"] is None for b in boxes)
    label_map = {n: None for n in names}
    label_map.update({k: tuple((f, r) for f, r in v) if v else None
                      for k, v in cfg["label_map"].items()})
    access = cfg["access"] + (f" (licence: {cfg['licence']})" if cfg["licence"] else "")
    return DatasetSpec(
        key=cfg["key"], title=cfg["title"], metadata_files=(Path(cfg["table"]["path"]).name,),
        label_cols=names, extra_cols=tuple(extra), outputs=frozenset(outputs),
        view_map=dict(cfg["view"]["map"]) if cfg["view"] else {},
        expected=dict(cfg["expected"]), access=access.strip(),
        group_col=GROUPS[cfg["splits"]["group_by"]],
        id_col="image_id" if "image" in cfg["ids"] else "image_path",
        box_units="pixel" if pixel else "normalized", label_map=label_map,
        identity=None if not cfg.get("family") else Identity(
            cfg["family"]["name"], link=cfg["family"]["link"], column=cfg["family"]["column"],
            pattern=cfg["family"]["pattern"], note=cfg["family"]["note"]))


class ConfigHarmonizer(BaseHarmonizer):
    """The harmonizer of a dataset described by a config (subclassed per config by
    :func:`build_classes`: ``config`` is the validated config, ``config_path`` its file)."""

    config: ClassVar[dict]
    config_path: ClassVar[Path | None] = None
    metadata_description = "the dataset's metadata table"

    def __reduce__(self):  # the class is built at run time: pickle its config, not its name
        return (_rebuild, (self.config, _path_text(self.config_path), "harmonizer",
                           self.__dict__))

    def resolve_metadata_path(self) -> Path:
        """``csv_path``, else the config's ``table.path`` (relative to the config file), else
        that file name searched near ``base_image_dir``."""
        if self.csv_path is None:
            given = Path(self.config["table"]["path"]).expanduser()
            if not given.is_absolute() and self.config_path is not None:
                given = self.config_path.parent / given
            if given.is_file():
                return given
            if self.base_image_dir is None:
                raise MetadataNotFoundError(self.metadata_description, [given],
                                            fix="correct table.path in the config, or pass "
                                                "csv_path")
            return discover(self.base_image_dir, self.spec.metadata_files,
                            description=self.metadata_description, argument="csv_path")
        return super().resolve_metadata_path()

    def inputs(self, path: Path) -> Inputs:
        """The table, and the config file (a changed config re-harmonizes)."""
        return Inputs(path, files={"config": self.config_path})

    def read(self, inputs: Inputs) -> pd.DataFrame:
        return read_rows(inputs.metadata, self.config["table"],
                         description=self.metadata_description)

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        return harmonize_table(cls.config, raw, source=source)


# -- the dataset ---------------------------------------------------------------------------------
class ConfigDataset(UncertainLabelsMixin, BaseRadiologicalDataset):
    """A dataset described by a config (subclassed per config by :func:`build_classes`);
    ``uncertain=`` keeps (default), zeroes or sets to one the -1 labels in ``cls``."""

    config: ClassVar[dict]

    def __reduce__(self):
        return (_rebuild, (self.config, _path_text(self.harmonizer_class.config_path),
                           "dataset", self.__dict__))

    def source_mask(self, index: int) -> np.ndarray:
        mask = self.config["mask"]
        df = self.harmonized_df
        if mask["kind"] == "rle":
            h, w = int(df["mask_height"].iat[index]), int(df["mask_width"].iat[index])
            codes = df["mask_rle"].iat[index]
            if isinstance(codes, str):
                codes = json.loads(codes) if codes.strip() else []
            where = f"{self.spec.key} image {df['image_path'].iat[index]}"
            return merge_masks((_decode(c, mask, h, w, where) for c in codes), shape=(h, w))
        files = df["mask_files"].iat[index]
        if isinstance(files, str):
            files = json.loads(files) if files.strip() else []
        parts = []
        for rel in files:
            path = safe_path(self.image_root(index), rel)
            if mask["missing"] == "empty" and not path.exists():
                continue
            m = cv2.imread(str(path), cv2.IMREAD_UNCHANGED) if path.is_file() else None
            if m is None:
                raise ImageReadError(f"Mask {path} is missing or unreadable",
                                     expected="a PNG mask (mask.png.path in the config)",
                                     found="no readable image", fix="restore the mask file, "
                                     "or correct mask.png.path")
            if m.ndim == 3:
                m = m.max(axis=2)
            parts.append((m > 0).astype(np.uint8))
        if not parts:  # no mask for this image: an empty one at the image's size
            from ..imaging.read import read_image

            _, shape = read_image(self.image_file(index))
            return np.zeros(shape, np.uint8)
        return merge_masks(parts, shape=parts[0].shape)


def _decode(code: str, mask: dict, h: int, w: int, where: str) -> np.ndarray:
    nums = str(code).split()
    if mask["start"] and nums and all(t.lstrip("-").isdigit() for t in nums):
        ints = [int(t) for t in nums]
        if mask["relative"]:
            ints[0] -= 1
        else:
            ints[0::2] = [s - 1 for s in ints[0::2]]
        code = " ".join(map(str, ints))
    return rle_decode(code, height=h, width=w, relative=mask["relative"],
                      order="C" if mask["order"] == "row" else "F", where=where)


# -- building the classes ----------------------------------------------------------------------
_BUILT: dict[str, tuple[type, type]] = {}


def _path_text(p) -> str | None:
    return None if p is None else str(p)


def _digest(cfg: dict, path) -> str:
    return hashlib.sha256(json.dumps([cfg, _path_text(path)], sort_keys=True).encode()
                          ).hexdigest()[:16]


def build_classes(cfg: dict, config_path: str | Path | None = None
                  ) -> tuple[type[ConfigHarmonizer], type[ConfigDataset]]:
    """``(harmonizer class, dataset class)`` for a validated config (the same classes for the
    same config and path)."""
    digest = _digest(cfg, config_path)
    if digest in _BUILT:
        return _BUILT[digest]
    key = cfg["key"]
    camel = "".join(p.capitalize() for p in key.split("_"))
    module = f"radharmony.custom.{key}"  # the family name the CLI lists is the key
    spec = config_spec(cfg)
    path = None if config_path is None else Path(config_path).absolute()
    h = type(f"{camel}Harmonizer", (ConfigHarmonizer,), {
        "__module__": module, "__doc__": f"{cfg['title']} (from the config {path}).",
        "spec": spec, "config": cfg, "config_path": path,
        "metadata_description": f"the {key} metadata table ({Path(cfg['table']['path']).name})"})
    d = type(f"{camel}Dataset", (ConfigDataset,), {
        "__module__": module, "__doc__": f"{cfg['title']}: samples from the config {path}.",
        "harmonizer_class": h, "config": cfg})
    _BUILT[digest] = (h, d)
    return h, d


def _rebuild(cfg: dict, config_path: str | None, kind: str, state: dict):
    h, d = build_classes(cfg, config_path)
    cls = h if kind == "harmonizer" else d
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj
