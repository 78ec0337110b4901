"""A read-only view of a dataset's table: in-place edits are refused, not half applied.

A dataset builds its samples, splits and folds from one table. An in-place edit of that table
(``ds.harmonized_df.loc[i, "Effusion"] = 1``) would reach some of them and not others, so
:class:`FrozenFrame` refuses every in-place write with an error that names the ways to get an
edited dataset. Everything that returns a new table (``copy()``, ``loc[...]``, ``assign``,
``query``, ...) returns an ordinary, writable :class:`pandas.DataFrame`.

>>> import pandas as pd
>>> t = FrozenFrame(pd.DataFrame({"a": [1, 2]}))
>>> t.loc[0, "a"] = 5
Traceback (most recent call last):
...
radharmony.errors.ReadOnlyTableError: ...
>>> edited = t.copy(); edited.loc[0, "a"] = 5; int(edited["a"].iloc[0])
5
"""

from __future__ import annotations

import functools

import pandas as pd

from ..errors import ReadOnlyTableError

#: DataFrame methods that edit in place when given ``inplace=True``
_INPLACE_METHODS = ("fillna", "replace", "drop", "rename", "sort_values", "sort_index",
                    "reset_index", "set_index", "where", "mask", "clip", "dropna",
                    "drop_duplicates", "interpolate", "eval", "query", "ffill", "bfill",
                    "set_axis", "rename_axis")
#: DataFrame methods that always edit in place
_EDITING_METHODS = ("insert", "pop", "update", "__delitem__", "_set_value", "__setitem__",
                    "__ior__", "__iand__")


def refuse(action: str):
    raise ReadOnlyTableError(
        f"ds.harmonized_df is read-only ({action}): the dataset's samples, splits and folds "
        "are all built from it, so an in-place edit would reach some of them and not others",
        expected="a new table for a new dataset", found=f"an in-place edit: {action}",
        fix="for a subset use ds.filter(mask); for edited values build edited = "
            "ds.harmonized_df.copy(), change it, and pass harmonized_df=edited to the dataset "
            "class (or call ds.set_harmonized_df(edited))")


class _Indexer:
    """``loc`` / ``iloc`` / ``at`` / ``iat`` that read like pandas' and refuse writes."""

    __slots__ = ("_inner", "_name")

    def __init__(self, inner, name: str):
        self._inner, self._name = inner, name

    def __getitem__(self, key):
        return self._inner[key]

    def __setitem__(self, key, value):
        refuse(f"{self._name}[...] = ...")

    def __call__(self, *args, **kwargs):
        return self._inner(*args, **kwargs)


def _inplace_guard(name: str):
    method = getattr(pd.DataFrame, name)

    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        if kwargs.get("inplace"):
            refuse(f"{name}(..., inplace=True)")
        return method(self, *args, **kwargs)

    return guarded


def _editing_guard(name: str):
    def guarded(self, *args, **kwargs):
        refuse(f"{name.strip('_')}(...)" if name != "__setitem__" else "df[...] = ...")

    guarded.__name__ = name
    return guarded


class FrozenFrame(pd.DataFrame):
    """A :class:`pandas.DataFrame` whose in-place edits raise :class:`ReadOnlyTableError`;
    derived tables are plain DataFrames."""

    @property
    def _constructor(self):
        return pd.DataFrame

    def __setattr__(self, name: str, value) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            refuse(f"df.{name} = ...")

    loc = property(lambda self: _Indexer(pd.DataFrame.loc.fget(self), "loc"))
    iloc = property(lambda self: _Indexer(pd.DataFrame.iloc.fget(self), "iloc"))
    at = property(lambda self: _Indexer(pd.DataFrame.at.fget(self), "at"))
    iat = property(lambda self: _Indexer(pd.DataFrame.iat.fget(self), "iat"))

    for _name in _INPLACE_METHODS:
        locals()[_name] = _inplace_guard(_name)
    for _name in _EDITING_METHODS:
        locals()[_name] = _editing_guard(_name)
    del _name
