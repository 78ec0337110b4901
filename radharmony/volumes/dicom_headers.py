"""DICOM headers scanned fast: each file's header up to its pixel data, nothing decoded.

The usual little-endian syntaxes (explicit and implicit VR; encapsulated pixel data too) are
parsed here, reading only the tags in :data:`TAGS` and skipping every other element by its
length (sequences of undefined length walked to their delimiters); anything else (big endian,
deflated, no ``DICM`` preamble) goes through pydicom (``stop_before_pixels``,
``specific_tags``). A file that is not a DICOM image (a DICOMDIR, a text file) gives ``None``.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from ..errors import ImageReadError, RadHarmonyError

#: the tags read from each header: (group, element) -> (keyword, VR)
TAGS = {
    (0x0002, 0x0010): ("TransferSyntaxUID", "UI"),
    (0x0008, 0x0018): ("SOPInstanceUID", "UI"),
    (0x0008, 0x0060): ("Modality", "CS"),
    (0x0008, 0x103E): ("SeriesDescription", "LO"),
    (0x0020, 0x000E): ("SeriesInstanceUID", "UI"),
    (0x0020, 0x0011): ("SeriesNumber", "IS"),
    (0x0020, 0x0013): ("InstanceNumber", "IS"),
    (0x0020, 0x0032): ("ImagePositionPatient", "DS"),
    (0x0020, 0x0037): ("ImageOrientationPatient", "DS"),
    (0x0028, 0x0002): ("SamplesPerPixel", "US"),
    (0x0028, 0x0008): ("NumberOfFrames", "IS"),
    (0x0028, 0x0010): ("Rows", "US"),
    (0x0028, 0x0011): ("Columns", "US"),
    (0x0028, 0x0030): ("PixelSpacing", "DS"),
    (0x0028, 0x0100): ("BitsAllocated", "US"),
    (0x0028, 0x0101): ("BitsStored", "US"),
    (0x0028, 0x0103): ("PixelRepresentation", "US"),
    (0x0028, 0x1052): ("RescaleIntercept", "DS"),
    (0x0028, 0x1053): ("RescaleSlope", "DS"),
}
KEYWORDS = [keyword for keyword, _ in TAGS.values()]
_PIXEL_DATA = 0x7FE00010
#: the wanted tags as a file holds them, one little-endian 32-bit word: element << 16 | group
_WANTED_LE = {(e << 16) | g: value for (g, e), value in TAGS.items()}
_PIXEL_DATA_LE = (0x0010 << 16) | 0x7FE0
_SERIES_UID_LE = (0x000E << 16) | 0x0020
_SYNTAX_LE = (0x0010 << 16) | 0x0002
#: the tag words that stop the walk: the wanted tags and PixelData
_STOPS = frozenset(_WANTED_LE) | {_PIXEL_DATA_LE}
_TAG_VR_LEN = struct.Struct("<I2sH").unpack_from
_TAG_LEN = struct.Struct("<II").unpack_from
_U32 = struct.Struct("<I").unpack_from
_EXPLICIT_LE, _IMPLICIT_LE = "1.2.840.10008.1.2.1", "1.2.840.10008.1.2"
#: explicit VRs whose length is 4 bytes after 2 reserved ones
_LONG_VRS = {b"OB", b"OW", b"OF", b"SQ", b"UT", b"UN", b"OD", b"OL", b"OV", b"UC", b"UR",
             b"SV", b"UV"}
_HEAD = 1 << 14        # bytes read first from each file; more when its header is longer
_READ = os.O_RDONLY | getattr(os, "O_BINARY", 0)


class DicomSeriesError(RadHarmonyError, ValueError):
    """A DICOM folder or series cannot be read as one volume (which series, which files)."""


class SliceHeader:
    """What the scan keeps of one file: its path (``file`` as given, ``path`` as a Path), the
    tags read (decoded on first use from ``raw``), where its native pixel bytes start (None:
    decoded through pydicom), and whether the scan stopped early (``partial``: a file of
    another series than the one asked for)."""

    __slots__ = ("file", "tags", "pixel_offset", "raw", "partial", "_path")

    def __init__(self, path, tags: dict, pixel_offset: int | None = None,
                 raw: dict | None = None, partial: bool = False):
        self.file = os.fspath(path)
        self._path = path if isinstance(path, Path) else None
        self.tags, self.pixel_offset = tags, pixel_offset
        self.raw = {} if raw is None else raw
        self.partial = partial

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = Path(self.file)
        return self._path

    def __repr__(self) -> str:
        return f"SliceHeader({self.file!r}, pixel_offset={self.pixel_offset})"

    def get(self, keyword, default=None):
        if keyword not in self.tags and keyword in self.raw:
            self.tags[keyword] = _value(*self.raw[keyword])
        return self.tags.get(keyword, default)

    def floats(self, keyword) -> tuple[float, ...] | None:
        if keyword not in self.tags and keyword in self.raw:
            data, kind = self.raw[keyword]
            if kind == "DS":                      # straight from the bytes (float takes them)
                try:
                    return tuple(map(float, data.split(b"\\")))
                except ValueError:
                    pass
        value = self.get(keyword)
        if value is None:
            return None
        try:
            return tuple(float(v) for v in ([value] if isinstance(value, str) else value))
        except (TypeError, ValueError):
            return None


def find_files(folder: Path) -> list[str]:
    """Every regular file under ``folder`` (recursively; symlinks followed, each directory
    visited once: a symlink loop ends), sorted as their Paths sort (part by part)."""
    seen, out, stack = set(), [], [os.fspath(folder)]
    while stack:
        here = stack.pop()
        try:
            info = os.stat(here)
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            entries = list(os.scandir(here))
        except OSError as exc:
            raise ImageReadError(f"Cannot list the DICOM folder {here}",
                                 expected="a readable folder of DICOM files",
                                 found=f"{type(exc).__name__}: {exc.strerror or exc}",
                                 fix="check the path, its permissions and its symlinks") from None
        for entry in entries:
            try:
                if entry.is_dir():
                    stack.append(entry.path)
                elif entry.is_file():
                    out.append(entry.path)
            except OSError:          # a symlink loop or a dangling link: not a file to read
                continue
    return sorted(out, key=_parts)


def _parts(path: str) -> tuple[str, ...] | tuple:
    """The sort key of a path: Path's own order (part by part), without making a Path on
    POSIX (file names are plain strings there)."""
    return tuple(path.split("/")) if os.sep == "/" else Path(path).parts


def scan(paths, series_uid: str | None = None) -> tuple[list[SliceHeader], list]:
    """The headers of the DICOM images among ``paths`` and the paths that are not one. With
    ``series_uid``, the files of other series are read only up to their SeriesInstanceUID."""
    headers, skipped = [], []
    for path in paths:
        header = read_header(path, series_uid)
        if header is None:
            skipped.append(path)
        else:
            headers.append(header)
    return headers, skipped


def read_header(path, series_uid: str | None = None) -> SliceHeader | None:
    """One file's header (None when it is not a DICOM image)."""
    try:
        fd = os.open(path, _READ)
        try:
            head = os.read(fd, _HEAD)
            if head[128:132] == b"DICM":
                parsed = _parse(fd, head, series_uid)
                if parsed is not None:
                    tags, raw, offset, partial = parsed
                    if partial or "Rows" in raw:
                        return SliceHeader(path, tags, offset, raw, partial)
                    return None
        finally:
            os.close(fd)
    except OSError as exc:
        raise ImageReadError(f"Cannot read the DICOM file {path}", expected="a readable file",
                             found=f"{type(exc).__name__}: {exc.strerror or exc}",
                             fix="check the file and its permissions") from None
    return _pydicom_header(path)


