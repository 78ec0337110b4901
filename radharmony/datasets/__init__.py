"""Built-in datasets: one module each, listed here. This list is the catalog the registry reads.

Adding a dataset: write ``datasets/<name>.py`` (with ``__all__``) and ``fake/<name>.py``, then add
``<name>`` to :data:`MODULES`. Each dataset class names its harmonizer (``harmonizer_class``), whose
spec's ``key`` is the registry key.
"""

from importlib import import_module

#: every built-in dataset module; each has a fake writer of the same name in radharmony.fake
MODULES = ("rexgradient", "xraydar", "nih", "chexpert", "padchest", "vindr", "rsna", "siim",
           "openi", "mimic", "vindr_physionet", "chexpert_plus", "ranzcr", "vindr_pcxr", "ms_cxr",
           "chexmask", "tbx11k", "nlm_tb", "siim_covid", "brax", "object_cxr", "chexlocalize",
           "chest_imagenome", "padchest_gr", "rexvqa", "medical_diff_vqa", "vqa_rad", "slake",
           "mimic_cxr_vqa", "gemex", "mimic_ext_cxr_qba")

__all__: list[str] = []
#: registry key -> dataset class, in module order
CATALOG: dict = {}
for _name in MODULES:
    _module = import_module(f"{__name__}.{_name}")
    for _n in _module.__all__:
        _obj = globals()[_n] = getattr(_module, _n)
        if isinstance(_obj, type) and _obj.__dict__.get("harmonizer_class") is not None:
            CATALOG[_obj.harmonizer_class.spec.key] = _obj
    __all__ += _module.__all__
