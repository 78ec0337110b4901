"""How fast the ``radharmony`` command answers: ``list``, ``info`` and ``harmonize`` against
``import torch``.

Each command runs in a fresh Python process, alternating, ``--rounds`` times; the medians of
the wall times and their ratios to ``python -c "import torch"`` are printed. ``info`` and
``harmonize`` run on a small ReXGradient replica written first (``--studies`` studies). The
targets: ``radharmony list`` takes at most 0.3x the time of ``import torch`` on the same
machine (issue 33), which holds only while ``list``, ``--help`` and ``vocab`` import neither
torch nor pandas (``tests/test_catalog.py`` checks that); issue 43 asks the same 0.3x of
``info`` and ``harmonize`` (metadata only: they need pandas, not torch).

    python -m benchmarks.cli_startup [--rounds 7] [--studies 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = 0.3
TORCH = "python -c 'import torch'"
#: the floor of any command that reads a table: pandas alone (it imports numpy and pyarrow)
FLOOR = "python -c 'import pandas'"
#: the commands held to TARGET
MEASURED = ("radharmony list", "radharmony info", "radharmony harmonize")


def commands(root: Path, out: Path) -> dict[str, list[str]]:
    rh = [sys.executable, "-m", "radharmony"]
    return {
        "radharmony list": rh + ["list"],
        "radharmony --help": rh + ["--help"],
        "radharmony info": rh + ["info", "rexgradient_valid", "--root", str(root), "-q"],
        "radharmony harmonize": rh + ["harmonize", "rexgradient_valid", "--root", str(root),
                                      "--out", str(out), "-q"],
        TORCH: [sys.executable, "-c", "import torch"],
        "python -c 'import radharmony'": [sys.executable, "-c", "import radharmony"],
        FLOOR: [sys.executable, "-c", "import pandas"],
    }


def _wall(argv: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                                      os.environ.get("PYTHONPATH")]))}
    # as a user runs it: with the compiled .pyc files (a shell with PYTHONDONTWRITEBYTECODE=1
    # would compile every radharmony module on every run, ~0.3 s more on each command)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, cwd=REPO)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--studies", type=int, default=8, help="studies of the replica")
    args = ap.parse_args(argv)
    from radharmony.fake import write_rexgradient

    with tempfile.TemporaryDirectory() as work:
        root = write_rexgradient(Path(work) / "rex", studies={"valid": args.studies}, seed=0)
        cmds = commands(root, Path(work) / "valid.parquet")
        for cmd in cmds.values():  # warm the file cache and the .pyc files
            _wall(cmd)
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(args.rounds):
            for name, cmd in cmds.items():
                times[name].append(_wall(cmd))
    med = {name: statistics.median(t) for name, t in times.items()}
    ratios = {name: med[name] / med[TORCH] for name in MEASURED}
    for name, value in med.items():
        print(f"{name:32s} median {value * 1000:7.0f} ms  (of {args.rounds}: "
              f"{min(times[name]) * 1000:.0f}-{max(times[name]) * 1000:.0f} ms)")
    print(f"{FLOOR} / import torch: {med[FLOOR] / med[TORCH]:.3f} (the floor of info and "
          f"harmonize, which read tables with pandas)")
    for name, ratio in ratios.items():
        print(f"{name} / import torch: {ratio:.3f} (target <= {TARGET}: "
              f"{'met' if ratio <= TARGET else 'NOT met'})")
    return {"medians_s": med, "ratios": ratios, "ratio": ratios["radharmony list"],
            "target": TARGET}


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
