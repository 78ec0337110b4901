"""Built-in datasets: one module each. Importing this package registers them all."""

from .rexgradient import *  # noqa: F401,F403
from .rexgradient import __all__ as _rexgradient
from .vindr import *  # noqa: F401,F403
from .vindr import __all__ as _vindr
from .rsna import *  # noqa: F401,F403
from .rsna import __all__ as _rsna
from .siim import *  # noqa: F401,F403
from .siim import __all__ as _siim
from .openi import *  # noqa: F401,F403
from .openi import __all__ as _openi
from .mimic import *  # noqa: F401,F403
from .mimic import __all__ as _mimic

__all__ = [*_rexgradient, *_vindr, *_rsna, *_siim, *_openi, *_mimic]
