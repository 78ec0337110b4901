"""Built-in datasets: one module each. Importing this package registers them all."""

from .chexpert import *  # noqa: F401,F403
from .chexpert import __all__ as _chexpert
from .nih import *  # noqa: F401,F403
from .nih import __all__ as _nih
from .padchest import *  # noqa: F401,F403
from .padchest import __all__ as _padchest
from .rexgradient import *  # noqa: F401,F403
from .rexgradient import __all__ as _rexgradient

__all__ = [*_rexgradient, *_nih, *_chexpert, *_padchest]
