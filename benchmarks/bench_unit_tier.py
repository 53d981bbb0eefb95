"""The everyday tier of two checkouts, in alternating rounds on one machine (numbers, not assertions: not a test).

    python benchmarks/bench_unit_tier.py BEFORE_DIR AFTER_DIR [--rounds 2] [--nox]

Each round runs `pytest -m "not docker"` with the arguments of each checkout's own `nox -s tests` (its noxfile's
TIER list, read with ast), from that checkout, with this interpreter (so the same torch, triton and pytest-xdist
both times), before first in odd rounds and after first in even ones. It prints each run's wall seconds and pytest's
summary line, then the median of each side. A checkout without tests/__init__.py gets one for the run (the tier's
`tests.support` imports must resolve to that checkout, not to an editable install of another) and loses it after.

--nox runs each checkout's own `nox -s tests` instead, as a fresh clone does: its .nox folder and every
__pycache__ removed first, so every run makes its venv and starts with no compiled bytecode of the checkout; it
prints the session's wall seconds (venv included) and the pytest summary line, whose time the tier's goal counts.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
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


def run_nox(checkout: Path) -> tuple[float, str]:
    """`nox -s tests` in checkout from no .nox folder: (session wall seconds, pytest's summary line)."""
    shutil.rmtree(checkout / ".nox", ignore_errors=True)
    for cache in [p for p in checkout.rglob("__pycache__") if p.is_dir()]:  # a fresh clone has no bytecode either
        shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "nox", "-s", "tests"], cwd=checkout, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - start
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if re.search(r"\d+ passed.* in [\d.]+s", ln)]
    return wall, (lines or [f"no pytest summary (exit {proc.returncode})"])[-1].strip("= ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--nox", action="store_true", help="each checkout's own `nox -s tests`, from no .nox folder")
    args = parser.parse_args()
    run = run_nox if args.nox else run_tier
    walls: dict[str, list[float]] = {"before": [], "after": []}
    pytest_s: dict[str, list[float]] = {"before": [], "after": []}
    for n in range(args.rounds):
        order = ("before", "after") if n % 2 == 0 else ("after", "before")
        for side in order:
            wall, summary = run(getattr(args, side).resolve())
            walls[side].append(wall)
            pytest_s[side] += [float(m) for m in re.findall(r" in ([\d.]+)s", summary)[-1:]]
            print(f"round {n + 1} {side}: {wall:.1f} s wall; {summary}", flush=True)
    print(" ".join(f"{side} median {statistics.median(w):.1f} s" for side, w in walls.items()))
    if args.nox:
        print(" ".join(f"{side} pytest median {statistics.median(s):.2f} s" for side, s in pytest_s.items() if s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
