"""Optional packages, imported when a feature needs them, with an error naming the extra."""

from __future__ import annotations

from .errors import RadHarmonyError

#: how to install the Ray engine's package
RAY_EXTRA = "pip install radharmony[ray]"


def require_ray():
    """The ``ray`` module, or an error naming the extra that installs it."""
    try:
        import ray
    except ImportError as exc:
        raise RadHarmonyError("The Ray engine needs the 'ray' package",
                              expected="ray installed (the radharmony[ray] extra)",
                              found=f"ImportError: {exc}",
                              fix=f"{RAY_EXTRA}, or use engine='local'") from None
    return ray


__all__ = ["RAY_EXTRA", "require_ray"]
