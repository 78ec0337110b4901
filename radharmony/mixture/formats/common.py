"""What every trainer format shares: records streamed from ``records.parquet`` a row group at a
time, the image each entry refers to, the cached images written as PNGs, the output written
atomically with the same bytes for the same records.

Image references (:meth:`Export.ref`):

* images ``"original"``: the source file's absolute path (the source's root from
  ``mixture.json`` joined with the record's ``image_path``), or, with ``image_folder``, that
  path relative to ``image_folder`` (every root must then lie under it);
* images ``"cache"``: the letterboxed image as the cache holds it (``images.size`` of the
  manifest), written losslessly as a PNG at ``<image_folder>/<source>/<image_path>.png``
  (``image_folder`` defaults to ``<dest's folder>/images``) and referenced relative to
  ``image_folder``: the folder a trainer's ``--image_folder`` names. Each image is written
  once however many entries share it, by this process, worker processes or Ray tasks; the
  bytes are the same either way.

Every format's trainer opens an image with PIL (``Image.open(path).convert("RGB")``). PIL reads
no DICOM, and it clips a 16-bit PNG to 255 rather than rescaling it (a radiograph stored in 12
bits comes out nearly all white). So with original images, a DICOM source image is refused
(:class:`~radharmony.errors.ExportError`, before the file is written: export with
``images="cache"``), and the first image of each source is read for its header: a source of
16-bit PNGs gets one :class:`~radharmony.export.DeepImageWarning`.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import warnings
from collections import Counter
from pathlib import Path
from typing import Iterator

import orjson

from ...errors import check_choice
from ...export.codec import ExportError, png_bytes
from ..reading import dictionary_paths, table_records
from ..images import SourceImages, image_size
from ..records import RECORDS_NAME, source_roots
from .inputs import fields

IMAGE_MODES = ("original", "cache")
ENGINES = ("local", "ray")
#: images per PNG-writing task
CHUNK = 64
#: the suffixes of DICOM files (PIL opens none of them)
DICOM_SUFFIXES = (".dcm", ".dicom", ".DCM", ".DICOM")


def dumps(value) -> bytes:
    """Compact JSON bytes (no spaces, UTF-8 kept, NaN as null): the same bytes every time."""
    return orjson.dumps(value)


def record_batches(out: Path, columns: list[str], split: str | None) -> Iterator[list[dict]]:
    """The records of ``out/records.parquet`` (only ``columns``), one row group at a time, in
    file order; only ``split``'s when given."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = out / RECORDS_NAME
    try:
        pf = pq.ParquetFile(path, read_dictionary=dictionary_paths(
            dict.fromkeys([*columns, "split"])))
    except (OSError, ValueError) as exc:
        raise ExportError(f"Cannot read the mixture's records {path}",
                          expected=f"{RECORDS_NAME} written by radharmony mix build",
                          found=f"{type(exc).__name__}: {exc}",
                          fix="point at the folder `radharmony mix build` wrote") from None
    cols = list(dict.fromkeys([*columns, "split"]))
    for g in range(pf.num_row_groups):
        table = pf.read_row_group(g, columns=cols)
        if split is not None:
            table = table.filter(pc.equal(table.column("split"), split))
        yield table_records(table)


