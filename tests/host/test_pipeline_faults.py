"""Faults at exact points, without an engine: a Ctrl-C while a file is read from an image (defect 3), a second
Ctrl-C during cleanup (defect 4), a Ctrl-C during `wheels --export` (defect 7)."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import replace
from pathlib import Path

import pytest

from cleanbuild import buildx, engine, interrupts, pipeline, profiles, report
from cleanbuild.arch import Arch
from cleanbuild.errors import StepFailed
from cleanbuild.metadata import RUN_LABEL
from cleanbuild.plan import make_plan
from cleanbuild.record import StepFailedWith
from cleanbuild.spec import Options


class FakeContainer:
    def __init__(self, engine_, name, labels):
        self.engine, self.name, self.labels, self.removed = engine_, name, labels, False

    def get_archive(self, path):
        raise KeyboardInterrupt  # the user presses Ctrl-C while the file streams

    def remove(self, force=False):
        self.removed = True
        self.engine.live.remove(self)


class FakeContainers:
    def __init__(self, engine_):
        self.engine = engine_

    def create(self, image, command=None, entrypoint=None, network_disabled=None, name=None, labels=None):
        container = FakeContainer(self.engine, name, labels or {})
        self.engine.live.append(container)
        return container

    def list(self, all=False, filters=None, ignore_removed=False):  # noqa: A002 - the SDK's names
        key, value = filters["label"].split("=", 1)
        return [c for c in self.engine.live if c.labels.get(key) == value]


class FakeEngine:
    def __init__(self):
        self.live: list[FakeContainer] = []
        self.containers = FakeContainers(self)


def test_ctrl_c_while_reading_a_file_leaves_no_container():
    cli = FakeEngine()
    with pytest.raises(KeyboardInterrupt):
        engine.read_file(cli, "some/image", "/opt/atom-build/versions.json", run_id="r1")
    assert cli.live == []


class PressedDuringCreate(FakeContainers):
    """The engine has created the container when Ctrl-C lands, before the SDK hands it back (CI, 2026-12-01: the
    container was left, and every later test that counts containers failed)."""

    streams = False

    def create(self, image, **kw):
        container = (StreamingContainer if self.streams else FakeContainer)(self.engine, kw["name"], kw["labels"])
        self.engine.live.append(container)
        os.kill(os.getpid(), signal.SIGINT)
        return container


class StreamingContainer(FakeContainer):
    def get_archive(self, path):
        return iter([_one_file_tar(b'{"rocm": null}')]), {}


def _one_file_tar(data: bytes) -> bytes:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        info = tarfile.TarInfo("versions.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_ctrl_c_between_create_and_its_return_still_removes_the_read_container():
    cli = FakeEngine()
    cli.containers = PressedDuringCreate(cli)
    cli.containers.streams = True
    with pytest.raises(KeyboardInterrupt):  # delivered once the read is over
        engine.read_file(cli, "some/image", "/opt/atom-build/versions.json", run_id="r1")
    assert cli.live == []


def test_a_read_inside_cleanup_leaves_ctrl_c_to_cleanup():
    """Nested: the read does not raise mid-cleanup; cleanup counts the press and runs to its end."""
    cli = FakeEngine()
    cli.containers = PressedDuringCreate(cli)
    with interrupts.held(reraise=False) as pressed:
        with pytest.raises(KeyboardInterrupt):  # FakeContainer's stream is interrupted by the user, as before
            engine.read_file(cli, "some/image", "/x", run_id="r1")
        done = "cleanup went on"
    assert (done, pressed, cli.live) == ("cleanup went on", [signal.SIGINT], [])


def test_every_container_a_run_creates_carries_its_label_so_cleanup_finds_it():
    cli = FakeEngine()
    left = FakeContainer(cli, "atom-read-r2-7", {RUN_LABEL: "r2"})
    other = FakeContainer(cli, "someone-else", {RUN_LABEL: "r3"})
    cli.live += [left, other]
    assert engine.remove_run_containers(cli, "r2") == ["atom-read-r2-7"]
    assert cli.live == [other]


def test_a_second_ctrl_c_during_cleanup_is_held_back():
    finished = []
    with interrupts.held(reraise=False) as pressed:
        os.kill(os.getpid(), signal.SIGINT)  # would raise KeyboardInterrupt outside the block
        finished.append("cleanup ran to the end")
    assert finished == ["cleanup ran to the end"] and pressed == [signal.SIGINT]
    with pytest.raises(KeyboardInterrupt):  # and SIGINT is back to normal after it
        os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_during_export_leaves_no_wheel_under_its_final_name(tmp_path, monkeypatch):
    plan = make_plan(profiles.load("offline"), Options(arch=Arch.GFX942, cache_dir=tmp_path / "cache"))

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
    plan = make_plan(profiles.load("offline"), Options(arch=Arch.GFX942, run_id="r9", cache_dir=tmp_path / "cache"))
    with pytest.raises(StepFailed, match="validation failed inside the image"):
        pipeline.run(plan, FakeEngine(), ("validate",))
    data = json.loads((tmp_path / "reports" / "atom-gfx942" / "r9-failed" / "report.json").read_text())
    assert (data["validation"], data["validation_status"]) == (checks, "failed")
    assert [(s["name"], s["status"]) for s in data["steps"]] == [("validate", "failed")]
