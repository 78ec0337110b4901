"""The viewer's HTTP side: a read-only, standard-library server.

Routes (GET only; anything else is refused):

* ``/`` -- the page; ``/static/<name>`` -- its script and style sheet (a fixed list);
* ``/api/meta`` -- splits, their labels and view positions;
* ``/api/samples?split=&label=&view=&offset=&limit=`` -- one page of the filtered list;
* ``/api/sample?split=&index=`` or ``?id=<sample_id>`` -- one sample;
* ``/image.png?split=&index=`` or ``?id=`` -- its preprocessed image;
* ``/studies``, ``/api/study``, ``/study.png`` -- whole studies (:mod:`radharmony.viewer.studies`).
* ``/questions``, ``/api/question``, ``/question.png`` -- VQA questions
  (:mod:`radharmony.viewer.questions`).
* ``/volume.png``, ``/volume_mask.png``, ``/api/volume_mask_legend`` -- one plane's slice of a
  volume sample, windowed, its mask and the mask's labels there
  (:mod:`radharmony.viewer.volumes`; ``/api/sample`` carries the volume's planes).

Every route lives under a per-run secret prefix, ``/<token>/`` (``server.url`` includes it;
the page uses relative addresses, so it carries the token), and a request whose
``Sec-Fetch-Site`` says it comes from another site is refused: a page on another origin
cannot load viewer images with an ``<img>`` tag or probe which sample ids exist. Responses
carry ``Cross-Origin-Resource-Policy: same-origin``.

Samples are addressed by index or sample id only; no URL part is ever used as a file path.
The server binds to loopback unless ``allow_remote=True`` and, when on loopback, answers
only requests whose ``Host`` is a loopback name (no DNS rebinding). An unexpected error
answers a JSON error (500), never a dropped connection.
"""

from __future__ import annotations

import json
import secrets
import socket
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Sequence
from urllib.parse import parse_qs, urlsplit

from ..errors import RadHarmonyError
from .app import ViewerApp, ViewerError
from .questions import route as question_route
from .serving import LOOPBACK
from .studies import route as study_route
from .volumes import route as volume_route

#: ``Sec-Fetch-Site`` values of requests the viewer answers (typed URL, its own page)
SAME_SITE = frozenset({"same-origin", "none"})
#: the only files the server sends: name -> content type
STATIC = {"index.html": "text/html; charset=utf-8", "viewer.js": "text/javascript; charset=utf-8",
          "viewer.css": "text/css; charset=utf-8", "study.html": "text/html; charset=utf-8",
          "study.js": "text/javascript; charset=utf-8",
          "question.html": "text/html; charset=utf-8",
          "question.js": "text/javascript; charset=utf-8",
          "pages.js": "text/javascript; charset=utf-8",
          "planes.js": "text/javascript; charset=utf-8",
          "mixture.html": "text/html; charset=utf-8",
          "mixture.js": "text/javascript; charset=utf-8"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'")


def _static(name: str) -> bytes:
    return (resources.files(__package__) / "static" / name).read_bytes()


class ViewerServer(ThreadingHTTPServer):
    daemon_threads = True
    handler_class: type = None  # ViewerHandler (set below); the mixture viewer has its own

    def __init__(self, app: ViewerApp, host: str, port: int, *, allow_remote: bool,
                 token: str | None = None):
        self.app, self.allow_remote = app, allow_remote
        self.token = token or secrets.token_urlsafe(16)
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), self.handler_class)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/{self.token}/"


