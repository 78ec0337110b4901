"""Print every dependency of pyproject.toml pinned to its declared floor (``name==floor.*``).

``make test-min`` installs these pins into a fresh virtual environment and runs the test
suite there, so that every floor the package declares is one that was installed and tested.

    python tools/min_requirements.py            # core dependencies
    python tools/min_requirements.py test       # plus the 'test' extra
    python tools/min_requirements.py --constraints test bench   # pip -c form: no extras

``make install`` (and so ``make test`` and CI) installs with the ``--constraints`` form of
every extra it installs, so every declared floor's release line is the one installed and
tested on each run; ``tests/tools/test_floors.py`` checks that the installed versions lie on
those lines.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def floors(*extras: str) -> dict[str, str]:
    """Dependency name -> its ``>=`` floor, for the core and the named extras."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    specs = list(project["dependencies"])
    for extra in extras:
        specs += project["optional-dependencies"][extra]
    out = {}
    for spec in specs:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-\[\]]+)\s*>=\s*([0-9][^,;\s]*)\s*", spec)
        if m is None:
            raise SystemExit(f"{PYPROJECT}: dependency {spec!r} has no plain '>=' floor")
        out[m.group(1)] = m.group(2)
    return out


#: installed apart: torch first, pinned to the local CPU build (an index lookup of torch 2.2
#: would fetch a CUDA build of several GB)
APART = ("torch",)



def pins(*extras: str, constraints: bool = False) -> list[str]:
    """``name==floor.*`` for every dependency but :data:`APART` (``constraints``: the name
    without its extras, as ``pip -c`` requires)."""
    out = []
    for name, floor in floors(*extras).items():
        if name not in APART:
            if constraints:
                name = name.split("[")[0]
            out.append(f"{name}=={floor}.*")  # the floor release line, e.g. opencv 5.1.0.95
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    constraints = "--constraints" in args
    print("\n".join(pins(*[a for a in args if a != "--constraints"], constraints=constraints)))
