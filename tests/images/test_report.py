"""cleanbuild.images.report and cleanbuild.images.record without an engine: pure functions of the plan and the build record."""

from __future__ import annotations

import json

import pytest

from cleanbuild.core import metadata
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import plan as P
from cleanbuild.images import report
from cleanbuild.images.observe import observe
from cleanbuild.images.record import (
    BuildRecord,
    StepRecord,
    StepStatus,
    Wheels,
    clean_labels,
)
from cleanbuild.upstream import profiles
from tests.support.requests import build_of, offline_plan
from tests.support.upstream import AITER_PIN

STEPS = (StepRecord("preflight", StepStatus.PASSED, 0.1, "engine 26.1"),
         StepRecord("wheels", StepStatus.FAILED, 2.0, "boom"))


@pytest.fixture
def reports(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "REPORTS", tmp_path / "reports")
    return tmp_path / "reports"


def test_a_failed_run_writes_its_report_under_the_run_id(reports):
    rec = BuildRecord(run_id="r1", started=0.0, started_at="2026-11-29T00:00:00+00:00", steps=STEPS)
    folder = report.write(offline_plan(), rec, failed=True, error="the wheels build failed")
    data = json.loads((folder / "report.json").read_text())
    assert folder == reports / "atom-gfx942" / "r1-failed"
    assert (data["status"], data["error"], [s["name"] for s in data["steps"]]) == (
        "failed", "the wheels build failed", ["preflight", "wheels"])
    assert "- status: failed (the wheels build failed)" in (folder / "report.md").read_text()


def test_step_statuses_are_plain_strings_in_the_report(reports):
    rec = BuildRecord(run_id="r1", started=0.0, started_at="now", steps=STEPS)
    folder = report.write(offline_plan(), rec, failed=True)
    assert [s["status"] for s in json.loads((folder / "report.json").read_text())["steps"]] == ["passed", "failed"]
    assert "| preflight | passed | 0.1 | engine 26.1 |" in (folder / "report.md").read_text()


def test_rewriting_a_report_leaves_no_temporary_folder(reports):
    rec = BuildRecord(run_id="r1", started=0.0, started_at="now", steps=STEPS)
    report.write(offline_plan(), rec, failed=True)
    report.write(offline_plan(), rec, failed=True)
    assert sorted(p.name for p in (reports / "atom-gfx942").iterdir()) == ["r1-failed"]


def test_offline_report_lists_each_substitution_once():
    subs = offline_plan().profile.substitutes
    assert [s.split(":")[0] for s in subs] == ["base", "torch", "aiter", "aiter's assembly kernels", "mori", "validation"]
    assert subs[2].endswith("no HIP/CK build (that needs ROCm); PREBUILD_KERNELS=0")


def test_default_report_lists_no_substitution():
    plan = P.make_plan(profiles.load("default"), build_of(Arch.GFX942))
    assert plan.profile.substitutes == ()
    assert profiles.load("offline", {"offline": False}).substitutes == ()  # listed, but not offline: none apply


def test_clean_labels_carry_pins_and_manifest_facts():
    plan = offline_plan()
    manifest = {"lock_sha256": "sha256:ab", "sources": {"aiter": {"sha": AITER_PIN, "describe": "v0.1.19-38"}},
                "wheels": [{"component": "aiter", "name": "amd-aiter", "version": "0.1.20"},
                           {"component": "deps", "name": "numpy", "version": "2.3.4"}]}
    rec = BuildRecord(run_id="r1", started=0.0, started_at="now",
                      wheels=Wheels(plan.wheels.image, "sha256:w", False, manifest, "sha256:m"))
    labels = dict(clean_labels(plan, rec))
    assert labels[metadata.label("source.aiter")] == f"https://github.com/ROCm/aiter.git@{AITER_PIN}"
    assert labels[metadata.label("commit.aiter")] == f"{AITER_PIN} (v0.1.19-38)"
    assert (labels[metadata.label("lock-digest")], labels[metadata.label("wheels-manifest-digest")]) == (
        "sha256:ab", "sha256:m")
    assert labels[metadata.label("version.amd-aiter")] == "0.1.20" and metadata.label("version.numpy") not in labels


COVERAGE_WARNING = {"checks": [{"name": "gemm-hipblaslt", "status": "passed", "reason": "21 cases passed"},
                               {"name": "tuned-csv-coverage", "status": "warning",
                                "reason": "warning: tp8: 0/70 shapes covered (0.0%) for gfx942 cu_num 304"}]}


def test_a_coverage_warning_is_the_validation_status_of_the_report(reports):
    rec = BuildRecord(run_id="r1", started=0.0, started_at="now", steps=STEPS, validation=COVERAGE_WARNING)
    folder = report.write(offline_plan(), rec, failed=False)
    assert json.loads((folder / "report.json").read_text())["validation_status"] == "warning"


def test_the_markdown_report_shows_the_warning_status_and_its_reason(reports):
    rec = BuildRecord(run_id="r1", started=0.0, started_at="now", steps=STEPS, validation=COVERAGE_WARNING)
    text = (report.write(offline_plan(), rec, failed=False) / "report.md").read_text()
    assert "- status: warning\n" in text
    assert "| tuned-csv-coverage | warning | warning: tp8: 0/70 shapes covered (0.0%) for gfx942 cu_num 304 |" in text


@pytest.mark.parametrize(("statuses", "expected"), [
    (["passed", "skipped"], "passed"), (["passed", "warning"], "warning"), (["warning", "failed"], "failed"),
    (["skipped"], "skipped"),
])
def test_validation_status_is_the_worst_check(statuses, expected):
    assert report.validation_status({"checks": [{"status": s} for s in statuses]}) == expected


def test_validation_status_without_a_run():
    assert report.validation_status(None) == "not run"


class FakeApi:
    """The two engine calls the report's facts come from: inspect_image and history."""

    def inspect_image(self, ref):
        return {"Size": 2**30, "RootFS": {"Layers": ["sha256:a", "sha256:b"]}, "Config": {"Labels": {"k": "v"}}}

    def history(self, ref):
        return [{"Size": 5, "CreatedBy": "small"}, {"Size": 9, "CreatedBy": "big"}]


class NoFiles:
    """An image with none of the files the report reads from it (an image built before the payload manifest)."""

    def create(self, image, **kwargs):
        return self

    def get_archive(self, path):
        import docker

        raise docker.errors.NotFound(path)

    def remove(self, force=False):
        pass


class FakeClient:
    api = FakeApi()
    containers = NoFiles()


def test_the_report_takes_the_image_facts_the_record_holds(reports):
    rec = BuildRecord(run_id="r1", started=10.0, started_at="now", steps=STEPS, candidate_id="sha256:c")
    data = report.build(offline_plan(), observe(FakeClient(), rec), failed=False)
    assert (data["image_size_bytes"], data["layers"], data["labels"]) == (2**30, ["sha256:a", "sha256:b"], {"k": "v"})
    assert data["largest_layers"] == [{"size": 9, "created_by": "big"}, {"size": 5, "created_by": "small"}]
    assert data["payload"] is None
    assert data["total_seconds"] > 0


def test_without_an_engine_the_report_has_no_image_facts(reports):
    rec = BuildRecord(run_id="r1", started=0.0, started_at="now", steps=STEPS, candidate_id="sha256:c")
    data = report.build(offline_plan(), observe(None, rec), failed=True)
    assert (data["image_size_bytes"], data["layers"], data["largest_layers"], data["labels"]) == (None, [], [], {})
