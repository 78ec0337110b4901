"""What the viewer shows of a volume: one plane's slice at a time, windowed, from the cache.

A volume is looked at in three planes of its canonical array ``(D, H, W)`` (running toward S,
P, L; ``docs/volumes.md``), each drawn as radiologists read it:

* ``axial`` (a fixed ``d``): rows ``h`` (anterior at the top), columns ``w`` (the patient's
  left on the right of the screen);
* ``coronal`` (a fixed ``h``): rows ``d`` from superior (top) down, columns ``w``;
* ``sagittal`` (a fixed ``w``): rows ``d`` from superior down, columns ``h`` (anterior left).

One PNG is one plane's slice at its voxel resolution (:func:`slice_png`); the page stretches it
to the true aspect ratio from the spacing (:func:`volume_info`). Slices are read from the
volume cache's stored Blosc2 array (:meth:`radharmony.volumes.cache.VolumeCache.stored`), so a
slice reads only the chunks it crosses (a coronal or sagittal plane: one slab of chunks) and
the volume never leaves the server whole. A dataset without a cache is read once and kept in a
small LRU.

A window is ``level`` / ``width`` in the volume's values (Hounsfield units for CT):
:data:`WINDOWS` holds the presets. Masks come from the dataset's ``source_mask(index)`` hook,
boxes and points from its ``annotations(index)`` hook (source canonical voxel coordinates; the
page draws them on every plane they cross).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from .answers import NotFound, ViewerError

PLANES = ("axial", "coronal", "sagittal")
#: window presets: name -> (level, width), in Hounsfield units
WINDOWS = {"lung": (-600.0, 1500.0), "mediastinum": (40.0, 400.0), "bone": (400.0, 1800.0)}
#: mask label colours (RGB), label ``v`` takes ``PALETTE[(v - 1) % len(PALETTE)]``
PALETTE = np.array([(230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200),
                    (245, 130, 48), (145, 30, 180), (70, 240, 240), (240, 50, 230),
                    (210, 245, 60), (250, 190, 190), (0, 128, 128), (170, 110, 40)], np.uint8)
MASK_ALPHA = 110
#: what a mixture record's image names when it is a volume (a folder too: a DICOM series)
VOLUME_SUFFIXES = (".nii", ".nii.gz", ".npy", ".b2nd")


def is_volume_split(dataset) -> bool:
    """Whether ``dataset``'s rows are volumes (``spec.row_unit == "volume"``)."""
    return getattr(getattr(dataset, "spec", None), "row_unit", "image") == "volume"


def plane_slice(array, plane: str, index: int) -> np.ndarray:
    """Slice ``index`` of ``plane`` of a ``(D, H, W)`` array (numpy or Blosc2: only that slice
    is read), oriented for display (see the module docs)."""
    if plane == "axial":
        out = array[index, :, :]
    elif plane == "coronal":
        out = array[:, index, :][::-1]
    elif plane == "sagittal":
        out = array[:, :, index][::-1]
    else:
        raise ViewerError(f"Unknown plane {plane!r}", expected=f"one of {list(PLANES)}",
                          found=repr(plane))
    return np.ascontiguousarray(out)


def plane_count(shape, plane: str) -> int:
    """How many slices ``plane`` has in a ``(D, H, W)`` volume."""
    return int(shape[PLANES.index(plane)])


def windowed(arr: np.ndarray, level: float, width: float) -> np.ndarray:
    """``arr`` through the window ``level`` / ``width`` as uint8 (below: 0, above: 255)."""
    lo = level - width / 2.0
    scaled = (arr.astype(np.float32) - np.float32(lo)) * np.float32(255.0 / max(width, 1e-6))
    return np.clip(scaled, 0, 255).round().astype(np.uint8)


