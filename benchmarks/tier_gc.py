"""Seconds the everyday tier's test processes spend in the garbage collector, with the tier's settings
(tests/support/gc_tuning.py) and with CPython's defaults (numbers, not assertions: not a test).

    python benchmarks/tier_gc.py [--rounds 2] [--no-record]

Runs `pytest -m "not docker"` with this checkout's `nox -s tests` arguments (noxfile.py's TIER list), in alternating
order: "defaults" blocks the plugin (`-p no:tests.support.gc_tuning`), "tuned" runs the tier as it is; both leave out
the test that the tier runs with its settings. A meter in every worker (benchmarks/gc_meter.py, gc.callbacks) adds
up the time inside collections. Prints each run and records the medians in results.json ("tier_gc"): the
collector's seconds and the CPU of the workers, the wall and the CPU of every process of the tier. The wall moves
about 10 % on this machine from one run to the next; the collector's seconds are the steadier number.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from tier_cpu import record_tier_row, tier  # noqa: E402  (benchmarks/, the script's folder)

MODES = {"defaults": ("-p", "no:tests.support.gc_tuning"), "tuned": ()}
# The test that the tier runs with its settings fails, as it should, where they are blocked: left out of both runs.
SETTINGS_TEST = "tests/benchmarks/test_tier_gc.py::test_this_process_runs_its_tests_with_the_tiers_collector_settings"


def one(mode: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "gc.jsonl"
        wall, cpu, summary = tier([], ("-p", "gc_meter", "--deselect", SETTINGS_TEST, *MODES[mode]),
                                  {"GC_METER_OUT": str(out), "PYTHONPATH": str(HERE)})
        lines = [json.loads(ln) for ln in out.read_text().splitlines()]
    return {"mode": mode, "summary": summary, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), **workers(lines)}


def workers(lines: list[dict]) -> dict:
    """The meter's lines of one run (benchmarks/gc_meter.py) -> the workers' sums; the controller runs no test."""
    tested = [ln for ln in lines if ln["process"] != "controller"]
    if not tested:
        raise SystemExit("no worker wrote a gc line: was the tier run with -p gc_meter and GC_METER_OUT set?")
    return {"workers_gc_s": round(sum(w["gc_s"] for w in tested), 2),
            "collections": sum(w["collections"] for w in tested),
            "workers_cpu_s": round(sum(w["cpu_s"] for w in tested), 1),
            "thresholds": sorted({tuple(w["threshold"]) for w in tested})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="alternating pairs of runs (default 2)")
    parser.add_argument("--no-record", action="store_true", help="print only; results.json unchanged")
    args = parser.parse_args()
    runs = []
    for i in range(args.rounds):
        for mode in (("defaults", "tuned") if i % 2 == 0 else ("tuned", "defaults")):
            runs.append(one(mode))
            print(json.dumps(runs[-1]), flush=True)
    medians = {mode: {key: round(statistics.median(r[key] for r in runs if r["mode"] == mode), 2)
                      for key in ("wall_s", "cpu_s", "workers_gc_s", "collections", "workers_cpu_s")}
               for mode in MODES}
    print(json.dumps(medians))
    if not args.no_record:
        record_tier_row("tier_gc", f"python benchmarks/tier_gc.py --rounds {args.rounds}",
                        {"medians": medians, "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