def _pydicom_header(path: Path) -> SliceHeader | None:
    """The header through pydicom (any syntax; files without the DICM preamble too)."""
    import pydicom

    try:
        with open(path, "rb") as fh:
            ds = pydicom.dcmread(fh, stop_before_pixels=True, force=True,
                                 specific_tags=KEYWORDS)
            offset = fh.tell()
    except Exception:  # noqa: BLE001 - whatever pydicom makes of a non-DICOM file: skipped
        return None
    if "Rows" not in ds or "SeriesInstanceUID" not in ds:
        return None
    tags = {}
    for keyword in KEYWORDS:
        value = ds.get(keyword) if keyword != "TransferSyntaxUID" else \
            getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
        if value is None or value == "":
            continue
        tags[keyword] = [str(v) for v in value] if isinstance(value, (list, tuple)) or \
            type(value).__name__ == "MultiValue" else str(value) if keyword in _TEXT else value
    native = tags.get("TransferSyntaxUID") in (_EXPLICIT_LE, _IMPLICIT_LE)
    return SliceHeader(path, tags, offset + _pixel_header_length(path, offset) if native
                       else None)


_TEXT = {"TransferSyntaxUID", "SOPInstanceUID", "Modality", "SeriesDescription",
         "SeriesInstanceUID"}