def parse_window(q: dict) -> tuple[float, float]:
    """``(level, width)`` from a request: ``window=<preset>`` or ``level=`` and ``width=``."""
    name = q.get("window")
    if name and name != "custom":
        if name not in WINDOWS:
            raise ViewerError(f"Unknown window {name!r}",
                              expected=f"one of {sorted(WINDOWS)} or custom", found=repr(name))
        return WINDOWS[name]
    try:
        level, width = float(q.get("level", 40)), float(q.get("width", 400))
    except ValueError:
        raise ViewerError("A custom window is two numbers", expected="level=<HU>&width=<HU>",
                          found=f"{q.get('level')!r}, {q.get('width')!r}") from None
    if not (np.isfinite(level) and np.isfinite(width) and width > 0):
        raise ViewerError("A window's width must be positive", expected="width > 0",
                          found=f"level={level}, width={width}")
    return level, width


def mask_rgba(labels: np.ndarray) -> np.ndarray:
    """A label slice as RGBA: each label its :data:`PALETTE` colour, background transparent."""
    labels = np.asarray(labels)
    out = np.zeros(labels.shape + (4,), np.uint8)
    on = labels > 0
    out[on, :3] = PALETTE[(labels[on].astype(np.int64) - 1) % len(PALETTE)]
    out[on, 3] = MASK_ALPHA
    return out


def rgba_png(rgba: np.ndarray) -> bytes:
    """An ``(H, W, 4)`` RGB-ordered array as PNG bytes."""
    import cv2

    ok, buf = cv2.imencode(".png", cv2.cvtColor(rgba, cv2.COLOR_RGBA2BGRA))
    if not ok:  # pragma: no cover
        raise ViewerError("Could not encode the mask as PNG")
    return buf.tobytes()


def _float_list(values, width: int) -> list[list[float]]:
    arr = np.asarray(values, np.float64).reshape(-1, width)
    return arr.tolist()


def annotations_json(found: dict | None) -> dict:
    """A dataset's ``annotations(index)`` (the 3-D annotation contract) as JSON lists:
    ``{"boxes": [{"label", "box": [x0, y0, z0, x1, y1, z1]}], "points": [{"label",
    "point": [x, y, z]}]}`` in source canonical voxels (x along W, y along H, z along D)."""
    found = found or {}
    boxes = _float_list(found.get("boxes", np.zeros((0, 6))), 6)
    points = _float_list(found.get("points", np.zeros((0, 3))), 3)
    box_labels = list(found.get("box_labels") or [""] * len(boxes))
    point_labels = list(found.get("point_labels") or [""] * len(points))
    return {"boxes": [{"label": str(lab), "box": b} for b, lab in zip(boxes, box_labels)],
            "points": [{"label": str(lab), "point": p} for p, lab in zip(points, point_labels)]}


def record_annotations(fields: dict, shape, spacing) -> dict:
    """A 3-D grounded mixture record's boxes (``fields["boxes3d"]``, source canonical voxels,
    with ``box_labels``) as :func:`annotations_json` gives them, when the volume shown is the
    grid they were drawn on (``frame3d``'s shape and spacing); none, with a ``boxes_note``,
    when it is another grid (a preset's output named by an export)."""
    boxes = fields.get("boxes3d")
    if not boxes:
        return {}
    frame = fields.get("frame3d") or {}
    want = [int(n) for n in frame.get("shape", ())]
    want_mm = np.linalg.norm(np.asarray(frame.get("source_affine", np.eye(4)),
                                        np.float64)[:3, :3], axis=0)
    if want != list(shape) or not np.allclose(want_mm, spacing, atol=1e-3):
        return {"boxes": [], "points": [],
                "boxes_note": f"the record's boxes lie on a {want} grid, not on this volume's "
                              f"{list(shape)}: not drawn"}
    return annotations_json({"boxes": boxes, "box_labels": fields.get("box_labels")})


