"""``radharmony view``: a local, read-only web page to browse a dataset's samples.

A standard-library HTTP server (:mod:`.server`) over a data model (:mod:`.app`) with a static
page (``static/``). Use :func:`make_server` from Python::

    server = make_server([ReXGradientValidDataset(root, output_report=True)], port=0)
    print(server.url); server.serve_forever()

``radharmony mix view OUT`` serves a mixture's records the same way (:mod:`.mixture`):
:func:`serve_mixture` (``mixture_cli``) or :func:`make_mixture_server`.
"""

from .app import ViewerApp, report_sections
from .server import LOOPBACK, ViewerServer, make_server

_MIXTURE = {"MixtureApp": "mixture", "make_mixture_server": "mixture",
            "serve_mixture": "mixture_cli"}


def __getattr__(name: str):
    """The mixture viewer's names, imported on first use (they need pyarrow)."""
    if name in _MIXTURE:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_MIXTURE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LOOPBACK", "MixtureApp", "ViewerApp", "ViewerServer", "make_mixture_server",
           "make_server", "report_sections", "serve_mixture"]