def _pixel_header_length(path: Path, offset: int) -> int:
    """Length of the PixelData element's tag, VR and length fields at ``offset`` (8 or 12)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        head = fh.read(6)
    return 12 if head[4:6] in (b"OB", b"OW") else 8


def _parse(fd: int, head: bytes, series_uid: str | None):
    """(decoded tags, raw tags, pixel offset, partial) of a little-endian DICOM with the DICM
    preamble; None when the syntax or a structure needs pydicom.

    Each element is read with one precompiled unpack (its tag as the little-endian 32-bit word
    ``element << 16 | group``, its VR and short length together) and skipped by its length;
    only the tags in :data:`TAGS`, PixelData and undefined lengths stop the walk."""
    buf = _Buffer(fd, head)
    tags, raw = {}, {}
    meta = _meta_group(buf)
    if meta is None:
        return None
    pos, syntax = meta
    if syntax is not None:
        raw["TransferSyntaxUID"] = (syntax, "UI")
        syntax = tags["TransferSyntaxUID"] = _value(syntax, "UI")
    if syntax not in (_EXPLICIT_LE, _IMPLICIT_LE) and not _is_compressed_le(syntax):
        return None
    explicit = syntax != _IMPLICIT_LE
    native = syntax in (_EXPLICIT_LE, _IMPLICIT_LE)
    unpack = _TAG_VR_LEN if explicit else _TAG_LEN
    unpack_long, long_vrs, stops = _U32, _LONG_VRS, _STOPS   # locals: the loop runs per element
    data, size = buf.data, len(buf.data)
    while True:
        if pos + 12 > size:
            if not buf.ensure(pos + 12) and pos + 8 > len(buf.data):
                return None                             # the file ends: no PixelData
            data, size = buf.data, len(buf.data)
        if explicit:
            key, vr, length = unpack(data, pos)
            start = pos + 8
            if vr in long_vrs:
                if pos + 12 > size:
                    return None
                length, start = unpack_long(data, pos + 8)[0], pos + 12
        else:
            key, length = unpack(data, pos)
            start = pos + 8
        if length == 0xFFFFFFFF and key != _PIXEL_DATA_LE:  # a sequence of undefined length
            pos = _skip_undefined(buf, start, explicit)
            if pos is None:
                return None
            data, size = buf.data, len(buf.data)
            continue
        if key in stops:
            if key == _PIXEL_DATA_LE:
                return tags, raw, (start if native and length != 0xFFFFFFFF else None), False
            if start + length > size:
                if not buf.ensure(start + length):
                    return None
                data, size = buf.data, len(buf.data)
            keyword, kind = _WANTED_LE[key]
            value = raw[keyword] = (data[start:start + length], kind)
            if key == _SERIES_UID_LE and series_uid is not None and \
                    _value(*value) != series_uid:
                return tags, raw, None, True            # another series: no need to read on
        pos = start + length


def _meta_group(buf) -> tuple[int, bytes | None] | None:
    """The file meta group (explicit VR): the position after it and its TransferSyntaxUID's
    bytes (None: the file ends first). With its group length (0002,0000) first, as the
    standard requires, the syntax is found in the group's bytes at once (nothing before it in
    the group can hold the pattern: a 2-byte version and two UIDs' digits)."""
    data = buf.data
    if data[132:140] == b"\x02\x00\x00\x00UL\x04\x00":
        end = 144 + _U32(data, 140)[0]
        at = data.find(b"\x02\x00\x10\x00UI", 144, end)
        if at > 0 and end + 8 <= len(data) and data[end:end + 2] != b"\x02\x00":
            stop = at + 8 + (data[at + 6] | data[at + 7] << 8)
            if stop <= end:
                return end, data[at + 8:stop]
    pos, syntax = 132, None
    while True:
        if pos + 8 > len(buf.data) and not buf.ensure(pos + 8):
            return None
        key, vr, length = _TAG_VR_LEN(buf.data, pos)
        if key & 0xFFFF != 0x0002:
            return pos, syntax
        start = pos + 8
        if vr in _LONG_VRS:
            if pos + 12 > len(buf.data) and not buf.ensure(pos + 12):
                return None
            length, start = _U32(buf.data, pos + 8)[0], pos + 12
        if key == _SYNTAX_LE:
            syntax = _element(buf, start, length)
            if syntax is None:
                return None
        pos = start + length


