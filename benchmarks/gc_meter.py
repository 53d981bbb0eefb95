"""A pytest plugin for benchmarks/tier_gc.py: the seconds this process spent in the garbage collector (gc.callbacks,
wall clock), the collections, and the process's own CPU seconds, one JSON line appended to $GC_METER_OUT at the
session's end (each xdist worker and the controller write their own)."""

from __future__ import annotations

import gc
import json
import os
import resource
import time

_spent = {"seconds": 0.0, "collections": 0, "started": 0.0}


def _meter(phase: str, info: dict) -> None:
    if phase == "start":
        _spent["started"] = time.perf_counter()
    else:
        _spent["seconds"] += time.perf_counter() - _spent["started"]
        _spent["collections"] += 1


gc.callbacks.append(_meter)


def pytest_sessionfinish(session) -> None:
    use = resource.getrusage(resource.RUSAGE_SELF)
    line = {"process": os.environ.get("PYTEST_XDIST_WORKER", "controller"), "gc_s": round(_spent["seconds"], 6),
            "collections": _spent["collections"], "cpu_s": round(use.ru_utime + use.ru_stime, 2),
            "threshold": list(gc.get_threshold())}
    with open(os.environ["GC_METER_OUT"], "a") as out:
        out.write(json.dumps(line) + "\n")