class VolumeSource:
    """One volume the page looks at: ``array`` (the cache's stored Blosc2 array, or numpy),
    ``spacing`` (mm, ``(d, h, w)``), and its dataset row for the mask and annotations."""

    def __init__(self, array, affine, *, dataset=None, index: int | None = None):
        self.array, self.dataset, self.index = array, dataset, index
        self.shape = tuple(int(n) for n in array.shape)
        self.spacing = tuple(float(s) for s in
                             np.linalg.norm(np.asarray(affine, np.float64)[:3, :3], axis=0))
        self._mask = None
        self._lock = threading.Lock()

    def check(self, plane: str, index) -> int:
        """``index`` as a slice number of ``plane``, or a :class:`NotFound`."""
        if plane not in PLANES:
            raise ViewerError(f"Unknown plane {plane!r}", expected=f"one of {list(PLANES)}",
                              found=repr(plane))
        n = plane_count(self.shape, plane)
        try:
            k = int(index)
        except (TypeError, ValueError):
            raise ViewerError("A slice is addressed by number", expected="slice=<integer>",
                              found=repr(index)) from None
        if not 0 <= k < n:
            raise NotFound(f"Slice {k} is out of range for the {plane} plane",
                           expected=f"0 to {n - 1}", found=str(k))
        return k

    def slice_png(self, plane: str, index, level: float, width: float) -> bytes:
        """Slice ``index`` of ``plane`` through the window, as 8-bit grayscale PNG bytes."""
        from .answers import png8

        k = self.check(plane, index)
        return png8(windowed(plane_slice(self.array, plane, k), level, width))

    @property
    def has_mask(self) -> bool:
        return self.dataset is not None and callable(getattr(self.dataset, "source_mask", None))

    def mask(self) -> np.ndarray:
        """The dataset's label map on this volume's grid (read once)."""
        with self._lock:
            if self._mask is None:
                if not self.has_mask:
                    raise NotFound("This volume has no mask", expected="a dataset with a "
                                   "source_mask(index) hook", found="none")
                mask = np.asarray(self.dataset.source_mask(self.index))
                if mask.shape != self.shape:
                    raise ViewerError("The mask is not on the volume's grid",
                                      expected=f"shape {self.shape}", found=f"{mask.shape}",
                                      fix="view the dataset without a preset")
                self._mask = mask
            return self._mask

    def mask_png(self, plane: str, index) -> bytes:
        """Slice ``index`` of ``plane`` of the mask as RGBA PNG bytes (transparent background)."""
        k = self.check(plane, index)
        return rgba_png(mask_rgba(plane_slice(self.mask(), plane, k)))

    def mask_legend(self, plane: str, index) -> list[dict]:
        """The labels of the mask on slice ``index`` of ``plane``: ``[{"value", "name",
        "colour"}]`` (names from the dataset's ``structures``, else the value)."""
        k = self.check(plane, index)
        names = list(getattr(self.dataset, "structures", None) or [])
        values = np.unique(plane_slice(self.mask(), plane, k))
        return [{"value": int(v), "name": names[v - 1] if v <= len(names) else str(int(v)),
                 "colour": "#%02x%02x%02x" % tuple(PALETTE[(int(v) - 1) % len(PALETTE)])}
                for v in values.tolist() if v > 0]

    def annotations(self) -> dict:
        hook = getattr(self.dataset, "annotations", None)
        return annotations_json(hook(self.index) if callable(hook) else None)

    def info(self) -> dict:
        """What the page needs to draw the three planes (no voxels)."""
        return {"shape": list(self.shape), "spacing": list(self.spacing),
                "planes": list(PLANES), "windows": {k: list(v) for k, v in WINDOWS.items()},
                "has_mask": self.has_mask, **self.annotations()}


