"""Built-in datasets: one module each. Importing this package registers them all."""

from .rexgradient import *  # noqa: F401,F403
from .rexgradient import __all__ as _rexgradient
from .xraydar import *  # noqa: F401,F403
from .xraydar import __all__ as _xraydar

__all__ = [*_rexgradient, *_xraydar]
