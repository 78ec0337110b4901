"""How fast the ``radharmony`` command answers: ``radharmony list`` against ``import torch``.

Each command runs in a fresh Python process, alternating, ``--rounds`` times; the medians of
the wall times and their ratio are printed. The target (issue 33): ``radharmony list`` takes
at most 0.3x the time of ``python -c "import torch"`` on the same machine, which holds only
while ``list``, ``--help`` and ``vocab`` import neither torch nor pandas
(``tests/test_catalog.py`` checks that).

    python -m benchmarks.cli_startup [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = 0.3
COMMANDS = {
    "radharmony list": [sys.executable, "-m", "radharmony", "list"],
    "radharmony --help": [sys.executable, "-m", "radharmony", "--help"],
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
    "python -c 'import radharmony'": [sys.executable, "-c", "import radharmony"],
}


def _wall(argv: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                                      os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, cwd=REPO)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    for cmd in COMMANDS.values():  # warm the file cache and the .pyc files
        _wall(cmd)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.rounds):
        for name, cmd in COMMANDS.items():
            times[name].append(_wall(cmd))
    med = {name: statistics.median(t) for name, t in times.items()}
    ratio = med["radharmony list"] / med["python -c 'import torch'"]
    for name, value in med.items():
        print(f"{name:32s} median {value * 1000:7.0f} ms  (of {args.rounds}: "
              f"{min(times[name]) * 1000:.0f}-{max(times[name]) * 1000:.0f} ms)")
    print(f"radharmony list / import torch: {ratio:.3f} (target <= {TARGET}: "
          f"{'met' if ratio <= TARGET else 'NOT met'})")
    return {"medians_s": med, "ratio": ratio, "target": TARGET}


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