class ViewerHandler(BaseHTTPRequestHandler):
    server: ViewerServer
    server_version = "radharmony-viewer"

    def log_message(self, format, *args):  # noqa: A002  (quiet: the CLI owns stderr)
        pass

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")  # another run may serve other data
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(HTTPStatus.FOUND)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _json(self, obj, status: int = 200) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _host_ok(self) -> bool:
        if self.server.allow_remote:
            return True
        host = (self.headers.get("Host") or "").strip()
        name = host[1:].split("]")[0] if host.startswith("[") else host.rsplit(":", 1)[0]
        return name in LOOPBACK

    def do_HEAD(self):  # noqa: N802
        self.do_GET()

    def do_GET(self):  # noqa: N802
        try:
            self._get()
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # never drop the connection: answer what went wrong
            try:
                self._json({"error": f"internal error: {type(exc).__name__}: {exc}"}, 500)
            except Exception:
                pass

    def _get(self):
        if not self._host_ok():
            return self._json({"error": "Host header is not a loopback name"}, 403)
        site = self.headers.get("Sec-Fetch-Site")
        if site is not None and site.strip().lower() not in SAME_SITE:
            return self._json({"error": "cross-site request refused"}, 403)
        url = urlsplit(self.path)
        prefix = f"/{self.server.token}"
        if url.path != prefix and not url.path.startswith(prefix + "/"):
            return self._json({"error": "open the address the viewer printed (it includes a "
                               "per-run token)"}, 403)
        if url.path == prefix:
            return self._redirect(prefix + "/" + (f"?{url.query}" if url.query else ""))
        url = url._replace(path=url.path[len(prefix):])
        if url.path == "/favicon.ico":
            return self._send(204, b"", "image/x-icon")
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            found = self._route(url.path, q)
        except ViewerError as exc:
            return self._json({"error": str(exc)}, exc.status)
        except RadHarmonyError as exc:  # e.g. an image that cannot be read
            return self._json({"error": str(exc)}, HTTPStatus.UNPROCESSABLE_ENTITY)
        if found is None:
            return self._json({"error": f"no such page: {url.path}"}, 404)
        return self._send(200, *found)

    def _route(self, path: str, q: dict) -> tuple[bytes, str] | None:
        """``(body, content type)`` of the page at ``path`` (token stripped), None if none."""
        app = self.server.app
        where = {"split": q.get("split"), "index": q.get("index"), "sample_id": q.get("id")}
        if path in ("/", "/index.html"):
            return _static("index.html"), STATIC["index.html"]
        if path.startswith("/static/") and path[8:] in STATIC:
            return _static(path[8:]), STATIC[path[8:]]
        if path == "/api/meta":
            return _json_body(app.meta())
        if path == "/api/samples":
            return _json_body(app.samples(split=q.get("split"), label=q.get("label"),
                                          view=q.get("view"), offset=q.get("offset", 0),
                                          limit=q.get("limit")))
        if path == "/api/sample":
            return _json_body(app.sample(**where))
        if path == "/image.png":
            return app.image_png(**where), "image/png"
        if path == "/studies":  # the study pages (radharmony.viewer.studies)
            return _static("study.html"), STATIC["study.html"]
        if path == "/questions":  # the VQA pages (radharmony.viewer.questions)
            return _static("question.html"), STATIC["question.html"]
        return study_route(app, path, q) or question_route(app, path, q) or \
            volume_route(app, path, q)


def _json_body(obj) -> tuple[bytes, str]:
    return json.dumps(obj).encode(), "application/json"


ViewerServer.handler_class = ViewerHandler


def make_server(datasets: Sequence, *, host: str = "127.0.0.1", port: int = 8765,
                allow_remote: bool = False, page_size: int = 50,
                token: str | None = None) -> ViewerServer:
    """A ready (not yet serving) viewer server; ``port=0`` picks a free port (see ``.url``,
    which includes the per-run ``token``, random unless given).

    Call ``serve_forever()`` on it, in a thread for tests.
    """
    if host not in LOOPBACK and not allow_remote:
        raise RadHarmonyError(f"Refusing to serve the viewer on {host}",
                              expected="a loopback address (127.0.0.1, localhost, ::1)",
                              found=host, fix="pass allow_remote=True (--allow-remote) to "
                              "expose it beyond this machine on purpose")
    return ViewerServer(ViewerApp(datasets, page_size=page_size), host, port,
                        allow_remote=allow_remote, token=token)
