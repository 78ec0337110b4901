"""``radharmony view``: a local, read-only web page to browse a dataset's samples.

A standard-library HTTP server (:mod:`.server`) over a data model (:mod:`.app`) with a static
page (``static/``). Use :func:`make_server` from Python::

    server = make_server([ReXGradientValidDataset(root, output_report=True)], port=0)
    print(server.url); server.serve_forever()
"""

from .app import ViewerApp, report_sections
from .server import LOOPBACK, ViewerServer, make_server

__all__ = ["LOOPBACK", "ViewerApp", "ViewerServer", "make_server", "report_sections"]
