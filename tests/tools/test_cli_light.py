"""Which ``radharmony`` commands answer without importing torch: each runs in a fresh process
on a small replica, through a wrapper that reports what the command imported.

``list`` is light (issue 33); ``info`` and ``harmonize`` read metadata only and import no torch
(issue 43, item 7): a dataset module's dataset classes are made on first use
(``radharmony.datasets.torch_side``), so the registry hands out harmonizers without them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from radharmony.fake import write_rexgradient

REPO = Path(__file__).resolve().parents[2]
#: runs ``radharmony ARGS`` in this process, then prints which heavy modules it imported
WRAPPER = ("import json, sys\n"
           "from radharmony.cli.main import main\n"
           "code = main(sys.argv[1:])\n"
           "print(json.dumps({'code': code, 'torch': 'torch' in sys.modules,\n"
           "                  'pandas': 'pandas' in sys.modules}))\n")


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return write_rexgradient(tmp_path_factory.mktemp("rex"), studies={"valid": 3}, seed=0)


def _imported(args: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("command", [
    "list",
    "info",
    "harmonize",
])
def test_command_does_not_import_torch(command, root, tmp_path):
    args = {"list": ["list", "-q"],
            "info": ["info", "rexgradient_valid", "--root", str(root), "-q"],
            "harmonize": ["harmonize", "rexgradient_valid", "--root", str(root),
                          "--out", str(tmp_path / "valid.parquet"), "-q"]}[command]
    got = _imported(args)
    assert got["code"] == 0
    assert not got["torch"], f"radharmony {command} imported torch"
