"""The executor's cleanup (cleanbuild.images.pipeline) on the shared fake engine: a failure or a Ctrl-C leaves no release
tag, keeps the candidate as <run-id>-failed, writes a failed report and removes the run's containers; a second
Ctrl-C cannot stop cleanup half-way.

build-clean's steps from the wheels build to the report run for real, through cleanbuild.core.engine, over the fake
(tests/support/fake_engine.py). Only the outermost boundaries are replaced: the build (buildx) and what each
container does inside (its program). Faults land at exact engine calls: a refusal, or a real SIGINT once the engine
has done a call. preflight and prepare are left out: they ask the host (disk, mmdebstrap), not the engine.
"""

from __future__ import annotations

import json

import pytest

import docker
from cleanbuild.core import metadata
from cleanbuild.core.errors import Interrupted, StepFailed
from cleanbuild.images import buildx, pipeline, report
from cleanbuild.images.plan import DEV_STEPS, STEPS
from cleanbuild.images.record import BuildRecord
from tests.support.builds import VARIANTS, offline_plan
from tests.support.fake_engine import Builds, FakeEngine, busy, ctrl_c, json_file

BUILD = ("wheels", "clean", "patch", "validate", "smoke", "tag", "report")
VERSIONS = {"schema": 2, "arch": "gfx950", "ck_mode": "ckfree", "python": "3.12", "rocm": None, "torch_hip": None,
            "packages": {"aiter": "0.1.20", "atom": "0.1.1"}, "sources": {}}
# What the units' Dockerfiles write that later steps read: the wheels manifest, versions.json, the patch report.
FILES = {"wheels": {"/wheels/manifest.json": json_file({"wheels": [], "sources": {}})},
         "clean": {metadata.VERSIONS_PATH: json_file(VERSIONS)},
         "candidate": {metadata.PATCHES_PATH: json_file({"patches": []})}}
RELEASE = "atom-build/atom-gfx950-ckfree:user_19700101_rocmna_aiter0.1.20_atom0.1.1"  # from VERSIONS and the options


def validation(status: str, exit_code: int):
    """A validation container: writes its report to the run folder (the /out mount) and exits."""
    def program(container):
        checks = [{"name": "arch-consistency", "status": status}]
        container.host_path("/out/validation.json").write_text(json.dumps({"checks": checks}))
        return exit_code, f"arch-consistency {status}"
    return program


def smoke_passes(container):
    return 0, 'SMOKE_RESULT {"new_tokens": 10, "counted_by": "token ids"}'


@pytest.fixture
def plan(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "REPORTS", tmp_path / "reports")
    return offline_plan(VARIANTS[0], run_id="t", model=tmp_path / "model", cache_dir=tmp_path / "cache")


@pytest.fixture
def fake(plan, monkeypatch):
    f = FakeEngine()
    monkeypatch.setattr(buildx, "build", Builds(f, plan, FILES))
    f.programs.update({"atom-validate-": validation("passed", 0), "atom-smoke-": smoke_passes})
    return f


def failed_tag(plan) -> str:
    return f"{plan.release_repo}:{plan.options.run_id}-failed"


def failed_report(tmp_path, plan) -> dict:
    return json.loads((tmp_path / "reports" / "atom-gfx950-ckfree" / f"{plan.options.run_id}-failed" / "report.json")
                      .read_text())


def interrupted(plan, fake) -> str:
    """The Interrupted line of a run that a Ctrl-C stops; a KeyboardInterrupt that escapes the executor fails this
    test (and not the whole pytest session)."""
    with pytest.raises(Interrupted) as info:
        try:
            pipeline.run(plan, fake, BUILD)
        except KeyboardInterrupt:
            pytest.fail("Ctrl-C escaped the executor: cleanup did not finish")
    return str(info.value)


def test_a_passing_run_tags_the_candidate_with_exactly_one_release_tag(plan, fake):
    rec = pipeline.run(plan, fake, BUILD)
    assert fake.tags(plan.release_repo) == [RELEASE]
    assert rec.release_ref == RELEASE and fake.names[RELEASE] == fake.names[plan.patch.image]
    assert fake.live() == []


def test_a_failed_step_keeps_the_candidate_as_run_id_failed_and_tags_no_release(plan, fake):
    fake.programs["atom-validate-"] = validation("failed", 1)
    with pytest.raises(StepFailed, match="validation failed inside the image: arch-consistency"):
        pipeline.run(plan, fake, BUILD)
    assert fake.tags(plan.release_repo) == [failed_tag(plan)]
    assert fake.names[failed_tag(plan)] == fake.names[plan.patch.image]


def test_a_failed_step_writes_the_failed_report(plan, fake, tmp_path):
    fake.programs["atom-validate-"] = validation("failed", 1)
    with pytest.raises(StepFailed):
        pipeline.run(plan, fake, BUILD)
    data = failed_report(tmp_path, plan)
    assert (data["status"], data["tag"], data["validation_status"]) == ("failed", None, "failed")
    assert data["error"].startswith("validation failed inside the image: arch-consistency")
    assert [(s["name"], s["status"]) for s in data["steps"]][-2:] == [("patch", "passed"), ("validate", "failed")]


