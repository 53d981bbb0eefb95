"""The tier's garbage collector settings (tests/support/gc_tuning.py) and benchmarks/tier_gc.py's meter."""

from __future__ import annotations

import gc
import json

import pytest

from tests.support import gc_tuning
from tests.support.scripts import load_bench


def test_this_process_runs_its_tests_with_the_tiers_collector_settings():
    """Registered by tests/conftest.py: collection's survivors are frozen and the young are collected rarely."""
    assert gc.get_threshold() == (gc_tuning.YOUNG, gc_tuning.MIDDLE, gc_tuning.OLD)
    assert gc.get_freeze_count() > 0  # CPython freezes nothing by itself


@pytest.fixture
def meter():
    module = load_bench("gc_meter")
    yield module
    gc.callbacks.remove(module._meter)


def test_the_meter_adds_up_the_collections_and_writes_one_line(meter, tmp_path, monkeypatch):
    monkeypatch.setenv("GC_METER_OUT", str(tmp_path / "gc.jsonl"))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    gc.collect()
    gc.collect()
    meter.pytest_sessionfinish(None)
    line = json.loads((tmp_path / "gc.jsonl").read_text())
    assert (line["process"], line["threshold"]) == ("gw7", list(gc.get_threshold()))
    assert line["collections"] >= 2 and line["gc_s"] > 0 and line["cpu_s"] > 0


def test_a_run_sums_its_workers_and_leaves_the_controller_out():
    tier_gc = load_bench("tier_gc")
    lines = [{"process": "gw0", "gc_s": 1.25, "collections": 300, "cpu_s": 20.0, "threshold": [50000, 20, 100]},
             {"process": "gw1", "gc_s": 0.5, "collections": 200, "cpu_s": 30.0, "threshold": [50000, 20, 100]},
             {"process": "controller", "gc_s": 9.0, "collections": 9, "cpu_s": 9.0, "threshold": [700, 10, 10]}]
    assert tier_gc.workers(lines) == {"workers_gc_s": 1.75, "collections": 500, "workers_cpu_s": 50.0,
                                      "thresholds": [(50000, 20, 100)]}
    with pytest.raises(SystemExit, match="no worker wrote a gc line"):
        tier_gc.workers(lines[2:])