def _element(buf, start: int, length: int) -> bytes | None:
    """The value bytes of an element (None: the file ends first)."""
    if start + length > len(buf.data) and not buf.ensure(start + length):
        return None
    return buf.data[start:start + length]


def _is_compressed_le(syntax) -> bool:
    """Encapsulated syntaxes are explicit VR little endian (their header parses the same)."""
    return isinstance(syntax, str) and syntax.startswith("1.2.840.10008.1.2.") and \
        syntax not in ("1.2.840.10008.1.2.1.99", "1.2.840.10008.1.2.2")


def _skip_undefined(buf, pos: int, explicit: bool) -> int | None:
    """The position after an undefined-length sequence (or item) starting at ``pos``."""
    depth = 1
    while depth:
        if not buf.ensure(pos + 8):
            return None
        group, elem = struct.unpack_from("<HH", buf.data, pos)
        length = struct.unpack_from("<I", buf.data, pos + 4)[0]
        if group == 0xFFFE:
            if elem in (0xE0DD, 0xE00D):           # sequence / item delimiter
                depth -= 1
                pos += 8
            elif length == 0xFFFFFFFF:             # an item of undefined length
                depth += 1
                pos += 8
            else:
                pos += 8 + length
            continue
        if explicit:
            vr = bytes(buf.data[pos + 4:pos + 6])
            if vr in _LONG_VRS:
                if not buf.ensure(pos + 12):
                    return None
                length, start = struct.unpack_from("<I", buf.data, pos + 8)[0], pos + 12
            else:
                length, start = struct.unpack_from("<H", buf.data, pos + 6)[0], pos + 8
        else:
            start = pos + 8
        if length == 0xFFFFFFFF:
            depth += 1
            pos = start
        else:
            pos = start + length
    return pos


class _Buffer:
    """The head of a file (bytes), read further on demand."""

    def __init__(self, fd: int, head: bytes):
        self.fd, self.data = fd, head

    def ensure(self, end: int) -> bool:
        while len(self.data) < end:
            more = os.read(self.fd, max(end - len(self.data), _HEAD))
            if not more:
                return False
            self.data += more
        return True


def _value(raw: bytes, kind: str):
    if kind == "US":
        return struct.unpack_from("<H", raw)[0] if len(raw) >= 2 else None
    text = raw.decode("latin-1").strip("\x00 ")
    if kind in ("DS", "IS"):
        parts = [p.strip() for p in text.split("\\")]
        if kind == "IS":
            return int(float(parts[0])) if parts and parts[0] else None
        return parts if len(parts) > 1 else parts[0]
    return text