def open_volume(dataset, index: int) -> VolumeSource:
    """Row ``index`` of a volume dataset, canonical (no preset): the cache's stored array
    (stored first when absent) or, without a cache, the volume read whole."""
    cache = getattr(dataset, "volume_cache", None)
    if cache is not None:
        inputs, load, params = dataset.job(index)
        array, meta = cache.stored(inputs, params, load)
        return VolumeSource(array, meta["affine"], dataset=dataset, index=index)
    volume = dataset.read_volume(index)
    return VolumeSource(volume.array, volume.affine, dataset=dataset, index=index)


def is_volume_file(rel: str, path) -> bool:
    """Whether a record's image ``rel`` (the file ``path``) names a volume: a
    :data:`VOLUME_SUFFIXES` file or a folder (a DICOM series)."""
    import os

    return str(rel).lower().endswith(VOLUME_SUFFIXES) or os.path.isdir(path)


def open_volume_file(path, *, spacing=None) -> VolumeSource:
    """The volume a mixture record names: a volume cache entry (``.b2nd``, memory-mapped,
    its geometry from the entry), a canonical ``(D, H, W)`` ``.npy`` array (memory-mapped;
    ``spacing`` from the record's fields, else 1 mm), or a NIfTI file or DICOM folder read
    whole (:func:`radharmony.volumes.read_volume`, without the Hounsfield check: a page shows
    what the file holds)."""
    name = str(path).lower()
    if name.endswith(".b2nd"):
        from ..volumes.cache import require_blosc2

        array = require_blosc2().open(str(path), mode="r", mmap_mode="r")
        meta = dict(array.vlmeta["radharmony"]).get("meta", {}) \
            if "radharmony" in array.vlmeta else {}
        return VolumeSource(array, meta.get("affine", np.eye(4)))
    if name.endswith(".npy"):
        array = np.load(path, mmap_mode="r", allow_pickle=False)
        if array.ndim != 3:
            raise ViewerError(f"{path} is not a volume", expected="a 3-D (D, H, W) array",
                              found=f"shape {array.shape}")
        return VolumeSource(array, np.diag([*(spacing or (1.0, 1.0, 1.0)), 1.0]))
    from ..volumes import read_volume

    volume = read_volume(path, check=False)  # shown as it is (a phantom has no air)
    return VolumeSource(volume.array, volume.affine)


class VolumeSources:
    """The volumes most recently looked at, keyed by ``(split, index)`` (a small LRU)."""

    def __init__(self, size: int = 4):
        self.size = size
        self._open: OrderedDict[tuple, VolumeSource] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple, make) -> VolumeSource:
        with self._lock:
            if key in self._open:
                self._open.move_to_end(key)
                return self._open[key]
        found = make()
        with self._lock:
            self._open[key] = found
            while len(self._open) > self.size:
                self._open.popitem(last=False)
        return found



def route(app, path: str, q: dict):
    """``(body, content type)`` for a volume route, or None for another path:
    ``/volume.png?split=&index=&plane=&slice=&window=`` (or ``level=&width=``),
    ``/volume_mask.png?split=&index=&plane=&slice=`` and ``/api/volume_mask_legend?...`` (the
    labels on that slice)."""
    if path not in ("/volume.png", "/volume_mask.png", "/api/volume_mask_legend"):
        return None
    source = app.volume(split=q.get("split"), index=q.get("index"), sample_id=q.get("id"))
    plane = q.get("plane", "axial")
    if path == "/api/volume_mask_legend":
        import json

        return json.dumps(source.mask_legend(plane, q.get("slice"))).encode(), \
            "application/json"
    if path == "/volume_mask.png":
        return source.mask_png(plane, q.get("slice")), "image/png"
    return source.slice_png(plane, q.get("slice"), *parse_window(q)), "image/png"


__all__ = ["PLANES", "VOLUME_SUFFIXES", "WINDOWS", "VolumeSource", "VolumeSources",
           "annotations_json", "is_volume_file", "is_volume_split", "mask_rgba", "open_volume",
           "open_volume_file", "parse_window", "plane_slice", "record_annotations", "route",
           "windowed"]