class Export:
    """One export's settings, its image references and what it skipped (see the module doc)."""

    def __init__(self, out: Path, manifest: dict, dest: Path, *, images: str | None,
                 image_folder, cache_dir, workers: int | None, engine: str, fmt: str = "",
                 dialect: str | None = None, variant: str | None = None):
        self.out, self.manifest, self.dest, self.fmt = out, manifest, dest, fmt
        self.variant = variant  # the trainer's loader, where the format has several (R2Gen)
        self.dialect = dialect  # the format's own box dialect (None: the build's)
        self._looked: set[str] = set()  # sources whose first original image was read
        mode = images if images is not None else (manifest.get("images") or {}).get(
            "mode", "original")
        self.mode = check_choice("images", mode, IMAGE_MODES, error=ExportError)
        self.engine = check_choice("engine", engine, ENGINES, error=ExportError)
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                    or workers < 0):
            raise ExportError("workers must be None, 0 or a positive integer",
                              expected="e.g. 8 (processes writing PNGs)", found=repr(workers),
                              fix="pass workers=None (this process)")
        self.workers = workers or 0
        self.roots = source_roots(manifest)
        self._prefix = {k: os.path.join(v, "") for k, v in self.roots.items()}
        self.folder = Path(image_folder) if image_folder is not None else \
            (dest.parent / "images" if self.mode == "cache" else None)
        self.size = image_size(manifest) if self.mode == "cache" else None
        self.cache_dir = cache_dir
        self.skipped: Counter = Counter()
        self.boxes: Counter = Counter()  # boxes written again: rewritten, clipped, dropped
        self._sizes: dict = {}  # (source, path) -> (width, height) of an original image
        self.pending: list[tuple[str, str]] = []
        self.seen: set[int] = set()
        self.written = 0
        self._images: SourceImages | None = None
        self._pool = None
        self._ray = self._session = None

    # -- references ---------------------------------------------------------------------------
    def ref(self, source: str, path: str) -> str:
        """The reference an entry writes for source ``source``'s image ``path``."""
        if self.mode == "cache":
            key = hash((source, path))
            if key not in self.seen:
                self.seen.add(key)
                self.pending.append((source, path))
            return f"{source}/{path}.png"
        prefix = self._prefix.get(source)
        if prefix is None:
            raise ExportError(f"A record names the source {source!r}, which mixture.json "
                              "does not list", expected=f"one of {sorted(self.roots)}",
                              found=repr(source), fix="rebuild the mixture: records.parquet "
                              "and mixture.json come from one build")
        full = prefix + path  # os.path.join(root, path) for a relative path
        if path.endswith(DICOM_SUFFIXES):
            self._refuse_dicom(source, full)
        if source not in self._looked:
            self._looked.add(source)
            self._look(source, full)
        if self.folder is None:
            return full
        rel = os.path.relpath(full, self.folder)
        if rel.startswith(".."):
            raise ExportError(f"The image {full} is not under image_folder {self.folder}",
                              expected="every source root under image_folder",
                              found=f"the root {self.roots[source]}",
                              fix="pass a common parent folder of the roots, or "
                                  "image_folder=None (absolute paths)")
        return rel

    def image_size(self, source: str, path: str) -> tuple[int, int]:
        """``(width, height)`` of the image an entry names: the cached square, or the
        original file's from its header (read once per image)."""
        if self.mode == "cache":
            return self.size, self.size
        key = (source, path)
        if key not in self._sizes:
            from ..grounding import image_size

            h, w = image_size(self.roots[source], path)
            self._sizes[key] = (w, h)
        return self._sizes[key]

    def beside_dest(self, ref: str) -> str:
        """``ref`` relative to the written file's folder (a trainer that joins image paths to
        its dataset folder, not to an image folder); an absolute path as it is."""
        if os.path.isabs(ref):
            return ref
        return os.path.relpath(os.path.join(self.folder, ref), self.dest.parent)

    def _refuse_dicom(self, source: str, full: str):
        raise ExportError(f"The {self.fmt or 'trainer'} file would name DICOM files as "
                          f"images (source {source!r}: {full}), and its trainer opens images "
                          "with PIL, which reads no DICOM",
                          expected="PNG or JPEG image files", found="a DICOM file",
                          fix="export with images='cache' (--images cache): the letterboxed "
                              "8-bit PNGs radharmony's cache holds, written once each")

    def _look(self, source: str, full: str) -> None:
        """Read the header of ``source``'s first original image: a DICOM is refused, a
        16-bit PNG warned of (an image not on this machine is not looked at)."""
        from ...export.decoders import DeepImageWarning, bit_depth
        from ...imaging.read import sniff

        try:
            with open(full, "rb") as fh:
                head = fh.read(132)
        except OSError:
            return
        if sniff(head) == "dicom":
            self._refuse_dicom(source, full)
        if bit_depth(head) > 8:  # the PNG's IHDR depth (the export's own header reader)
            warnings.warn(f"export_mixture({self.fmt or 'trainer'}): source {source!r} "
                          f"holds 16-bit PNGs ({full}, ...). The trainer opens them with PIL, "
                          "whose convert('RGB') clips every value above 255 to white instead "
                          "of rescaling: the model would see washed-out radiographs. Export "
                          "with images='cache' (--images cache: the 8-bit images radharmony "
                          "reads) or convert the files yourself", DeepImageWarning,
                          stacklevel=2)

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    # -- boxes --------------------------------------------------------------------------------
    def reframed(self, rec: dict) -> dict:
        """``rec`` with its boxes written for the image this export points at, in the
        format's dialect (:mod:`radharmony.mixture.reframe`); a record without boxes, or
        whose boxes are already there, as it is."""
        text = rec.get("fields")
        if not text or '"dialect":' not in text:
            return rec
        f = fields(rec)
        if f.get("dialect") is None or (not f.get("boxes") and self.dialect in (
                None, f["dialect"])):
            return rec
        from ..reframe import convert, new_frame, rewrite, written_frame

        old = written_frame(f)
        frame = new_frame(old, self.mode, self.size)
        want = self.dialect or f["dialect"]
        if want == f["dialect"]:
            if frame == old:
                return rec
            moved = rewrite(rec["record_id"], rec["prompt"], rec["target"], f, frame)
        else:
            moved = convert(rec["record_id"], rec["target"], f, frame, want)
            moved.prompt = rec["prompt"]
        self.boxes["rewritten"] += moved.boxes
        self.boxes["clipped"] += moved.clipped
        self.boxes["dropped"] += moved.dropped
        return {**rec, "prompt": moved.prompt, "target": moved.target}

    # -- PNGs ---------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write the PNGs of the images referred to since the last flush."""
        todo, self.pending = self.pending, []
        if not todo:
            return
        chunks = [todo[i:i + CHUNK] for i in range(0, len(todo), CHUNK)]
        args = (self.manifest, self.size, self.cache_dir)
        if self.engine == "ray":
            results = self._on_ray(chunks, args)
        elif self.workers:
            if self._pool is None:
                self._pool = cf.ProcessPoolExecutor(self.workers, initializer=_init,
                                                    initargs=args)
            results = self._pool.map(_encode, chunks)
        else:
            if self._images is None:
                _init(*args)
                self._images = _STATE["images"]
            results = map(_encode, chunks)
        for result in results:
            for rel, data in result:
                _write_png(self.folder / rel, data)
                self.written += 1

    def _on_ray(self, chunks, args):
        if self._ray is None:
            from ...data.precache_ray import ray_session

            self._session = ray_session(None, num_cpus=self.workers)
            ray, _ = self._session.__enter__()
            self._ray = (ray, ray.remote(num_cpus=1)(_ray_encode))
        ray, task = self._ray
        refs = [task.remote(args, chunk) for chunk in chunks]
        try:
            return [ray.get(r) for r in refs]
        except ray.exceptions.RayError as exc:
            raise ExportError("A Ray task writing the mixture's PNGs failed",
                              expected="every image readable",
                              found=f"{type(exc).__name__}: "
                              f"{str(exc).strip().splitlines()[-1][:300]}",
                              fix="fix the cause and export again") from None

    def close(self) -> None:
        """Stop the worker processes or the Ray session this export started."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._ray is not None:
            self._ray = None
            self._session.__exit__(None, None, None)

    def summary(self, fmt: str, entries: int, split: str | None) -> dict:
        return {"format": fmt, "dest": str(self.dest), "split": split, "entries": entries,
                "skipped": dict(sorted(self.skipped.items())),
                "boxes": {k: self.boxes[k] for k in ("rewritten", "clipped", "dropped")},
                "images": {"mode": self.mode, "size": self.size,
                           "folder": None if self.folder is None else str(self.folder),
                           "written": self.written}}


_STATE: dict = {}


def _init(manifest: dict, size: int, cache_dir) -> None:
    _STATE["images"] = SourceImages(manifest, size=size, cache_dir=cache_dir)


def _encode(chunk: list[tuple[str, str]]) -> list[tuple[str, bytes]]:
    """``(relative PNG path, PNG bytes)`` of each image of ``chunk``."""
    from ... import threads

    arrays = _STATE["images"].quantized(chunk)
    encoded = threads.each(lambda a: png_bytes(a, where="mixture export"), list(arrays))
    for value in encoded:
        if threads.raised(value) is not None:
            raise threads.raised(value)
    return [(f"{s}/{p}.png", data) for (s, p), data in zip(chunk, encoded)]


def _ray_encode(args: tuple, chunk: list) -> list[tuple[str, bytes]]:
    import cv2

    cv2.setNumThreads(1)
    if _STATE.get("args") != args:
        _init(*args)
        _STATE["args"] = args
    return _encode(chunk)


def _write_png(path: Path, data: bytes) -> None:
    try:
        if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
            return  # written by an earlier run: same bytes
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# -- output files -----------------------------------------------------------------------------
class Output:
    """The output file, written to a temporary file and renamed into place: a JSON list
    (``"[\\n" entry ",\\n" entry ... "\\n]\\n"``) or JSON lines."""

    def __init__(self, path: Path, *, lines: bool):
        self.path, self.lines, self.count, self.buffer = path, lines, 0, []
        path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        self.fh = open(self.tmp, "wb")
        if not lines:
            self.fh.write(b"[")

    def write(self, entry: dict) -> None:
        self.buffer.append(dumps(entry))
        if len(self.buffer) >= 4096:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        if self.lines:
            self.fh.write(b"\n".join(self.buffer) + b"\n")
        else:
            self.fh.write((b"\n" if not self.count else b",\n") + b",\n".join(self.buffer))
        self.count += len(self.buffer)
        self.buffer = []

    def close(self) -> None:
        self.flush()
        if not self.lines:
            self.fh.write(b"\n]\n" if self.count else b"]\n")
        self.fh.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        self.fh.close()
        Path(self.tmp).unlink(missing_ok=True)
