"""Finding a dataset's metadata file near its image folder."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterable

from ..errors import MetadataNotFoundError

log = logging.getLogger("radharmony")


def search_dirs(base_image_dir: str | Path | None, *, levels: int = 3) -> list[Path]:
    """Folders to look in, nearest first: the image root and its ancestors, each with its
    ``metadata/`` and ``download/metadata/`` sub-folders."""
    if base_image_dir is None:
        return []
    start = Path(base_image_dir).expanduser().absolute()
    dirs: list[Path] = []
    for d in [start, *list(start.parents)[:levels]]:
        for cand in (d, d / "metadata", d / "download" / "metadata"):
            if cand not in dirs:
                dirs.append(cand)
    return dirs


def discover(base_image_dir, names: Iterable[str], *, description: str, argument: str,
             source: str = "") -> Path:
    """The best existing ``dir / name``: the kind of file outranks nearness (every folder is
    searched for ``names[0]`` before any is searched for ``names[1]``, and so on), nearest
    folder first within a kind. The choice is logged at INFO on the ``radharmony`` logger.
    ``source``: where the file comes from and under what terms, added to the error's fix."""
    names = list(names)
    dirs = search_dirs(base_image_dir)
    tried = []
    for rank, name in enumerate(names):
        for d in dirs:
            p = d / name
            tried.append(p)
            if p.is_file():
                better = ", ".join(names[:rank])
                log.info("radharmony: %s: using %s%s", description, p,
                         f" (no {better} found in {len(dirs)} folders near {base_image_dir})"
                         if rank else "")
                return p
    raise MetadataNotFoundError(
        description, tried,
        fix=f"pass {argument}='/path/to/{names[0]}' or put the file in a metadata/ folder "
            f"beside or above base_image_dir (searched for, in order of preference: "
            f"{', '.join(names)})" + (f". It ships with the dataset: {source}" if source else ""))


def listed_paths(ids, files: dict | None, fallback, *, source: str, fallback_text: str,
                 what: str = "file"):
    """Each id's path from ``files`` (a listed folder, :meth:`Inputs.by_name`), else its
    ``fallback`` path, warning with the count of ids that had no ``what`` (``fallback_text``
    says what their path then is). Without a listing every id keeps its fallback."""
    import warnings

    import numpy as np
    import pandas as pd

    fallback = np.asarray(fallback, dtype=object)
    if files is None:
        return fallback
    found = pd.Series(files, dtype=object).reindex(pd.Index(ids)).to_numpy(object)
    missing = pd.isna(found)
    if missing.any():
        warnings.warn(f"{source}: {int(missing.sum())} of {len(found)} images have no {what} under "
                      f"the image folder; their image_path is {fallback_text}", stacklevel=3)
    return np.where(missing, fallback, found)


def find_optional(names: Iterable[str], *near: str | Path | None) -> Path | None:
    """The first existing file called one of ``names`` in or near the folders ``near`` (the
    folder itself, its ``metadata/`` sub-folders and up to three ancestors), else None."""
    return _look(tuple(names), near)[0]


def find_side(names: Iterable[str], *near: str | Path | None) -> tuple[Path | None, list[Path]]:
    """:func:`find_optional`, and the paths it looked at in order (all of them when the file
    is absent): what :class:`~radharmony.table.inputs.Inputs`'s ``looked`` holds, so that a
    task needing the file can name it and where it was looked for."""
    return _look(tuple(names), near)


def _look(names: tuple, near) -> tuple[Path | None, list[Path]]:
    tried: list[Path] = []
    for base in near:
        for d in search_dirs(base):
            for name in names:
                if d / name in tried:
                    continue
                tried.append(d / name)
                if tried[-1].is_file():
                    return tried[-1], tried
    return None, tried
