"""The everyday tier of two checkouts, in alternating rounds on one machine (numbers, not assertions: not a test).

    python benchmarks/bench_unit_tier.py BEFORE_DIR AFTER_DIR [--rounds 2]

Each round runs `pytest -m "not docker"` with the arguments of each checkout's own `nox -s tests` (its noxfile's
TIER list, read with ast), from that checkout, with this interpreter (so the same torch, triton and pytest-xdist
both times), before first in odd rounds and after first in even ones. It prints each run's wall seconds and pytest's
summary line, then the median of each side. A checkout without tests/__init__.py gets one for the run (the tier's
`tests.support` imports must resolve to that checkout, not to an editable install of another) and loses it after.
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def tier_args(checkout: Path) -> list[str]:
    """The TIER list of the checkout's noxfile.py."""
    for node in ast.parse((checkout / "noxfile.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "TIER" for t in node.targets):
            return [str(x) for x in ast.literal_eval(node.value)]
    raise SystemExit(f"{checkout}/noxfile.py defines no TIER list")


def run_tier(checkout: Path) -> tuple[float, str]:
    marker = checkout / "tests" / "__init__.py"
    made = not marker.exists()
    marker.touch()
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not docker",
                               *tier_args(checkout)], cwd=checkout, env=env, capture_output=True, text=True,
                              check=False)
    finally:
        if made:
            marker.unlink()
    wall = time.perf_counter() - start
    summary = (proc.stdout.strip().splitlines() or ["no output"])[-1]
    return wall, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    walls: dict[str, list[float]] = {"before": [], "after": []}
    for n in range(args.rounds):
        order = ("before", "after") if n % 2 == 0 else ("after", "before")
        for side in order:
            wall, summary = run_tier(getattr(args, side).resolve())
            walls[side].append(wall)
            print(f"round {n + 1} {side}: {wall:.1f} s wall; {summary}", flush=True)
    print(" ".join(f"{side} median {statistics.median(w):.1f} s" for side, w in walls.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
