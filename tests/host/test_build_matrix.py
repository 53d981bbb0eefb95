"""cleanbuild.commands.build_matrix: the first variant builds alone, the others at the same time (a barrier only
they can pass together), each through the build steps of its own plan, with its own engine client and its lines
labelled; a failure lets the others finish and is raised after them. The real builds: tests/integration
(test_matrix_rebuilds_only_what_is_missing), and benchmarks/bench_build.py's matrix row."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from cleanbuild import commands, run
from cleanbuild.errors import StepFailed

STEPS = ("preflight", "prepare", "wheels", "clean", "patch", "validate", "smoke", "tag", "report")


def _plans(*stems: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(stem=stem, steps=STEPS) for stem in stems]


@pytest.fixture
def calls(monkeypatch):
    """Each pipeline.run as (stem, steps, client, the echo label, the thread); the variants after the first wait
    at a barrier for each other (3 s), so they pass only when they run at the same time."""
    seen: list[tuple] = []
    state = {"barrier": None, "fail": set()}

    def fake_run(plan, cli, names, failed_report=True):
        seen.append((plan.stem, tuple(names), cli, run.label(), threading.current_thread().name))
        if state["barrier"] is not None and plan.stem != "first":
            state["barrier"].wait(timeout=3)
        if plan.stem in state["fail"]:
            raise StepFailed(f"{plan.stem} failed")
        return f"record of {plan.stem}"

    clients = iter(range(1, 100))
    monkeypatch.setattr(commands.pipeline, "run", fake_run)
    monkeypatch.setattr(commands.engine, "client", lambda: f"client-{next(clients)}")
    return seen, state


def test_the_first_variant_builds_alone_then_the_others_at_once_each_with_its_own_client(calls):
    seen, state = calls
    state["barrier"] = threading.Barrier(3)
    recs = commands.build_matrix("main-client", _plans("first", "gfx942-ckfree", "gfx950-ck", "gfx950-ckfree"))
    assert recs == ["record of first", "record of gfx942-ckfree", "record of gfx950-ck", "record of gfx950-ckfree"]
    assert seen[0] == ("first", ("preflight", "prepare", "wheels", "clean", "patch"), "main-client", "", "MainThread")
    rest = sorted(seen[1:])
    assert [s[0] for s in rest] == ["gfx942-ckfree", "gfx950-ck", "gfx950-ckfree"]
    assert all(s[1] == seen[0][1] and s[3] == f"[{s[0]}] " and s[4].startswith("matrix") for s in rest)
    assert len({s[2] for s in rest}) == 3 and "main-client" not in {s[2] for s in rest}
    assert run.label() == ""  # the label stays in the threads


def test_a_plan_without_the_patch_step_is_built_as_far_as_it_goes(calls):
    seen, _ = calls
    plans = [SimpleNamespace(stem="first", steps=("preflight", "prepare", "wheels", "clean", "dev", "report"))]
    commands.build_matrix("main-client", plans)
    assert seen == [("first", ("preflight", "prepare", "wheels", "clean", "dev"), "main-client", "", "MainThread")]


def test_a_failing_variant_lets_the_others_finish_then_raises(calls):
    seen, state = calls
    state["barrier"], state["fail"] = threading.Barrier(2), {"gfx942-ckfree"}
    with pytest.raises(StepFailed, match="gfx942-ckfree failed"):
        commands.build_matrix("main-client", _plans("first", "gfx942-ckfree", "gfx950-ckfree"))
    assert sorted(s[0] for s in seen) == ["first", "gfx942-ckfree", "gfx950-ckfree"]


def test_a_failing_first_variant_starts_no_other(calls):
    seen, state = calls
    state["fail"] = {"first"}
    with pytest.raises(StepFailed, match="first failed"):
        commands.build_matrix("main-client", _plans("first", "gfx942-ckfree"))
    assert [s[0] for s in seen] == ["first"]


def test_a_labelled_block_prefixes_echoed_commands(capsys):
    with run.labelled("gfx950-ckfree"):
        run.run(["true"])
    run.run(["true"])
    first, second = capsys.readouterr().err.splitlines()
    assert first.startswith("[gfx950-ckfree] + ") and first.endswith("true") and second.startswith("+ ")
