"""NIfTI-1 (``.nii``, ``.nii.gz``): the header parsed here, the voxels decoded in one pass.

The geometry follows nibabel's rules (``Nifti1Header.get_best_affine``): the **sform** when its
code is set, else the **qform** (quaternion, ``pixdim``, ``qfac`` = ``pixdim[0]``), else the
Analyze fallback (``pixdim`` zooms, x flipped, origin at the centre). Which one was used is
written into the volume's provenance, with a note when qform and sform are both set and
disagree. NIfTI's world is RAS; the volume is returned in LPS in the canonical order
(:func:`radharmony.volumes.geometry.to_canonical`).

Bounded before anything is allocated: a header that claims more voxels than the file can hold
(for ``.nii.gz``: more than deflate can expand the compressed bytes to) is refused, and the
decompressor never produces more than the header's data size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ImageReadError, RadHarmonyError
from ..imaging.inflate import ZLIB_ERRORS, GzipPieces, inflate_gzip_into
from .checks import allocate

#: the NIfTI-1 header, in file order (348 bytes)
HEADER_FIELDS = [
    ("sizeof_hdr", "i4"), ("data_type", "S10"), ("db_name", "S18"), ("extents", "i4"),
    ("session_error", "i2"), ("regular", "S1"), ("dim_info", "u1"), ("dim", "i2", (8,)),
    ("intent_p1", "f4"), ("intent_p2", "f4"), ("intent_p3", "f4"), ("intent_code", "i2"),
    ("datatype", "i2"), ("bitpix", "i2"), ("slice_start", "i2"), ("pixdim", "f4", (8,)),
    ("vox_offset", "f4"), ("scl_slope", "f4"), ("scl_inter", "f4"), ("slice_end", "i2"),
    ("slice_code", "u1"), ("xyzt_units", "u1"), ("cal_max", "f4"), ("cal_min", "f4"),
    ("slice_duration", "f4"), ("toffset", "f4"), ("glmax", "i4"), ("glmin", "i4"),
    ("descrip", "S80"), ("aux_file", "S24"), ("qform_code", "i2"), ("sform_code", "i2"),
    ("quatern_b", "f4"), ("quatern_c", "f4"), ("quatern_d", "f4"), ("qoffset_x", "f4"),
    ("qoffset_y", "f4"), ("qoffset_z", "f4"), ("srow_x", "f4", (4,)), ("srow_y", "f4", (4,)),
    ("srow_z", "f4", (4,)), ("intent_name", "S16"), ("magic", "S4"),
]
HEADER_SIZE = 348


def header_dtype(byteorder: str = "<") -> np.dtype:
    """The NIfTI-1 header as a NumPy record type (``byteorder`` "<" or ">")."""
    return np.dtype([(f[0], byteorder + f[1], *f[2:]) if f[1][0] not in "S" else f
                     for f in HEADER_FIELDS])


#: NIfTI ``datatype`` codes -> NumPy types (byte order applied at read time)
DATATYPES = {2: "u1", 4: "i2", 8: "i4", 16: "f4", 64: "f8", 256: "i1", 512: "u2", 768: "u4",
             1024: "i8", 1280: "u8"}
#: deflate expands at most ~1032:1; a header claiming more than that is not in the file
_DEFLATE_RATIO = 1032
#: CT compresses ~2-4x; a header claiming more than this ratio gets its pages as data comes
_USUAL_RATIO = 64
#: compressed bytes read and fed to the inflater at a time (small: a piece the inflater
#: cannot finish is copied again as its unconsumed tail)
_PIECE = 1 << 17
#: decoded bytes a slab of k-slices holds before it is written into a reordered array
_SLAB = 1 << 21
#: |1 - (b^2 + c^2 + d^2)| below this is a = 0 (nibabel's threshold: 3 float32 epsilons)
_W2_THRESHOLD = float(np.finfo(np.float32).eps) * 3
_RAS_TO_LPS = np.diag([-1.0, -1.0, 1.0, 1.0])


class NiftiError(RadHarmonyError, ValueError):
    """A NIfTI file's header or data is unusable (named with the file and the fix)."""


