"""Built-in datasets: one module each, listed here. This list is the catalog the registry reads.

Adding a dataset: write ``datasets/<name>.py`` (with ``__all__``) and ``fake/<name>.py``, then add
``<name>`` to :data:`MODULES`. Each dataset class names its harmonizer (``harmonizer_class``), whose
spec's ``key`` is the registry key.

Importing this package imports every dataset module's table side (specs, harmonizers: pandas,
no torch). The dataset classes are made on first use (:mod:`.torch_side`): looking one up here,
or :func:`dataset_classes`, imports torch.
"""

from importlib import import_module

#: every built-in dataset module; each has a fake writer of the same name in radharmony.fake
MODULES = ("rexgradient", "xraydar", "nih", "chexpert", "padchest", "vindr", "rsna",
           "siim", "openi", "mimic", "vindr_physionet", "chexpert_plus", "ranzcr",
           "vindr_pcxr", "ms_cxr", "chexmask", "tbx11k", "nlm_tb", "siim_covid", "brax",
           "object_cxr", "chexlocalize", "chest_imagenome", "padchest_gr", "rexvqa",
           "medical_diff_vqa", "vqa_rad", "slake", "mimic_cxr_vqa", "gemex",
           "mimic_ext_cxr_qba", "cxr_lt", "emory_cxr", "openi_dicom", "brax_dicom",
           "mimic_cxr", "roco", "chestx_det", "vindr_ribcxr", "candid_ptx",
           "bimcv_covid19", "rsna_bone_age", "taix_ray", "ralo", "ct_rate", "rsna_pe",
           "rad_chestct", "totalsegmentator", "lidc_idri", "rsna_cspine",
           "rsna_abdominal_trauma", "rsna_lumbar_spine")

__all__: list[str] = []
#: dataset class name -> its module (the class is made when first looked up)
_LAZY: dict = {}
#: registry key -> harmonizer class (with a spec), in module order
HARMONIZERS: dict = {}
for _name in MODULES:
    _module = import_module(f"{__name__}.{_name}")
    for _n in _module.__all__:
        if _n not in vars(_module):
            _LAZY[_n] = _module
            continue
        _obj = globals()[_n] = vars(_module)[_n]
        if isinstance(_obj, type) and getattr(_obj, "spec", None) is not None and \
                _n.endswith("Harmonizer"):
            HARMONIZERS.setdefault(_obj.spec.key, _obj)
    __all__ += _module.__all__


def dataset_classes() -> dict:
    """Registry key -> built-in dataset class (makes every dataset class: imports torch)."""
    out = {}
    for name, module in _LAZY.items():
        cls = getattr(module, name)
        harmonizer = cls.__dict__.get("harmonizer_class")
        if harmonizer is not None:
            out[harmonizer.spec.key] = cls
    return {key: out[key] for key in HARMONIZERS if key in out}


def __getattr__(name: str):
    if name == "CATALOG":  # the old name of dataset_classes()
        return dataset_classes()
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(module, name)
    return value
