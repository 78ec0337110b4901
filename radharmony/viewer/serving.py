"""What ``radharmony view`` and ``radharmony mix view`` share: their argument types and the
serving loop (light: building a parser with these imports neither pandas nor the server)."""

from __future__ import annotations

import argparse

#: the addresses the viewers bind to without --allow-remote
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def size_arg(text: str) -> int:
    """``--size``: 16 to 4096 pixels."""
    n = int(text)
    if not 16 <= n <= 4096:
        raise argparse.ArgumentTypeError("must be 16 to 4096 pixels")
    return n


def port_arg(text: str) -> int:
    """``--port``: 0 (any free port) to 65535."""
    n = int(text)
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError("must be 0 (any free port) to 65535")
    return n


def serve(server, *, open_browser: bool = False) -> None:
    """Serve until Ctrl-C (opening the page in a browser first when asked), then close."""
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


__all__ = ["LOOPBACK", "port_arg", "serve", "size_arg"]