@dataclass(frozen=True)
class NiftiHeader:
    """The fields of a NIfTI-1 header radharmony uses (``raw``: the whole record)."""
    raw: np.void
    byteorder: str
    shape: tuple[int, ...]          # (nx, ny, nz), the file's own axis order (i fastest)
    dtype: np.dtype
    vox_offset: int

    @property
    def codes(self) -> tuple[int, int]:
        """(qform_code, sform_code)."""
        return int(self.raw["qform_code"]), int(self.raw["sform_code"])

    def qform(self) -> np.ndarray:
        """The qform affine (RAS): quaternion rotation x (pixdim[1:4], qfac on k) + offset."""
        h = self.raw
        b, c, d = (float(h[k]) for k in ("quatern_b", "quatern_c", "quatern_d"))
        w2 = 1.0 - (b * b + c * c + d * d)   # a 180-degree rotation: w2 ~ 0 up to float32
        a = 0.0 if w2 < _W2_THRESHOLD else np.sqrt(w2)
        rotation = np.array([
            [a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)],
            [2 * (b * c + a * d), a * a + c * c - b * b - d * d, 2 * (c * d - a * b)],
            [2 * (b * d - a * c), 2 * (c * d + a * b), a * a + d * d - c * c - b * b]])
        zooms = np.array(h["pixdim"][1:4], dtype=np.float64)
        qfac = -1.0 if float(h["pixdim"][0]) < 0 else 1.0
        zooms[2] *= qfac
        out = np.eye(4)
        out[:3, :3] = rotation * zooms
        out[:3, 3] = [float(h[k]) for k in ("qoffset_x", "qoffset_y", "qoffset_z")]
        return out

    def sform(self) -> np.ndarray:
        """The sform affine (RAS): the three ``srow`` rows."""
        out = np.eye(4)
        out[:3] = np.stack([self.raw[k] for k in ("srow_x", "srow_y", "srow_z")]).astype(np.float64)
        return out

    def base(self) -> np.ndarray:
        """The Analyze fallback (no code set): zooms, x flipped, origin at the centre."""
        zooms = np.array(self.raw["pixdim"][1:4], dtype=np.float64)
        zooms[0] *= -1
        out = np.diag([*zooms, 1.0])
        out[:3, 3] = -(np.array(self.shape[:3], dtype=np.float64) - 1) / 2.0 * zooms
        return out

    def best(self) -> tuple[np.ndarray, str, tuple[str, ...]]:
        """nibabel's choice: (RAS affine, "sform"/"qform"/"base", notes)."""
        qcode, scode = self.codes
        if scode != 0:
            affine, notes = self.sform(), ()
            if qcode != 0 and not np.allclose(self.qform(), affine, atol=1e-4):
                notes = (f"sform used (code {scode}); the qform (code {qcode}) disagrees",)
            return affine, "sform", notes
        if qcode != 0:
            return self.qform(), "qform", ()
        return self.base(), "base", ("neither qform nor sform set: Analyze fallback affine",)

    def rescale(self) -> tuple[float, float] | None:
        """(scl_slope, scl_inter), or None when the header asks for none (slope 0 or
        non-finite, as NIfTI and nibabel read it; identity 1/0 is None too)."""
        slope, inter = float(self.raw["scl_slope"]), float(self.raw["scl_inter"])
        if slope == 0 or not np.isfinite(slope):
            return None
        if not np.isfinite(inter):
            inter = 0.0
        return None if (slope, inter) == (1.0, 0.0) else (slope, inter)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def parse_header(block: bytes, path: str | Path) -> NiftiHeader:
    """The header of ``path`` from its first bytes (at least 348), checked."""
    if len(block) < HEADER_SIZE:
        raise NiftiError(f"{path}: too short for a NIfTI-1 header", expected="348 header bytes",
                         found=f"{len(block)} bytes",
                         fix="the file is truncated or not NIfTI: download or convert it again")
    size = int.from_bytes(block[:4], "little")
    if size == HEADER_SIZE:
        order = "<"
    elif int.from_bytes(block[:4], "big") == HEADER_SIZE:
        order = ">"
    elif size == 540 or int.from_bytes(block[:4], "big") == 540:
        raise NiftiError(f"{path}: a NIfTI-2 file", expected="NIfTI-1 (sizeof_hdr 348)",
                         found="sizeof_hdr 540 (NIfTI-2)",
                         fix="convert it to NIfTI-1 (e.g. nibabel.Nifti1Image) or open an issue")
    else:
        raise NiftiError(f"{path}: not a NIfTI-1 header", expected="sizeof_hdr 348",
                         found=f"{size} (first bytes {block[:8]!r})",
                         fix="check the file is a .nii/.nii.gz volume and not truncated")
    raw = np.frombuffer(block[:HEADER_SIZE], dtype=header_dtype(order))[0]
    if raw["magic"] not in (b"n+1", b"ni1"):
        raise NiftiError(f"{path}: unknown NIfTI magic", expected="'n+1' (single file)",
                         found=repr(bytes(raw["magic"])),
                         fix="pass the .nii/.nii.gz file (a .hdr/.img pair: convert it first)")
    if raw["magic"] == b"ni1":
        raise NiftiError(f"{path}: a .hdr/.img pair header", expected="a single .nii/.nii.gz",
                         found="magic 'ni1'", fix="convert the pair to one .nii.gz")
    dim = [int(v) for v in raw["dim"]]
    ndim = dim[0]
    if not 1 <= ndim <= 7 or any(v < 1 for v in dim[1:ndim + 1]):
        raise NiftiError(f"{path}: the header's dim is not a valid shape",
                         expected="dim[0] in 1..7 and positive sizes", found=str(dim),
                         fix="the header is corrupt: convert the volume again")
    shape = tuple(dim[1:ndim + 1]) + (1,) * max(0, 3 - ndim)
    if any(v != 1 for v in shape[3:]):
        raise NiftiError(f"{path}: a {ndim}-D NIfTI ({'x'.join(map(str, shape))})",
                         expected="one 3-D volume", found=f"dim {shape}",
                         fix="split it into 3-D volumes (e.g. nibabel.four_to_three)")
    code = int(raw["datatype"])
    if code not in DATATYPES:
        raise NiftiError(f"{path}: unsupported NIfTI datatype {code}",
                         expected=", ".join(f"{c} ({t})" for c, t in DATATYPES.items()),
                         found=str(code), fix="convert the voxels to an integer or float type")
    vox_offset = float(raw["vox_offset"])
    if not np.isfinite(vox_offset) or vox_offset < HEADER_SIZE or vox_offset != int(vox_offset):
        raise NiftiError(f"{path}: invalid vox_offset", expected="an integer >= 348",
                         found=str(vox_offset), fix="the header is corrupt: convert it again")
    return NiftiHeader(raw, order, shape[:3], np.dtype(order + DATATYPES[code]), int(vox_offset))


