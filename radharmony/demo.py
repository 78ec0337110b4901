"""``make demo`` / ``radharmony demo``: the ReXGradient page's code on a synthetic replica."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    raise NotImplementedError


if __name__ == "__main__":
    raise SystemExit(main())
