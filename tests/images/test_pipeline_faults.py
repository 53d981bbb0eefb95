"""Faults at exact points, on the shared fake engine (tests/support/fake_engine.py): a Ctrl-C while a file is read
from an image (defect 3), a second Ctrl-C during cleanup (defect 4), a Ctrl-C during `wheels --export` (defect 7).
The executor's whole cleanup, run by run, is in test_executor."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import replace
from pathlib import Path

import pytest

from cleanbuild.core import engine, interrupts
from cleanbuild.core.errors import StepFailed
from cleanbuild.core.metadata import RUN_LABEL
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import buildx, pipeline, report
from cleanbuild.images.plan import make_plan
from cleanbuild.images.record import StepFailedWith
from cleanbuild.upstream import profiles
from tests.support.fake_engine import FakeEngine, ctrl_c
from tests.support.requests import build_of

VERSIONS = {"/opt/atom-build/versions.json": b'{"rocm": null}'}


@pytest.fixture
def fake():
    f = FakeEngine()
    f.add_image(("base",), name="some/image", files=VERSIONS)
    return f


def test_ctrl_c_while_reading_a_file_leaves_no_container(fake):
    fake.refuse("container.get_archive", KeyboardInterrupt())  # the user presses Ctrl-C while the file streams
    with pytest.raises(KeyboardInterrupt):
        engine.read_file(fake, "some/image", "/opt/atom-build/versions.json", run_id="r1")
    assert fake.live() == []


def test_ctrl_c_between_create_and_its_return_still_removes_the_read_container(fake):
    """The engine has created the container when Ctrl-C lands, before the SDK hands it back (CI, 2026-12-01: the
    container was left, and every later test that counts containers failed)."""
    fake.after("containers.create", ctrl_c)
    with pytest.raises(KeyboardInterrupt):  # delivered once the read is over
        engine.read_file(fake, "some/image", "/opt/atom-build/versions.json", run_id="r1")
    assert fake.live() == []


def test_a_read_inside_cleanup_leaves_ctrl_c_to_cleanup(fake):
    """Nested: the read does not raise mid-cleanup; cleanup counts the press and runs to its end."""
    fake.after("containers.create", ctrl_c)
    fake.refuse("container.get_archive", KeyboardInterrupt())
    with interrupts.held(reraise=False) as pressed:
        with pytest.raises(KeyboardInterrupt):  # the stream is interrupted by the user, as before
            engine.read_file(fake, "some/image", "/x", run_id="r1")
        done = "cleanup went on"
    assert (done, pressed, fake.live()) == ("cleanup went on", [signal.SIGINT], [])


def test_every_container_a_run_creates_carries_its_label_so_cleanup_finds_it(fake):
    fake.containers.create("some/image", name="atom-read-r2-7", labels={RUN_LABEL: "r2"})
    other = fake.containers.create("some/image", name="someone-else", labels={RUN_LABEL: "r3"})
    assert engine.remove_run_containers(fake, "r2") == ["atom-read-r2-7"]
    assert fake.live() == [other]


def test_a_second_ctrl_c_during_cleanup_is_held_back():
    finished = []
    with interrupts.held(reraise=False) as pressed:
        os.kill(os.getpid(), signal.SIGINT)  # would raise KeyboardInterrupt outside the block
        finished.append("cleanup ran to the end")
    assert finished == ["cleanup ran to the end"] and pressed == [signal.SIGINT]
    with pytest.raises(KeyboardInterrupt):  # and SIGINT is back to normal after it
        os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_during_export_leaves_no_wheel_under_its_final_name(tmp_path, monkeypatch):
    plan = make_plan(profiles.load("offline"), build_of(Arch.GFX942, cache_dir=tmp_path / "cache"))

    def interrupted_build(argv, log, **kw):
        dest = Path(next(a for a in argv if a.startswith("type=local,dest=")).split("dest=", 1)[1])
        (dest / "wheels" / "common").mkdir(parents=True)
        (dest / "wheels" / "common" / "torch-2.13.0-cp311-cp311-linux_x86_64.whl").write_bytes(b"trunc")
        (dest / "wheels" / "manifest.json").write_text(json.dumps({"wheels": []}))
        raise KeyboardInterrupt

    monkeypatch.setattr(buildx, "run_logged", interrupted_build)
    target = tmp_path / "export"
    with pytest.raises(KeyboardInterrupt):
        buildx.export(plan.wheels, replace(plan.options, run_id="x"), target)
    assert not target.exists()
    assert list(tmp_path.glob(".export.partial-*")) == []  # the half-written folder is gone too


def test_a_failed_step_hands_what_it_learned_to_the_failed_report(tmp_path, monkeypatch):
    """StepFailedWith carries the record the step had made (validation's checks) into cleanup's failed report."""
    monkeypatch.setattr(report, "REPORTS", tmp_path / "reports")
    checks = {"checks": [{"name": "gemm", "status": "failed", "reason": "cosine 0.2"}]}

    def failing(ctx, rec):
        raise StepFailedWith("validation failed inside the image: gemm", replace(rec, validation=checks))

    monkeypatch.setitem(pipeline.STEPS, "validate", failing)
    plan = make_plan(profiles.load("offline"), build_of(Arch.GFX942, run_id="r9", cache_dir=tmp_path / "cache"))
    with pytest.raises(StepFailed, match="validation failed inside the image"):
        pipeline.run(plan, FakeEngine(), ("validate",))
    data = json.loads((tmp_path / "reports" / "atom-gfx942" / "r9-failed" / "report.json").read_text())
    assert (data["validation"], data["validation_status"]) == (checks, "failed")
    assert [(s["name"], s["status"]) for s in data["steps"]] == [("validate", "failed")]
