"""cleanbuild.commands.build.build_matrix: every variant at the same time (a barrier only they can pass together), each
through the build steps of its own plan, with its own engine client and its lines labelled; a failure lets the
others finish and is raised after them. A unit the variants share is built once: schedule.ensure holds one lock per
unit key (test_one_key_is_built_once_by_threads_that_both_need_it). The real builds: tests/integration
(test_matrix_rebuilds_only_what_is_missing), and benchmarks/bench_build.py's matrix row."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from types import SimpleNamespace

import pytest

from cleanbuild.commands import build
from cleanbuild.core import run
from cleanbuild.core.errors import StepFailed

STEPS = ("preflight", "prepare", "wheels", "clean", "patch", "validate", "smoke", "tag", "report")


def _plans(*stems: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(stem=stem, steps=STEPS) for stem in stems]


@pytest.fixture
def calls(monkeypatch):
    """Each pipeline.run as (stem, steps, client, the echo label, the thread); with a barrier, every variant waits
    at it for the others (3 s), so they pass only when they run at the same time."""
    seen: list[tuple] = []
    state = {"barrier": None, "fail": set()}

    def fake_run(plan, client, names, failed_report=True):
        seen.append((plan.stem, tuple(names), client, run.label(), threading.current_thread().name))
        if state["barrier"] is not None:
            state["barrier"].wait(timeout=3)
        if plan.stem in state["fail"]:
            raise StepFailed(f"{plan.stem} failed")
        return f"record of {plan.stem}"

    clients = iter(range(1, 100))
    monkeypatch.setattr(build.pipeline, "run", fake_run)
    monkeypatch.setattr(build.engine, "client", lambda: f"client-{next(clients)}")
    return seen, state


def test_every_variant_builds_at_once_each_with_its_own_client_and_label(calls):
    seen, state = calls
    state["barrier"] = threading.Barrier(4)
    recs = build.build_matrix("main-client", _plans("gfx942-ck", "gfx942-ckfree", "gfx950-ck", "gfx950-ckfree"))
    assert recs == ["record of gfx942-ck", "record of gfx942-ckfree", "record of gfx950-ck", "record of gfx950-ckfree"]
    got = sorted(seen)
    assert [s[0] for s in got] == ["gfx942-ck", "gfx942-ckfree", "gfx950-ck", "gfx950-ckfree"]
    assert all(s[1] == ("preflight", "prepare", "wheels", "clean", "patch") for s in got)
    assert all(s[3] == f"[{s[0]}] " and s[4].startswith("matrix") for s in got)
    assert len({s[2] for s in got}) == 4 and "main-client" not in {s[2] for s in got}
    assert run.label() == ""  # the label stays in the threads


def test_a_single_variant_builds_on_this_thread_as_far_as_its_plan_goes(calls):
    seen, _ = calls
    plans = [SimpleNamespace(stem="first", steps=("preflight", "prepare", "wheels", "clean", "dev", "report"))]
    build.build_matrix("main-client", plans)
    assert seen == [("first", ("preflight", "prepare", "wheels", "clean", "dev"), "main-client", "", "MainThread")]


def test_a_failing_variant_lets_the_others_finish_then_raises_the_first_in_order(calls):
    seen, state = calls
    state["barrier"], state["fail"] = threading.Barrier(3), {"gfx942-ckfree", "gfx950-ckfree"}
    with pytest.raises(StepFailed, match="gfx942-ckfree failed"):
        build.build_matrix("main-client", _plans("gfx942-ck", "gfx942-ckfree", "gfx950-ckfree"))
    assert sorted(s[0] for s in seen) == ["gfx942-ck", "gfx942-ckfree", "gfx950-ckfree"]


def test_one_key_is_built_once_by_threads_that_both_need_it(monkeypatch):
    """Two variants' threads need one unit at once: the first builds it (slowly), the second waits for the key's
    lock and then finds the image by key. Without the lock both would build it."""
    from cleanbuild.images import buildx, schedule
    from tests.support.builds import VARIANTS, offline_plan
    from tests.support.fake_engine import Builds, FakeEngine

    plan = offline_plan(VARIANTS[0])
    fake = FakeEngine()
    builds = Builds(fake, plan)
    started = threading.Event()

    def slow_build(spec, options, **kwargs):
        started.set()
        time.sleep(0.5)  # the other thread asks for the unit meanwhile
        return builds(spec, options, **kwargs)

    monkeypatch.setattr(buildx, "build", slow_build)
    site = schedule.Site(plan, fake, None)  # no engine facts: the classic store's path
    unit = plan.unit("builder")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(schedule.ensure, site, unit)
        started.wait(5)
        second = pool.submit(schedule.ensure, site, unit)
        got = [first.result(timeout=10), second.result(timeout=10)]
    assert [u.status for u in got] == ["built", "reused"] and builds.built == ["builder"]
    assert got[1].image_id == got[0].image_id and got[1].seconds > 0.3  # it waited for the build


def test_a_labelled_block_prefixes_echoed_commands(capsys):
    with run.labelled("gfx950-ckfree"):
        run.run(["true"])
    run.run(["true"])
    first, second = capsys.readouterr().err.splitlines()
    assert first.startswith("[gfx950-ckfree] + ") and first.endswith("true") and second.startswith("+ ")
