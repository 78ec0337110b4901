"""Every declared dependency floor is the release line that is installed and tested.

``make install`` installs every extra under the constraints ``tools/min_requirements.py
--constraints`` prints (``name==floor.*``), so the suite always runs on the floors; this test
fails when a floor names a release line other than the one installed (a floor raised or
lowered without reinstalling, or an install that bypassed the constraints)."""

from __future__ import annotations

import importlib.util
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTRAS = ("test", "bench", "eval", "webdataset", "ray", "config", "fast", "docs", "lightning",
          "volumes")


def _tool():
    spec = importlib.util.spec_from_file_location("min_requirements",
                                                  ROOT / "tools" / "min_requirements.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("min_requirements", mod)
    spec.loader.exec_module(mod)
    return mod


def _release(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def test_makefile_installs_every_extra_under_the_floor_constraints():
    make = (ROOT / "Makefile").read_text()
    install = make.split("$(STAMP): pyproject.toml")[1].split("touch $(STAMP)")[0]
    assert "min_requirements.py --constraints" in install
    for extra in EXTRAS:
        assert extra in install, extra
    pins = _tool().pins(*EXTRAS, constraints=True)
    assert all("[" not in p for p in pins)  # pip -c refuses extras
    assert "torch==2.13.0" in install  # torch apart: the local CPU build, pinned
    assert _tool().floors()["torch"] == "2.2"  # the declared range (docs/reliability.md)


@pytest.mark.parametrize("name, floor", sorted((n, f) for n, f in _tool().floors(*EXTRAS).items()
                                               if n not in _tool().APART))
def test_installed_version_lies_on_the_declared_floor(name, floor):
    dist = name.split("[")[0]
    try:
        got = version(dist)
    except PackageNotFoundError:
        pytest.skip(f"{dist} is not installed here")
    want = _release(floor)
    assert _release(got)[:len(want)] == want, (
        f"{dist} {got} is installed, but pyproject.toml declares {dist}>={floor}: the floor is "
        f"not the tested version. Set the floor to {'.'.join(map(str, _release(got)[:2]))} "
        "(or reinstall with make install)")
