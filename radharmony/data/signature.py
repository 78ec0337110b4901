"""What a dataset class's constructor takes: its full signature, and the reference library's
positional order.

Every dataset class takes the arguments of
:class:`~radharmony.data.dataset.BaseRadiologicalDataset`: ``(base_image_dir, csv_path,
transform)`` by position, everything else by keyword. :func:`constructor_signature` is what
``inspect.signature(cls)`` (``help()``, editors) shows: a mixin's ``*args`` / ``**kwargs``
replaced by the arguments it passes on. Code ported from the reference library may pass more
by position, in the order of the reference's dataset classes (:data:`REFERENCE_POSITIONAL`):
:class:`ReferenceCall` turns those into keywords before the class is built.
"""

from __future__ import annotations

import inspect

from ..errors import RadHarmonyError

#: the reference library's dataset classes' positional order (``ReXGradientDataset(
#: base_image_dir=None, csv_path=None, transform=None, cache_dir="./cache", output_cls=False,
#: ...)``); radharmony takes the first three by position and the rest by keyword
REFERENCE_POSITIONAL = ("base_image_dir", "csv_path", "transform", "cache_dir", "output_cls",
                        "output_mask", "output_report", "output_bbox", "harmonized_df",
                        "harmonizer", "harmonizer_path", "dtype")
OWN_POSITIONAL = REFERENCE_POSITIONAL[:3]


def constructor_signature(cls: type) -> inspect.Signature:
    """The arguments ``cls(...)`` takes: each ``__init__`` from
    :class:`BaseRadiologicalDataset` up to ``cls``, a mixin's ``*args`` / ``**kwargs``
    standing for the arguments it passes on (so ``help()`` and editors show them all)."""
    P = inspect.Parameter
    mro = cls.__mro__
    base = [k for k in mro if isinstance(k, ReferenceCall)][-1]  # BaseRadiologicalDataset
    chain = [k for k in reversed(mro[:mro.index(base) + 1]) if "__init__" in k.__dict__]
    params: list[inspect.Parameter] = []
    for klass in chain:
        own = list(inspect.signature(klass.__dict__["__init__"]).parameters.values())[1:]
        kinds = {p.kind for p in own}
        named = {p.name for p in own}
        positional = [p for p in own if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
        keyword = [p for p in own if p.kind is P.KEYWORD_ONLY]
        passed = [p for p in params if p.name not in named]
        if P.VAR_POSITIONAL in kinds:
            positional += [p for p in passed if p.kind is not P.KEYWORD_ONLY]
        if P.VAR_KEYWORD in kinds:
            keyword += [p.replace(kind=P.KEYWORD_ONLY) for p in passed
                        if p not in positional]
        params = positional + keyword
    return inspect.Signature(params)


class ReferenceCall(type):
    """The dataset classes' metaclass: a call with more positional arguments than
    ``(base_image_dir, csv_path, transform)`` is read in :data:`REFERENCE_POSITIONAL`'s order
    (the reference library's), the extra ones passed on as keywords. A class whose own
    signature has other positional arguments is called as it is."""

    def __call__(cls, *args, **kwargs):
        if len(args) > len(OWN_POSITIONAL):
            params = inspect.signature(cls).parameters.values()
            own = tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                             p.POSITIONAL_OR_KEYWORD))
            if own == OWN_POSITIONAL:
                args, kwargs = reference_keywords(cls.__name__, args, kwargs)
        return super().__call__(*args, **kwargs)


def reference_keywords(owner: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``(args[:3], kwargs)`` with ``args[3:]`` added to ``kwargs`` under the names of
    :data:`REFERENCE_POSITIONAL`."""
    n = len(REFERENCE_POSITIONAL)
    if len(args) > n:
        raise RadHarmonyError(f"{owner} got {len(args)} positional arguments",
                              expected=f"at most {n}, in the reference's order "
                              f"({', '.join(REFERENCE_POSITIONAL)})", found=f"{len(args)}",
                              fix="pass the others by keyword, e.g. output_report=True")
    kwargs = dict(kwargs)
    for i, (name, value) in enumerate(zip(REFERENCE_POSITIONAL[3:], args[3:]), start=4):
        if name in kwargs:
            raise RadHarmonyError(f"{owner} got {name} twice", expected="each argument once",
                                  found=f"{name} as positional argument {i} and as a keyword",
                                  fix=f"drop one of them (position {i} is {name} in the "
                                      "reference's order)")
        kwargs[name] = value
    return args[:3], kwargs
