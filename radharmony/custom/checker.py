"""The error of a wrong config and the checks of its single fields.

:class:`Checker` checks one config file's values -- mappings with known keys, text, choices,
numbers, and the value specs that derive an id or a path from a row -- and raises
:class:`ConfigError` naming the field (``boxes[0].units``), the value found and the fix.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any

from ..errors import RadHarmonyError, shorten

#: the longest regular expression a config may hold (no backtracking monsters)
MAX_PATTERN = 200


class ConfigError(RadHarmonyError, ValueError):
    """A dataset config file is wrong: names the field, the value found and the fix."""

    def __init__(self, what: str, *, field: str = "", expected: str | None = None,
                 found: str | None = None, fix: str | None = None):
        self.field = field
        super().__init__(what, expected=expected, found=found, fix=fix)


class Checker:
    """Checks one config; every error names ``where`` (the file) and the field path."""

    def __init__(self, where: str):
        self.where = where

    def fail(self, field: str, problem: str, value: Any, *, expected: str, fix: str):
        raise ConfigError(f"{self.where}: field {field!r} {problem}", field=field,
                          expected=expected, found=shorten(repr(value), 120), fix=fix)

    def mapping(self, value, field: str, allowed: dict[str, bool]) -> dict:
        """``value`` as a dict with only ``allowed`` keys (name -> required)."""
        if not isinstance(value, dict):
            self.fail(field, "is not a mapping", value, expected=f"a mapping with keys "
                      f"{sorted(allowed)}", fix=f"write {field}: {{...}}")
        for k in value:
            if k not in allowed:
                close = difflib.get_close_matches(str(k), list(allowed), n=1)
                self.fail(f"{field}.{k}" if field else str(k), "is not a known field", k,
                          expected=f"one of {sorted(allowed)}",
                          fix=f"did you mean {close[0]!r}?" if close else "remove it")
        for k, required in allowed.items():
            if required and value.get(k) is None:
                self.fail(f"{field}.{k}" if field else k, "is required", None,
                          expected="a value", fix=f"add {k}: ...")
        return value

    def text(self, value, field: str, *, empty: bool = False) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or \
                isinstance(value, float) and not math.isfinite(value):
            self.fail(field, "is not text", value, expected="a string",
                      fix="quote the value")
        value = str(value)
        if not empty and not value.strip():
            self.fail(field, "is empty", value, expected="non-empty text", fix="fill it in")
        return value

    def texts(self, value, field: str, *, empty: bool = False) -> list[str]:
        """One string or a list of strings -> list."""
        if isinstance(value, (list, tuple)):
            return [self.text(v, f"{field}[{i}]", empty=empty) for i, v in enumerate(value)]
        return [self.text(value, field, empty=empty)]

    def choice(self, value, field: str, choices) -> str:
        if value not in choices:
            close = difflib.get_close_matches(str(value), list(choices), n=1)
            self.fail(field, "has an unknown value", value, expected=f"one of {list(choices)}",
                      fix=f"did you mean {close[0]!r}?" if close else
                      f"write {field}: {list(choices)[0]}")
        return value

    def boolean(self, value, field: str) -> bool:
        if not isinstance(value, bool):
            self.fail(field, "is not true/false", value, expected="true or false",
                      fix=f"write {field}: true")
        return value

    def integer(self, value, field: str, *, low: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            self.fail(field, "is not a whole number", value, expected=f"an integer >= {low}",
                      fix=f"write {field}: {max(low, 1)}")
        return value

    def number(self, value, field: str) -> float | None:
        """A label value: a finite number, or null for "not labelled"."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value):
            self.fail(field, "is not a label value", value, expected="1, 0, -1 (uncertain), "
                      "another finite number, or null (not labelled)", fix="write 1, 0, -1 or "
                      "null")
        return float(value)

    # -- derivations: how a value (an id, a path) is made from a row ---------------------------
    def value(self, spec, field: str, *, constant: bool = False) -> dict:
        """A value spec: a column name, or ``{column|template|regex|constant, strip_prefix,
        strip_suffix, replace_extension}``; returns the normalized dict."""
        if isinstance(spec, (str, int)) and not isinstance(spec, bool):
            return {"column": self.text(spec, field).strip()}
        keys = {"column": False, "template": False, "regex": False, "strip_prefix": False,
                "strip_suffix": False, "replace_extension": False}
        if constant:
            keys["constant"] = False
        spec = self.mapping(spec, field, keys)
        sources = [k for k in ("column", "template", "regex", "constant") if k in spec]
        if len(sources) != 1:
            self.fail(field, "needs exactly one source", sorted(spec), expected="one of "
                      "column, template, regex" + (", constant" if constant else ""),
                      fix=f"write {field}: {{column: NAME}} or {{template: \"{{A}}/{{B}}.png\"}}")
        out: dict = {}
        kind = sources[0]
        if kind == "column":
            out["column"] = self.text(spec["column"], f"{field}.column").strip()
        elif kind == "constant":
            out["constant"] = self.text(spec["constant"], f"{field}.constant")
        elif kind == "template":
            from .derive import template_fields

            t = self.text(spec["template"], f"{field}.template")
            try:
                fields = template_fields(t)
            except ValueError as exc:
                self.fail(f"{field}.template", "is not a valid template", t,
                          expected="text with {COLUMN} placeholders ('{{' for a brace)",
                          fix=str(exc))
            if not fields:
                self.fail(f"{field}.template", "names no column", t, expected="at least one "
                          "{COLUMN} placeholder", fix="write {constant: ...} for a fixed value"
                          if constant else "add a {COLUMN} placeholder")
            out["template"] = t
        else:
            r = self.mapping(spec["regex"], f"{field}.regex",
                             {"column": True, "pattern": True, "group": False})
            pattern = self.text(r["pattern"], f"{field}.regex.pattern")
            if len(pattern) > MAX_PATTERN:
                self.fail(f"{field}.regex.pattern", "is too long", pattern,
                          expected=f"at most {MAX_PATTERN} characters",
                          fix="capture with a shorter pattern")
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                self.fail(f"{field}.regex.pattern", "is not a regular expression", pattern,
                          expected="a Python regular expression with a capture group",
                          fix=f"correct it ({exc})")
            if compiled.groups < 1:
                self.fail(f"{field}.regex.pattern", "has no capture group", pattern,
                          expected="a pattern with ( ... ) around the part to keep",
                          fix="wrap the wanted part in parentheses")
            group = r.get("group", 1)
            if isinstance(group, str):
                if group not in compiled.groupindex:
                    self.fail(f"{field}.regex.group", "names no group of the pattern", group,
                              expected=f"one of {sorted(compiled.groupindex)} or a number",
                              fix="name a group of the pattern")
            else:
                self.integer(group, f"{field}.regex.group", low=0)
                if group > compiled.groups:
                    self.fail(f"{field}.regex.group", "is past the pattern's groups", group,
                              expected=f"0 to {compiled.groups}", fix="write group: 1")
            out["regex"] = {"column": self.text(r["column"], f"{field}.regex.column").strip(),
                            "pattern": pattern, "group": group}
        for op in ("strip_prefix", "strip_suffix"):
            if op in spec:
                out[op] = self.texts(spec[op], f"{field}.{op}")
        if "replace_extension" in spec:
            m = spec["replace_extension"]
            if not isinstance(m, dict) or not m:
                self.fail(f"{field}.replace_extension", "is not a mapping", m,
                          expected="old -> new extension, e.g. {.jpg: .png}",
                          fix="write replace_extension: {'.jpg': '.png'}")
            out["replace_extension"] = {}
            for k, v in m.items():
                k = self.text(k, f"{field}.replace_extension")
                v = self.text(v, f"{field}.replace_extension.{k}", empty=True)
                for ext, f in ((k, k), (v, f"{k}: {v}")):
                    if ext and (not ext.startswith(".") or "/" in ext or "\\" in ext):
                        self.fail(f"{field}.replace_extension", "holds a bad extension", f,
                                  expected="extensions like '.jpg' (no folders)",
                                  fix="write {'.jpg': '.png'}")
                out["replace_extension"][k] = v
        return out
