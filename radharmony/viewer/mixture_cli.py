"""``radharmony mix view OUT``: the arguments (those of ``radharmony view``, plus the mixture
folder) and the command, so the ``mix`` parser wires it in two lines::

    p = mix_sub.add_parser("view", parents=[common], help="browse a mixture's records")
    add_view_arguments(p); p.set_defaults(func=run_view)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import RadHarmonyError
from .serving import LOOPBACK, port_arg, serve, size_arg


def _viewer(text: str) -> tuple[str, str]:
    key, sep, url = text.partition("=")
    if not sep or not key or not url.startswith("http"):
        raise argparse.ArgumentTypeError("must be KEY=URL (the address `radharmony view KEY` "
                                         "printed)")
    return key, url


def add_view_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of ``radharmony mix view``: ``OUT`` and ``radharmony view``'s own
    (``--host``, ``--port``, ``--allow-remote``, ``--size``, ``--open``), plus
    ``--dataset-viewer KEY=URL`` (repeatable) for links to source samples."""
    parser.description = ("Serve a read-only viewer over a mixture's records: filter by task, "
                          "source and split, search by record id, see a record as an export "
                          "format renders it with its images, boxes and prior study. Binds to "
                          "127.0.0.1 unless --allow-remote.")
    parser.add_argument("out", metavar="OUT", type=Path,
                        help="the mixture folder (records.parquet and mixture.json)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_arg, default=8765,
                        help="port (default 8765; 0: any free)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow --host to be a non-loopback address")
    parser.add_argument("--size", type=size_arg, default=224,
                        help="long side an original image is shown at (default 224; a cached "
                        "mixture's images are shown at the cache's size)")
    parser.add_argument("--dataset-viewer", type=_viewer, action="append", default=[],
                        metavar="KEY=URL", help="the address a running `radharmony view KEY` "
                        "printed: a record links to its source sample there (repeatable)")
    parser.add_argument("--open", action="store_true", help="open the page in a web browser")
    return parser


def serve_mixture(out, *, host: str = "127.0.0.1", port: int = 8765,
                  token: str | None = None, allow_remote: bool = False, size: int = 224,
                  page_size: int = 50, dataset_viewers: dict[str, str] | None = None,
                  open_browser: bool = False, as_json: bool = False) -> int:
    """Serve the mixture viewer over ``out`` until Ctrl-C; prints the URL the way
    ``radharmony view`` does (``{"url": ...}`` on stdout with ``as_json``; a note on stderr).
    Returns 0."""
    from .mixture import make_mixture_server

    server = make_mixture_server(out, host=host, port=port, allow_remote=allow_remote,
                                 token=token, page_size=page_size, size=size,
                                 dataset_viewers=dataset_viewers)
    url = server.url
    if as_json:
        print(json.dumps({"url": url, "mixture": str(out)}), flush=True)
    print(f"Serving the mixture {out} at {url} (read-only; Ctrl-C to stop)", file=sys.stderr,
          flush=True)
    serve(server, open_browser=open_browser)
    return 0


def run_view(args: argparse.Namespace) -> int:
    """``radharmony mix view``: :func:`serve_mixture` with the parsed arguments."""
    if args.host not in LOOPBACK and not args.allow_remote:
        raise RadHarmonyError(f"--host {args.host} would expose the mixture viewer beyond this "
                              "machine", expected="a loopback --host, or --allow-remote",
                              found=args.host, fix="add --allow-remote to do that on purpose")
    return serve_mixture(args.out, host=args.host, port=args.port,
                         allow_remote=args.allow_remote, size=args.size,
                         dataset_viewers=dict(args.dataset_viewer), open_browser=args.open,
                         as_json=getattr(args, "json", False))
