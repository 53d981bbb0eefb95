"""Where a cold build's unit seconds go outside `docker buildx build` (numbers, not assertions: not a test).

    python benchmarks/bench_units.py

Runs bench_build.py's `single` row (gfx950 CK-free cold, after pruning) with each unit's work timed by part: the
`docker buildx build` command, the docker CLI calls around it (`docker tag`, `docker image inspect`) and
cleanbuild.images.reuse.decide (the engine's image lists and inspects: found by key? what changed since the last
build here?). The rest of a unit's seconds is the step's own Python. The row goes to results.json's "units" entry.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bench_build  # noqa: E402  (benchmarks/, the script's folder)
from results_file import record  # noqa: E402

from cleanbuild.core import engine  # noqa: E402
from cleanbuild.images import buildx, reuse, schedule  # noqa: E402

PARTS = {"build_s": (buildx, "run_logged"), "docker_cli_s": (buildx, "run"), "reuse_decide_s": (reuse, "decide")}


def timed(spent: dict, here: threading.local) -> None:
    """Wrap each part, and schedule.ensure (a unit's whole), to add their seconds to the unit the thread is working on."""
    for part, (module, name) in PARTS.items():
        setattr(module, name, _adding(getattr(module, name), spent, here, part))
    whole = schedule.ensure

    def ensure(site, unit, *args, **kwargs):
        here.unit = unit.name
        return _adding(whole, spent, here, "total_s")(site, unit, *args, **kwargs)

    schedule.ensure = ensure


def _adding(fn, spent: dict, here: threading.local, part: str):
    def inner(*args, **kwargs):
        start = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[getattr(here, "unit", "?")][part] += time.monotonic() - start

    return inner


def main() -> int:
    spent: dict = collections.defaultdict(lambda: collections.defaultdict(float))
    timed(spent, threading.local())
    client = engine.client()
    row = bench_build.single(client)
    units = {u: {k: round(v, 2) for k, v in parts.items()} for u, parts in spent.items()}
    outside = {u: round(p["total_s"] - p.get("build_s", 0.0), 2) for u, p in units.items()}
    result = {"variant": row["variant"], "steps": row["steps"], "units": units,
              "outside_build_s": outside, "outside_build_total_s": round(sum(outside.values()), 1)}
    facts = engine.preflight(client, 1.0)
    store = "containerd image store" if facts.containerd_store else "classic image store"
    record(ROOT / "benchmarks" / "results.json", "units", {
        "date": dt.date.today().isoformat(), "engine": f"Docker {facts.version}, {store}",
        "command": "python benchmarks/bench_units.py", "result": result})
    print("BENCH units " + json.dumps(result))
    print("then: python benchmarks/render.py --write")
    return 0


if __name__ == "__main__":
    sys.exit(main())
