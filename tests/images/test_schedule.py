"""cleanbuild.images.schedule.run and Plan.needs: a step's units had as a graph. Units that need nothing of each
other run at the same time (a barrier only they can pass together), a unit starts only once what it needs is done,
the results come back in the plan's order, a failure starts nothing new and is raised once the running units finish.
The real builds through it: every integration test that builds (tests/integration), and bench_build.py's rows. The
rest of the scheduling (ensure, ensure_step) is tested with the units it has: tests/images/test_atonce.py,
test_reuse.py, test_reuse_decide.py and tests/commands/test_build_matrix.py."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from cleanbuild.core import run
from cleanbuild.images import schedule
from tests.support.builds import VARIANTS, offline_plan

# builder -> {torch, deps} -> aiter (needs both) ; installer needs builder only ; wheels needs everything
NEEDS = {"builder": (), "torch": ("builder",), "deps": ("builder",), "installer": ("builder",),
         "aiter": ("torch", "deps"), "wheels": ("aiter", "installer", "torch", "deps", "builder")}


def _units(*names: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(name=n) for n in names]


class Log:
    def __init__(self, together: set[str] = frozenset(), fail: set[str] = frozenset()):
        self.events: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.barrier = threading.Barrier(len(together)) if together else None
        self.together, self.fail = together, fail

    def work(self, unit) -> str:
        with self.lock:
            self.events.append(("start", unit.name))
        if unit.name in self.together:
            self.barrier.wait(timeout=5)
        if unit.name in self.fail:
            time.sleep(0.05)
            raise RuntimeError(f"{unit.name} failed")
        with self.lock:
            self.events.append(("end", unit.name))
        return f"{unit.name}:{run.label()}"


def needs(unit):
    return NEEDS[unit.name]


def test_units_that_need_nothing_of_each_other_run_at_once_and_results_keep_the_plans_order():
    log = Log(together={"torch", "deps"})
    units = _units("builder", "torch", "deps", "installer", "aiter", "wheels")
    results = schedule.run(units, needs, log.work)
    assert [r.split(":")[0] for r in results] == ["builder", "torch", "deps", "installer", "aiter", "wheels"]
    order = [e for e in log.events]
    for name, wanted in NEEDS.items():
        start = order.index(("start", name))
        assert all(order.index(("end", w)) < start for w in wanted), (name, order)


def test_each_units_lines_carry_its_name_after_the_outer_label():
    with run.labelled("gfx950-ckfree"):
        results = schedule.run(_units("builder", "torch"), needs, Log().work)
    assert results == ("builder:[gfx950-ckfree] [builder] ", "torch:[gfx950-ckfree] [torch] ")
    assert schedule.run(_units("builder"), needs, Log().work) == ("builder:",)  # one unit: nothing to tell apart


def test_a_failure_starts_nothing_new_lets_the_running_finish_and_is_raised():
    log = Log(together={"torch", "deps"}, fail={"torch"})
    with pytest.raises(RuntimeError, match="torch failed"):
        schedule.run(_units("builder", "torch", "deps", "installer", "aiter", "wheels"), needs, log.work)
    started = [n for kind, n in log.events if kind == "start"]
    assert "aiter" not in started and "wheels" not in started
    assert ("end", "deps") in log.events  # it was running: it finished


def test_a_free_thread_takes_the_first_unit_ready_in_order_not_the_first_queued(monkeypatch):
    """Two threads. aiter (first in order) waits for builder-git; torch, deps and installer are ready before it.
    When builder-git is done, aiter takes its thread ahead of the two ready since before (a pool's queue would
    have run them first)."""
    monkeypatch.setattr(schedule.os, "cpu_count", lambda: 2)
    order = ["aiter", "builder-git", "torch", "deps", "installer"]
    wants = {"aiter": ("builder-git",)}
    release, started, lock = threading.Event(), [], threading.Lock()

    def work(unit):
        with lock:
            started.append(unit.name)
        if unit.name == "torch":
            assert release.wait(timeout=5)  # holds the other thread until aiter has started
        if unit.name == "aiter":
            release.set()
        return unit.name

    schedule.run(_units(*order), lambda u: wants.get(u.name, ()), work)
    assert started[:3] == ["builder-git", "torch", "aiter"], started


def test_a_unit_that_needs_itself_is_refused():
    with pytest.raises(ValueError, match="need themselves"):
        schedule.run(_units("builder"), lambda u: ("builder",), Log().work)


def test_workers_are_bounded_by_the_units_and_the_cpus(monkeypatch):
    monkeypatch.setattr(schedule.os, "cpu_count", lambda: 2)
    assert [schedule.workers(n) for n in (1, 2, 5)] == [1, 2, 2]
    monkeypatch.setattr(schedule.os, "cpu_count", lambda: 64)
    assert schedule.workers(11) == 11


def test_the_plan_says_what_each_unit_reads_of_the_others():
    plan = offline_plan(VARIANTS[0], run_id="t")
    needs_of = {u.name: plan.needs(u) for u in plan.units}
    assert needs_of["builder"] == () and needs_of["torch"] == ("builder",)
    assert set(needs_of["aiter"]) >= {"builder-git", "deps", "torch"}
    assert set(needs_of["wheels"]) >= {"aiter", "atom", "installer", "torch", "deps"}
    assert needs_of["candidate"] == ("clean",) and "wheels" in needs_of["clean"]
    # Every need is a unit built before it: the plan's order is one the graph can follow.
    position = {u.name: i for i, u in enumerate(plan.units)}
    assert all(position[n] < position[u] for u, ns in needs_of.items() for n in ns)


def test_ctrl_c_waits_for_the_running_units_then_is_raised():
    """Ctrl-C lands in the main thread (here: interrupt_main from one unit); the other running unit, whose build
    got the signal too, still finishes its own cleanup before the KeyboardInterrupt leaves the graph."""
    import _thread

    events: list[str] = []

    def work(unit):
        if unit.name == "torch":
            time.sleep(0.05)
            _thread.interrupt_main()
            return "torch"
        time.sleep(0.5)
        events.append(f"{unit.name} cleaned up")
        return unit.name

    with pytest.raises(KeyboardInterrupt):
        schedule.run(_units("torch", "deps", "aiter"), lambda u: NEEDS[u.name] if u.name == "aiter" else (), work)
    assert events == ["deps cleaned up"]  # aiter (needs both) never started
