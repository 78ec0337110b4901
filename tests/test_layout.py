"""The package's rooms (top-level modules and folders of ``radharmony``) import one way only."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "radharmony"


def _imports() -> dict[str, dict[str, list[str]]]:
    """room -> {room it imports: [file:line, ...]} (module-level and function-level imports)."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
            package = parts
        else:
            package = parts[:-1]
        room = parts[1] if len(parts) > 1 else "__init__"
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "radharmony":
                target = node.module.split(".")
            else:
                continue
            names = [target[1]] if len(target) > 1 else [a.name for a in node.names]
            for other in names:
                if other != room and (PACKAGE / other).exists() or \
                        (PACKAGE / f"{other}.py").exists() and other != room:
                    graph[room][other].append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return graph


def test_no_two_rooms_import_each_other():
    graph = _imports()

    def reaches(a, b):
        seen, todo = set(), [a]
        while todo:
            for nxt in graph.get(todo.pop(), {}):
                if nxt == b:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    loops = [f"{a} -> {b} ({where[0]}) and back" for a in sorted(graph)
             for b, where in sorted(graph[a].items()) if reaches(b, a)]
    assert not loops, "import circles between rooms:\n" + "\n".join(loops)


def test_the_graph_is_read():
    graph = _imports()
    assert "table" in graph["data"] and "errors" in graph["table"]  # the check sees imports


MAX_MODULE_LINES = 400


def oversized_modules(package: Path = PACKAGE, limit: int = MAX_MODULE_LINES) -> list[str]:
    """``"path: N lines"`` of every module of ``package`` longer than ``limit`` lines."""
    sizes = {path: len(path.read_text().splitlines()) for path in package.rglob("*.py")}
    return [f"{path.relative_to(package.parent)}: {n} lines"
            for path, n in sorted(sizes.items()) if n > limit]


def test_no_module_is_over_400_lines():
    """One dataset = one module of ~100-250 lines; no module of the package over 400 (split it
    by role: see radharmony/data/dataset.py, reads.py and subsets.py)."""
    too_long = oversized_modules()
    assert not too_long, "modules over 400 lines (split them):\n" + "\n".join(too_long)


def test_the_size_check_sees_a_long_module(tmp_path):
    package = tmp_path / "radharmony"
    (package / "data").mkdir(parents=True)
    (package / "data" / "long.py").write_text("x = 1\n" * 401)
    (package / "short.py").write_text("x = 1\n" * 400)
    assert oversized_modules(package) == ["radharmony/data/long.py: 401 lines"]