def test_a_container_the_step_could_not_remove_is_removed_by_cleanup(plan, fake, capsys):
    """The engine refuses the validation container's removal once (busy): the step fails, cleanup removes it."""
    fake.refuse("container.remove", busy(), subject="atom-validate-")
    with pytest.raises(StepFailed, match="refused run_container"):
        pipeline.run(plan, fake, BUILD)
    assert fake.live() == []
    assert f"removed containers atom-validate-{plan.options.run_id}" in capsys.readouterr().err


def test_a_step_failing_after_the_tag_removes_the_release_tag(plan, fake, capsys):
    """The engine refuses the report step's question (the candidate's history): the release tag goes again."""
    fake.refuse("api.history", docker.errors.APIError("history: the engine is shutting down"))
    with pytest.raises(StepFailed, match="refused history"):
        pipeline.run(plan, fake, BUILD)
    assert fake.tags(plan.release_repo) == [failed_tag(plan)]
    assert f"removed the release tag {RELEASE}" in capsys.readouterr().err


def test_ctrl_c_in_a_step_removes_its_container_and_tags_no_release(plan, fake):
    """Ctrl-C lands once the engine has created the smoke container, before the SDK returns it to the runner."""
    fake.after("containers.create", ctrl_c, subject="atom-smoke-")
    line = interrupted(plan, fake)
    assert fake.live() == []
    assert f"removed containers atom-smoke-{plan.options.run_id}" in line
    assert fake.tags(plan.release_repo) == [failed_tag(plan)]
    assert line.endswith("; no release tag.")


def test_ctrl_c_after_the_tag_step_removes_the_release_tag_and_says_so(plan, fake, tmp_path):
    fake.after("api.history", ctrl_c)  # the report step, after the tag step, asks for the candidate's history
    line = interrupted(plan, fake)
    assert f"removed the release tag {RELEASE}" in line and line.endswith("; no release tag.")
    assert fake.tags(plan.release_repo) == [failed_tag(plan)]
    assert failed_report(tmp_path, plan)["error"] == "interrupted"


def test_ctrl_c_while_the_engine_applies_the_release_tag_still_removes_it(plan, fake):
    """The tag exists but the step never returned: the journal names it, so cleanup finds it."""
    fake.after("image.tag", ctrl_c, subject=RELEASE)
    line = interrupted(plan, fake)
    assert f"removed the release tag {RELEASE}" in line
    assert fake.tags(plan.release_repo) == [failed_tag(plan)]


def test_a_second_ctrl_c_during_cleanup_still_finishes_cleanup(plan, fake, tmp_path):
    """The second press lands in cleanup's first action (the container list): the rest still runs."""
    fake.after("api.history", ctrl_c)
    fake.after("containers.list", ctrl_c)  # only cleanup lists containers
    line = interrupted(plan, fake)
    assert "Ctrl-C during cleanup was held back until cleanup finished" in line
    assert fake.tags(plan.release_repo) == [failed_tag(plan)]
    assert failed_report(tmp_path, plan)["status"] == "failed"


def test_a_users_image_that_fails_keeps_its_own_names(plan, fake):
    """A single step on an image the user named (`nox -s validate`): no -failed tag, the user's name stays."""
    image = fake.add_image(("base", "mine"), name="me/mine:1", files=FILES["clean"])
    fake.programs["atom-validate-"] = validation("failed", 1)
    rec = BuildRecord(run_id=plan.options.run_id, started=0.0, started_at="now", candidate_id=image,
                      candidate_ref="me/mine:1")
    with pytest.raises(StepFailed):
        pipeline.run(plan, fake, ("validate",), rec)
    assert fake.tags(plan.release_repo) == [] and fake.names == {"me/mine:1": image}


def test_an_error_that_is_not_cleanbuilds_after_the_tag_still_removes_the_release_tag(plan, fake, tmp_path,
                                                                                     monkeypatch):
    """The report step cannot make its folder (an OSError: a file stands where the reports go); cleanup runs as
    for any failure, and the error goes on to the caller."""
    (tmp_path / "taken").write_text("")
    monkeypatch.setattr(report, "REPORTS", tmp_path / "taken" / "reports")
    with pytest.raises(NotADirectoryError):
        pipeline.run(plan, fake, BUILD)
    assert fake.tags(plan.release_repo) == [failed_tag(plan)]


def test_the_step_table_names_every_step_in_build_order():
    """pipeline.STEPS is the one table of the steps and what each is given: a plan's steps, --src's dev step among
    them, in the order a plan runs them, then promote's push."""
    assert list(pipeline.STEPS) == [*DEV_STEPS, "push"]
    assert set(STEPS) < set(pipeline.STEPS)
