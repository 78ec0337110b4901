"""``radharmony view``: a local, read-only web page to browse a dataset's samples.

A standard-library HTTP server (:mod:`.server`) over a data model (:mod:`.app`) with a static
page (``static/``). Use :func:`make_server` from Python::

    server = make_server([ReXGradientValidDataset(root, output_report=True)], port=0)
    print(server.url); server.serve_forever()

``radharmony mix view OUT`` serves a mixture's records the same way (:mod:`.mixture`):
:func:`serve_mixture` (``mixture_cli``) or :func:`make_mixture_server`.
"""

from .serving import LOOPBACK

#: name -> module, imported on first use: building the command's parser (``radharmony mix
#: view``'s arguments) imports neither pandas nor pyarrow
_LAZY = {"ViewerApp": "app", "report_sections": "app",
         "ViewerServer": "server", "make_server": "server",
         "MixtureApp": "mixture", "make_mixture_server": "mixture",
         "serve_mixture": "mixture_cli"}


def __getattr__(name: str):
    """The viewer's names, imported on first use."""
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LOOPBACK", "MixtureApp", "ViewerApp", "ViewerServer", "make_mixture_server",
           "make_server", "report_sections", "serve_mixture"]
