"""Reading a mixture spec file: YAML (or JSON) with the line of every key, and the errors
that name ``file:line`` and the key path (:class:`MixtureSpecError`)."""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

from ..errors import RadHarmonyError, shorten


class MixtureSpecError(RadHarmonyError, ValueError):
    """A mixture spec that cannot be built as written."""


class Where:
    """Key paths -> ``file:line`` for the messages."""

    def __init__(self, origin: str, lines: dict):
        self.origin, self.lines = origin, lines

    def __call__(self, *path) -> str:
        text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        for k in range(len(path), -1, -1):
            if path[:k] in self.lines:
                return f"{self.origin}:{self.lines[path[:k]]}: {text or 'the spec'}"
        return f"{self.origin}: {text or 'the spec'}"

    def error(self, path: tuple, what: str, *, expected: str, found, fix: str):
        return MixtureSpecError(f"{self(*path)}: {what}", expected=expected,
                                found=shorten(found, 200), fix=fix)


def guess(value, choices) -> str:
    close = difflib.get_close_matches(str(value), list(choices), n=3)
    return f"did you mean {' or '.join(map(repr, close))}" if close else \
        f"use one of {', '.join(map(str, choices))}"


def read_spec_file(path: str | os.PathLike) -> tuple[dict, dict]:
    """``(data, lines)`` of a YAML or JSON spec file: ``lines`` maps each key path (a tuple of
    keys and list positions) to its 1-based line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MixtureSpecError(f"Cannot read the mixture spec {path}", expected="a YAML file",
                               found=f"{type(exc).__name__}: {exc}",
                               fix="check the path") from None
    try:
        import yaml
    except ModuleNotFoundError:
        if path.suffix.lower() != ".json":
            raise MixtureSpecError(f"Reading {path} needs PyYAML", expected="pyyaml installed",
                                   found="no module yaml",
                                   fix="pip install 'radharmony[config]', or write the spec "
                                       "as JSON") from None
        return json.loads(text), {}
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise MixtureSpecError(f"{path}{line}: the spec is not valid YAML",
                               expected="a YAML mapping", found=shorten(str(exc), 200),
                               fix="fix the YAML at that line") from None
    lines: dict = {}
    if node is not None:
        _lines(node, (), lines)
    return data, lines


def _lines(node, path: tuple, out: dict) -> None:
    import yaml

    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = (path + (k.value,))
            out[key] = k.start_mark.line + 1
            _lines(v, key, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out[path + (i,)] = v.start_mark.line + 1
            _lines(v, path + (i,), out)


__all__ = ["MixtureSpecError", "Where", "guess", "read_spec_file"]
