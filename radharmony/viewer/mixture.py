"""The mixture viewer (``radharmony mix view OUT``): a mixture's records as the trainer sees
them, served by the viewer's own server (the same token, loopback, read-only and same-site
rules as ``radharmony view``).

Routes, under the per-run ``/<token>/`` prefix:

* ``/`` -- the page (``static/mixture.html``, ``static/mixture.js``);
* ``/api/meta`` -- the mixture: name, records, sources, the filter values, formats;
* ``/api/records?task=&source=&split=&offset=&limit=`` -- one page of the filtered records;
* ``/api/record?id=<record_id>`` or ``?row=`` (``&format=llava|hf_chat``) -- one record: the
  rendering, its images' geometry, the boxes to draw, the prior study, the source row;
* ``/record.png?id=&j=&prior=0|1`` -- its ``j``-th image (or its prior's) as the trainer sees
  it (the original, or the cached letterboxed square);
* ``/record_volume.png?id=&j=&prior=&plane=&slice=&window=`` -- one plane's slice of a record's
  image that is a volume (``.nii``, ``.nii.gz``, ``.npy``, ``.b2nd`` or a DICOM folder), shown
  in three planes as ``radharmony view`` shows volumes (:mod:`radharmony.viewer.volumes`).

Records are addressed by id or row only; image files are only those a record names, inside
its source's root (``mixture.json``): anything else is refused (403).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from urllib.parse import quote

from ..errors import RadHarmonyError
from ..mixture.records import fields_of, source_roots
from .answers import NotFound, png8
from .mixture_index import RecordIndex
from .mixture_render import FORMATS, boxes_of, image_path, load_image, render
from .server import LOOPBACK, STATIC, ViewerHandler, ViewerServer, _json_body, _static
from .volumes import (VolumeSources, is_volume_file, open_volume_file, parse_window,
                      record_annotations)


class MixtureApp:
    """What the mixture page shows, independent of HTTP.

    ``size``: the long side an original image is shown at (a cached mixture's images are shown
    at the cache's size); ``dataset_viewers``: dataset key -> the address of a running
    ``radharmony view`` of it, for the link from a record to its source sample.
    """

    def __init__(self, out, *, page_size: int = 50, size: int = 224,
                 dataset_viewers: dict[str, str] | None = None, cached_images: int = 32):
        self.index = RecordIndex(out)
        self.manifest = self.index.manifest
        self.roots = source_roots(self.manifest)
        self.sources = {s["name"]: s for s in self.manifest.get("sources", [])}
        images = self.manifest.get("images") or {"mode": "original"}
        self.mode = str(images.get("mode", "original"))
        self.size = int(images.get("size", size)) if self.mode == "cache" else int(size)
        self.dialect = self.manifest.get("boxes")
        self.page_size = page_size
        self.dataset_viewers = dict(dataset_viewers or {})
        self._images: OrderedDict[tuple, tuple] = OrderedDict()
        self._cached, self._lock = cached_images, threading.Lock()
        self._volumes = VolumeSources()

    def meta(self) -> dict:
        return {"name": self.manifest.get("name"), "records": self.index.n,
                "row_groups": len(self.index.group_rows), "page_size": self.page_size,
                "choices": self.index.choices(), "formats": FORMATS,
                "images": {"mode": self.mode, "size": self.size}, "boxes": self.dialect,
                "sources": [{"name": s["name"], "dataset": s.get("dataset"),
                             "split": s.get("split")} for s in self.sources.values()]}

    def records(self, *, task=None, source=None, split=None, offset=0, limit=None) -> dict:
        return self.index.page(task=task, source=source, split=split, offset=offset,
                               limit=self.page_size if limit is None else limit)

    # -- one record ---------------------------------------------------------------------------------
    def _paths(self, rec: dict, fields: dict, prior: bool) -> list[str]:
        return list((fields.get("prior_image_paths") if prior else rec["image_paths"]) or [])

    def _image(self, rec: dict, fields: dict, j: int, prior: bool):
        """``(8-bit array, Shown)`` of image ``j`` (or the prior's), kept in a small LRU."""
        key = (rec["record_id"], prior, j)
        with self._lock:
            if key in self._images:
                self._images.move_to_end(key)
                return self._images[key]
        paths = self._paths(rec, fields, prior)
        if not 0 <= j < len(paths):
            raise NotFound(f"Record {rec['record_id']} has no {'prior ' if prior else ''}"
                           f"image {j}", expected=f"0 to {len(paths) - 1}", found=str(j))
        found = load_image(image_path(self.roots, rec, paths[j]), mode=self.mode,
                           size=self.size)
        with self._lock:
            self._images[key] = found
            while len(self._images) > self._cached:
                self._images.popitem(last=False)
        return found

    def _volume(self, rec: dict, fields: dict, j: int, prior: bool):
        """The :class:`~radharmony.viewer.volumes.VolumeSource` of image ``j`` when it names a
        volume, else None."""
        paths = self._paths(rec, fields, prior)
        if not 0 <= j < len(paths):
            return None
        path = image_path(self.roots, rec, paths[j])
        if not is_volume_file(paths[j], path):
            return None
        return self._volumes.get((str(path), tuple(fields.get("spacing") or ())), lambda:
                                 open_volume_file(path, spacing=fields.get("spacing")))

    def _images_json(self, rec: dict, fields: dict, prior: bool) -> list[dict]:
        views = [] if prior else list(rec.get("views") or [])
        out = []
        for j, rel in enumerate(self._paths(rec, fields, prior)):
            item = {"j": j, "path": rel, "view": views[j] if j < len(views) else None,
                    "width": None, "height": None, "error": None, "volume": None}
            try:
                volume = self._volume(rec, fields, j, prior)
                if volume is not None:  # three planes, as radharmony view shows volumes
                    item["volume"] = volume.info()
                    if not prior and j == 0:  # a grounded CT record's boxes
                        item["volume"].update(record_annotations(fields, volume.shape,
                                                                 volume.spacing))
                    item["height"], item["width"] = volume.shape[1:]
                else:
                    shown = self._image(rec, fields, j, prior)[1]
                    item["width"], item["height"] = shown.width, shown.height
            except RadHarmonyError as exc:
                item["error"] = str(exc)
            out.append(item)
        return out

    def record(self, *, record_id=None, row=None, fmt: str = "llava") -> dict:
        """One record as JSON: ids, prompt, target, ``rendered`` (as ``fmt`` exports it),
        ``images``, ``boxes`` (displayed pixels of image 0), ``prior`` and ``source_row``."""
        rec = self.index.record(record_id=record_id, row=row)
        fields = fields_of(rec.get("fields"))
        out = {k: v for k, v in rec.items() if k != "fields"}
        out.update(fields=fields, format=fmt, rendered=render(rec, fmt),
                   images=self._images_json(rec, fields, False), boxes=[], prior=None,
                   source_row=self._source_row(rec))
        if out["images"] and out["images"][0]["error"] is None and \
                out["images"][0]["volume"] is None:
            shown = self._image(rec, fields, 0, False)[1]
            out["boxes"] = boxes_of(rec, fields, shown, dialect=self.dialect)
        if fields.get("prior_study_id") or fields.get("prior_image_paths"):
            out["prior"] = {"study_id": fields.get("prior_study_id"),
                            "days": fields.get("days"),
                            "report": fields.get("prior_report"),
                            "images": self._images_json(rec, fields, True)}
        return out

    def _source_row(self, rec: dict) -> dict:
        src = self.sources.get(rec["source"], {})
        dataset = rec.get("dataset") or src.get("dataset")
        base = self.dataset_viewers.get(dataset)
        link = None if base is None else \
            f"{base}{'&' if '?' in base else '?'}id={quote(str(rec['sample_id']), safe='')}"
        return {"source": rec["source"], "dataset": dataset, "source_split":
                rec.get("source_split"), "sample_id": rec.get("sample_id"),
                "study_id": rec.get("study_id"), "patient_id": rec.get("patient_id"),
                "root": src.get("root"), "viewer_link": link,
                "viewer_command": f"radharmony view {dataset} --root {src.get('root')}"}

    def image_png(self, *, record_id=None, row=None, j=0, prior=False) -> bytes:
        rec = self.index.record(record_id=record_id, row=row)
        try:
            j = int(j)
        except (TypeError, ValueError):
            raise NotFound("An image is addressed by j=<integer>", expected="j=0, 1, ...",
                           found=repr(j)) from None
        return png8(self._image(rec, fields_of(rec.get("fields")), j, prior)[0])

    def volume_png(self, q: dict, *, record_id=None, row=None) -> bytes:
        """One plane's slice of a record's volume image (``j``, ``prior``, ``plane``,
        ``slice`` and the window in ``q``)."""
        rec = self.index.record(record_id=record_id, row=row)
        try:
            j = int(q.get("j", 0))
        except (TypeError, ValueError):
            raise NotFound("An image is addressed by j=<integer>", expected="j=0, 1, ...",
                           found=repr(q.get("j"))) from None
        volume = self._volume(rec, fields_of(rec.get("fields")), j,
                              q.get("prior") in ("1", "true"))
        if volume is None:
            raise NotFound(f"Image {j} of record {rec['record_id']} is not a volume",
                           expected="an image named .nii, .nii.gz, .npy, .b2nd or a folder",
                           found=str(j))
        return volume.slice_png(q.get("plane", "axial"), q.get("slice"), *parse_window(q))


class MixtureHandler(ViewerHandler):
    """The viewer's handler (token, host, same-site and read-only rules) with the mixture's
    routes."""

    def _route(self, path: str, q: dict):
        app: MixtureApp = self.server.app
        where = {"record_id": q.get("id"), "row": q.get("row")}
        if path in ("/", "/index.html"):
            return _static("mixture.html"), STATIC["mixture.html"]
        if path.startswith("/static/") and path[8:] in STATIC:
            return _static(path[8:]), STATIC[path[8:]]
        if path == "/api/meta":
            return _json_body(app.meta())
        if path == "/api/records":
            return _json_body(app.records(task=q.get("task"), source=q.get("source"),
                                          split=q.get("split"), offset=q.get("offset", 0),
                                          limit=q.get("limit")))
        if path == "/api/record":
            return _json_body(app.record(**where, fmt=q.get("format", "llava")))
        if path == "/record_volume.png":
            return app.volume_png(q, **where), "image/png"
        if path == "/record.png":
            return app.image_png(**where, j=q.get("j", 0),
                                 prior=q.get("prior") in ("1", "true")), "image/png"
        return None


class MixtureServer(ViewerServer):
    handler_class = MixtureHandler


def make_mixture_server(out, *, host: str = "127.0.0.1", port: int = 8765,
                        allow_remote: bool = False, token: str | None = None,
                        page_size: int = 50, size: int = 224,
                        dataset_viewers: dict[str, str] | None = None) -> MixtureServer:
    """A ready (not yet serving) mixture viewer over the mixture folder ``out``; ``port=0``
    picks a free port; ``server.url`` includes the per-run ``token``."""
    if host not in LOOPBACK and not allow_remote:
        raise RadHarmonyError(f"Refusing to serve the mixture viewer on {host}",
                              expected="a loopback address (127.0.0.1, localhost, ::1)",
                              found=host, fix="pass allow_remote=True (--allow-remote) to "
                              "expose it beyond this machine on purpose")
    app = MixtureApp(out, page_size=page_size, size=size, dataset_viewers=dataset_viewers)
    # the image pipeline (and torch) loads in the background: the first image is not slower
    threading.Thread(target=_warm_up, daemon=True).start()
    return MixtureServer(app, host, port, allow_remote=allow_remote, token=token)


def _warm_up() -> None:
    try:
        import radharmony.imaging.pipeline  # noqa: F401
    except Exception:  # pragma: no cover  (the first image reports the problem)
        pass


__all__ = ["MixtureApp", "MixtureServer", "make_mixture_server"]
