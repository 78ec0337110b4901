"""Built-in datasets: one module each. Importing this package registers them all.

Adding a dataset: write ``datasets/<name>.py`` (with ``__all__``) and ``fake/<name>.py``, then add
``<name>`` to :data:`MODULES`.
"""

from importlib import import_module

#: every built-in dataset module; each has a fake writer of the same name in radharmony.fake
MODULES = ("rexgradient", "xraydar", "nih", "chexpert", "padchest", "vindr", "rsna", "siim",
           "openi", "mimic", "tbx11k", "nlm_tb", "siim_covid", "brax", "object_cxr")

__all__: list[str] = []
for _name in MODULES:
    _module = import_module(f"{__name__}.{_name}")
    globals().update({n: getattr(_module, n) for n in _module.__all__})
    __all__ += _module.__all__