def read_nifti_array(path: str | Path) -> tuple[NiftiHeader, np.ndarray]:
    """The header and the stored voxels of ``path`` as a writable array ``(nx, ny, nz)`` in
    the file's own index order (Fortran order over the decoded bytes; no scaling applied).
    The voxels are decoded straight into their array: a one-member ``.nii.gz`` in one call,
    any other file piece by piece."""
    with _Voxels(path) as source:
        header = source.header
        flat = source.whole()
        if flat is None:
            flat = allocate(header.nbytes, np.uint8, populate=source.vouched)
            source.read_into(flat)
    return header, flat.view(header.dtype).reshape(header.shape, order="F")


class _Voxels:
    """An open NIfTI file (``.nii`` or ``.nii.gz``), its header parsed and checked against the
    file's size, positioned at its voxels. The compressed bytes are read a small piece at a
    time into one reused buffer (no copy of the whole file in memory) and inflated straight
    into the caller's array, never more than the header's data size."""

    def __init__(self, path):
        self.path = Path(path)
        self._file = self._inflater = None
        try:
            self._file = open(self.path, "rb", buffering=0)
            self.gz = self._file.read(2) == b"\x1f\x8b"
            self._file.seek(0)
            size = os.fstat(self._file.fileno()).st_size
            if self.gz:
                self._inflater = GzipPieces(self._file, _PIECE)
            head = np.empty(HEADER_SIZE, dtype=np.uint8)
            self.header = parse_header(head[:self._fill(head)].tobytes(), self.path)
            need = self.header.vox_offset + self.header.nbytes
            room = size * _DEFLATE_RATIO + 1024 if self.gz else size
            if need > room:
                raise NiftiError(
                    f"{self.path}: the header claims more voxels than the file can hold",
                    expected=f"at most {room:,} bytes of data in a {size:,}-byte "
                             f"{'gzip ' if self.gz else ''}file",
                    found=f"shape {self.header.shape} of {self.header.dtype.name} = {need:,} "
                          "bytes",
                    fix="the header or the file is corrupt (truncated download?): fetch it again")
            #: whether the file's size vouches for the data (else pages come as data fills them)
            self.vouched = not self.gz or need <= _USUAL_RATIO * size
            self._need, self._got = need, HEADER_SIZE
            self._skip(self.header.vox_offset - HEADER_SIZE)
        except OSError as exc:
            self.close()
            raise self._unreadable(exc) from exc
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def whole(self) -> np.ndarray | None:
        """The voxels (flat uint8, the file's order) of a one-member ``.nii.gz`` inflated in
        one call (:func:`~radharmony.imaging.inflate.inflate_gzip_into`, ~1.8x the piece by
        piece inflate); None for any other file: :meth:`read_into` then reads it."""
        if not (self.gz and self.vouched):
            return None
        out = allocate(self._need, np.uint8, populate=False)
        return out[self.header.vox_offset:] if inflate_gzip_into(self.path, out) else None

    def read_into(self, target: np.ndarray) -> None:
        """Fill ``target`` (the header's shape in the file's (k, j, i) or (i, j, k) Fortran
        order: any writable view of the right size) with the voxels. A C-contiguous (k, j, i)
        target or any contiguous flat buffer is decoded into directly; any other view (the
        canonical order seen from the file) a slab of k-slices at a time, each written out
        while it is in cache. A file that ends early is named."""
        try:
            if target.flags.c_contiguous or target.ndim == 1:
                self._exact(target.reshape(-1).view(np.uint8))
                return
            depth = target.shape[0]
            step = max(1, _SLAB // max(1, target[0].nbytes))
            slab = np.empty((min(step, depth),) + target.shape[1:], dtype=target.dtype)
            for k in range(0, depth, step):
                part = slab[:min(step, depth - k)]
                self._exact(part.reshape(-1).view(np.uint8))
                target[k:k + len(part)] = part
        except OSError as exc:
            raise self._unreadable(exc) from exc

    def _exact(self, out: np.ndarray) -> None:
        got = self._fill(out)
        self._got += got
        if got < len(out):
            raise NiftiError(
                f"{self.path}: the file is truncated",
                expected=f"{self._need:,} bytes (header + {self.header.shape} "
                         f"{self.header.dtype.name})",
                found=f"{self._got:,} bytes", fix="download or convert the file again")

    def _skip(self, count: int) -> None:
        if count <= 0:
            return
        if not self.gz:
            self._file.seek(count, os.SEEK_CUR)
            return
        scratch = np.empty(count, dtype=np.uint8)    # extensions: small
        self._got += self._fill(scratch)

    def _fill(self, out: np.ndarray) -> int:
        """Decode into ``out`` (uint8) until it is full or the file ends; the bytes written."""
        got, limit = 0, len(out)
        if not self.gz:
            view = memoryview(out)
            while got < limit:      # one read returns at most ~2 GiB
                count = self._file.readinto(view[got:])
                if not count:
                    break
                got += count
            return got
        try:
            return self._inflater.fill(out)
        except ZLIB_ERRORS as exc:
            raise NiftiError(f"{self.path}: the gzip stream is corrupt",
                             expected="a valid .nii.gz", found=str(exc),
                             fix="download or convert the file again") from exc

    def _unreadable(self, exc: OSError) -> ImageReadError:
        return ImageReadError(f"Cannot read the NIfTI file {self.path}",
                              expected="a readable file", found=f"{type(exc).__name__}: {exc}",
                              fix="check the path and permissions")


def nifti_geometry(header: NiftiHeader) -> tuple[np.ndarray, str, tuple[str, ...]]:
    """The LPS affine of the file's index order (i, j, k), the transform used, notes."""
    affine, used, notes = header.best()
    return _RAS_TO_LPS @ affine, used, notes



def read_nifti(path: str | Path, *, rescale: tuple[float, float] | None = None,
               ct: bool = False, check: bool = True):
    """The :class:`~radharmony.volumes.Volume` of a ``.nii``/``.nii.gz`` file, canonical.

    Intensity: the header's ``scl_slope``/``scl_inter`` when set (slope 0 or 1/0: none), or
    ``rescale`` = (slope, intercept) from side metadata (CT-RATE's v1 CSV) -- never both: a
    header that already scales and a ``rescale`` given raises (it would be applied twice).
    ``ct=True`` checks the result is Hounsfield units (:func:`~.checks.check_hu`; ``check``
    turns that off). The provenance names the transform used (sform, qform or base).

    >>> volume = read_nifti("ct.nii.gz", ct=True)             # doctest: +SKIP
    >>> volume.source.notes                                   # doctest: +SKIP
    ('sform used (code 1)',)
    """
    from .checks import apply_rescale, as_hu, check_hu
    from .geometry import canonical_target, flips_only, to_canonical_in_place
    from .volume import Volume, VolumeSource, check_affine

    with _Voxels(path) as voxels:
        header = voxels.header
        affine, used, notes = nifti_geometry(header)
        own = header.rescale()
        if rescale is not None and own is not None:
            raise NiftiError(
                f"{path}: a rescale was passed but the header already scales the values",
                expected="one rescale: the header's scl_slope/scl_inter or the side metadata's",
                found=f"header {own}, passed {tuple(rescale)}",
                fix="pass rescale=None (the header's is applied) or fix the metadata")
        applied = tuple(float(v) for v in rescale) if rescale is not None else own
        notes = (f"{used} used (code {header.codes[1 if used == 'sform' else 0]})"
                 if used != "base" else "base affine",) + notes
        source = VolumeSource(files=(str(path),), reader="nifti", rescale=applied, notes=notes)
        check_affine(affine, f"{path} (the {used} transform)")
        # the file's Fortran-order voxels are C-order (k, j, i): inflated whole and flipped in
        # place when the canonical order is the file's up to flips, else decoded a slab at a
        # time straight into the canonical array through its view in the file's order
        stored, to_file = header.shape[::-1], affine @ _REVERSE
        flat = voxels.whole() if flips_only(stored, to_file) else None
        if flat is not None:
            ordered, canonical = to_canonical_in_place(
                flat.view(header.dtype).reshape(stored), to_file)
        else:
            ordered, target, canonical = canonical_target(
                stored, to_file, lambda shape: allocate(shape, header.dtype,
                                                        populate=voxels.vouched))
            voxels.read_into(target)
    array = apply_rescale(ordered, *(applied or (None, None)))
    if ct:
        array = as_hu(array)
        if check:
            check_hu(array, path)
    return Volume.from_array(array, canonical, source=source)


#: (k, j, i) index -> (i, j, k): the C-order view of the file's Fortran-order voxels
_REVERSE = np.array([[0, 0, 1, 0], [0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1]], dtype=np.float64)
