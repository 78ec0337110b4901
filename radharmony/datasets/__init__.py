"""Built-in datasets: one module each. Importing this package registers them all."""

from .rexgradient import *  # noqa: F401,F403
from .rexgradient import __all__ as _rexgradient

__all__ = [*_rexgradient]
