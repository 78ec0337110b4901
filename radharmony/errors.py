"""One exception hierarchy for radharmony.

Every message has four parts: *what and where* -> *expected* -> *found* -> *how to fix*.
Build them with :func:`message` so they read the same everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

#: How many problem paths a warning or a summary lists.
SHOW = 5


def message(what: str, *, expected: str | None = None, found: str | None = None,
            fix: str | None = None) -> str:
    """Compose a four-part error message."""
    what = what.rstrip().rstrip(".")
    parts = [what if what.endswith("?") else what + "."]
    if expected:
        parts.append(f"Expected: {expected}.")
    if found:
        parts.append(f"Found: {found}.")
    if fix:
        parts.append(f"Fix: {fix}.")
    return " ".join(parts)


def shorten(text: object, limit: int = 160) -> str:
    """``text`` on one line, cut to ``limit`` characters (for quoting values in messages)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


class RadHarmonyError(Exception):
    """Base class of every error radharmony raises on purpose."""

    def __init__(self, what: str, *, expected: str | None = None, found: str | None = None,
                 fix: str | None = None):
        self.what, self.expected, self.found, self.fix = what, expected, found, fix
        super().__init__(message(what, expected=expected, found=found, fix=fix))

    def __reduce__(self):
        """Pickled as its message and attributes, whatever the subclass's constructor takes
        (so an error raised in a worker process reaches the caller whole)."""
        return _restore, (type(self), self.args, dict(self.__dict__))


def _restore(cls, args, state):
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class MetadataNotFoundError(RadHarmonyError, FileNotFoundError):
    """A metadata file could not be located (lists every place searched)."""

    def __init__(self, description: str, searched: Iterable[Path | str], *, fix: str):
        searched = [str(p) for p in searched]
        listing = "; ".join(searched) if searched else "(nowhere: no base_image_dir given)"
        super().__init__(f"Could not find {description}", expected=description,
                         found=f"nothing at any of {len(searched)} places searched: {listing}",
                         fix=fix)
        self.searched = searched


class DatasetFolderNotFoundError(MetadataNotFoundError):
    """``base_image_dir`` does not exist: says which folder of the path does, what it holds,
    and where the dataset comes from (a :class:`MetadataNotFoundError`: nothing can be found
    near a folder that is not there)."""

    def __init__(self, title: str, folder: Path | str, *, key: str = "", access: str = "",
                 searched: "MetadataNotFoundError | None" = None):
        folder = Path(folder).expanduser()
        parent = next((p for p in folder.absolute().parents if p.is_dir()), None)
        try:
            inside = sorted(c.name for c in parent.iterdir())[:6] if parent else []
        except OSError:
            inside = []
        found = "no folder there" + (f"; the nearest existing one is {parent}" if parent else "")
        if inside:
            found += f", holding {', '.join(inside)}"
        if searched is not None:  # the metadata was looked for near it too
            found += f"; and {searched.found}"
        page = f" (the expected layout: docs/datasets/{key}.md)" if key else ""
        RadHarmonyError.__init__(
            self, f"The {title} folder {folder} does not exist",
            expected=f"base_image_dir: the folder holding the dataset's images{page}",
            found=found, fix="check the path (a typo, a drive not mounted)" +
            (f"; the data comes from: {access}" if access else "") +
            (f"; or {searched.fix}" if searched is not None and searched.fix else ""))
        self.searched = [str(folder)] + (searched.searched if searched is not None else [])


class MetadataError(RadHarmonyError, ValueError):
    """A metadata file exists but its content is not what the dataset ships."""


class MetadataFormatError(MetadataError):
    """A metadata file of the wrong kind was passed (e.g. a CSV where JSON is needed)."""


class SchemaError(RadHarmonyError, ValueError):
    """A harmonized table does not satisfy the standard schema."""


class PathSafetyError(RadHarmonyError, ValueError):
    """An image path would leave ``base_image_dir`` (absolute, ``..`` or a symlink)."""


class ImageReadError(RadHarmonyError, OSError):
    """An image is missing, empty or cannot be decoded."""


class SavedFileError(RadHarmonyError, ValueError):
    """A saved harmonizer, table or cache file is truncated, tampered with or of another kind."""


class RegistryError(RadHarmonyError, KeyError):
    """An unknown dataset key was asked for."""

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return self.args[0]


class UnsupportedOutputWarning(UserWarning):
    """An ``output_*`` flag was requested that the dataset cannot provide."""


class RowsDroppedWarning(UserWarning):
    """Rows were dropped or merged (duplicate image references, absent image files)."""


class SharedImageWarning(UserWarning):
    """One image file is reachable from rows of different patients (a hard link or a
    symlink inside the dataset), which would let an image cross a patient split."""


class ColourImageWarning(UserWarning):
    """A colour image was converted to grayscale (its channels differed)."""


class StudyWarning(UserWarning):
    """Study-level samples changed or left something out, counted and named once per build
    (images beyond ``max_images``, reports without sections, dates that cannot be read)."""


class UnverifiedFormatWarning(UserWarning):
    """A file was read whose column list no real copy has confirmed (third-party sources
    only; the dataset's page says which): columns are found by name, so check the harmonized
    table against the release the first time."""


def warn_unverified(path, what: str) -> None:
    """Warn (:class:`UnverifiedFormatWarning`) that ``path``'s ``what`` is not verified."""
    import warnings

    warnings.warn(f"{path}: {what} not verified on a real copy of the file (third-party "
                  f"sources only); columns are found by name -- compare the harmonized table "
                  f"with the release", UnverifiedFormatWarning, stacklevel=3)


def check_choice(name: str, value, choices: Iterable, *, what: str | None = None,
                 error: type[RadHarmonyError] = RadHarmonyError):
    """``value`` when it is one of ``choices``, else a four-part error listing them."""
    choices = tuple(choices)
    if isinstance(value, (str, int, float, type(None))) and value in choices:
        return value
    listed = ", ".join(repr(c) for c in choices)
    raise error(f"{what or name} must be one of {listed}", expected=f"{name} in ({listed})",
                found=shorten(repr(value), 80), fix=f"pass {name}={choices[0]!r}, for example")


class ReadOnlyTableError(RadHarmonyError, TypeError):
    """An in-place edit of a dataset's ``harmonized_df`` (build a new dataset instead)."""
