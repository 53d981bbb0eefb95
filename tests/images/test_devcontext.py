"""The prepare step's --src contexts: exactly the changed files for a dev layer; the checkout's history for a wheel."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from cleanbuild.core.errors import StepFailed
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import devcontext
from cleanbuild.images import plan as P
from cleanbuild.request.checkout import resolve
from cleanbuild.upstream import profiles
from tests.support.gitrepos import commit_all, git
from tests.support.requests import build_of


@pytest.fixture
def checkout(tmp_path) -> tuple[Path, str]:
    repo = tmp_path / "aiter"
    for rel, text in {"setup.py": "setup()\n", "aiter/__init__.py": "", "aiter/tuned_gemm.py": "x = 1\n",
                      "aiter/old.py": "gone = True\n", "csrc/gemm.cu": "// kernel\n"}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "init", "-q")
    pin = commit_all(repo, "pin")
    git(repo, "tag", "v0.1.0")
    return repo, pin


def plan_for(tmp_path: Path, *src) -> P.Plan:
    options = build_of(Arch.GFX950, ck_free=True, cache_dir=tmp_path / "cache", src=src)
    return P.make_plan(profiles.load("offline"), options)


def test_the_dev_context_holds_exactly_the_changed_files_and_a_manifest(tmp_path, checkout):
    repo, pin = checkout
    (repo / "aiter" / "tuned_gemm.py").write_text("x = 2\n")
    (repo / "aiter" / "old.py").unlink()
    plan = plan_for(tmp_path, resolve("aiter", repo, pin))
    devcontext.prepare(plan)
    context = plan.unit("dev").context
    files = sorted(str(p.relative_to(context)) for p in context.rglob("*") if p.is_file())
    assert files == ["clamp_times.py", "files/aiter/tuned_gemm.py", "manifest.json", "overlay.py"]


def test_the_dev_context_copies_the_checkouts_bytes(tmp_path, checkout):
    repo, pin = checkout
    (repo / "aiter" / "tuned_gemm.py").write_text("x = 2\n")
    plan = plan_for(tmp_path, resolve("aiter", repo, pin))
    devcontext.prepare(plan)
    assert (plan.unit("dev").context / "files" / "aiter" / "tuned_gemm.py").read_text() == "x = 2\n"


def test_the_manifest_names_the_deleted_file(tmp_path, checkout):
    repo, pin = checkout
    (repo / "aiter" / "old.py").unlink()
    plan = plan_for(tmp_path, resolve("aiter", repo, pin))
    devcontext.prepare(plan)
    assert json.loads((plan.unit("dev").context / "manifest.json").read_text())["deleted"] == ["aiter/old.py"]


def test_an_edit_after_the_plan_fails_the_prepare_step(tmp_path, checkout):
    repo, pin = checkout
    (repo / "aiter" / "tuned_gemm.py").write_text("x = 2\n")
    plan = plan_for(tmp_path, resolve("aiter", repo, pin))
    (repo / "aiter" / "tuned_gemm.py").write_text("x = 3\n")
    with pytest.raises(StepFailed, match="changed since the plan"):
        devcontext.prepare(plan)


@pytest.fixture
def wheel_plan(tmp_path, checkout) -> P.Plan:
    repo, pin = checkout
    (repo / "csrc" / "gemm.cu").write_text("// faster\n")
    plan = plan_for(tmp_path, resolve("aiter", repo, pin))
    for folder in ("local/repos", "lock", "docker/scripts"):  # the profile's context, as prepare makes it
        plan.prepare.context.joinpath(folder).mkdir(parents=True)
    plan.prepare.context.joinpath("lock", "build.txt").write_text("pip==25.0\n")
    devcontext.prepare(plan)
    return plan


def describe(plan: P.Plan) -> str:
    checkout, context = plan.src_contexts[0]
    repo = context / "local" / "repos" / "aiter.git"
    return subprocess.run(["git", "--git-dir", str(repo), "describe", "--tags", checkout.snapshot],  # noqa: S603,S607
                          capture_output=True, text=True, check=True).stdout.strip()


def test_the_wheel_context_repository_has_the_snapshot_over_the_tag(wheel_plan):
    assert describe(wheel_plan) == f"v0.1.0-1-g{wheel_plan.options.src[0].snapshot[:7]}"


def test_the_wheel_context_repository_borrows_nothing(wheel_plan):
    _, context = wheel_plan.src_contexts[0]
    assert not (context / "local" / "repos" / "aiter.git" / "objects" / "info" / "alternates").exists()


def test_the_wheel_context_keeps_the_profiles_other_files(wheel_plan):
    _, context = wheel_plan.src_contexts[0]
    assert (context / "lock" / "build.txt").read_text() == "pip==25.0\n"


def test_a_different_snapshot_than_the_plans_fails(tmp_path, checkout):
    repo, pin = checkout
    (repo / "csrc" / "gemm.cu").write_text("// faster\n")
    found = resolve("aiter", repo, pin)
    plan = plan_for(tmp_path, replace(found, snapshot="0" * 40))
    for folder in ("local/repos", "lock", "docker/scripts"):
        plan.prepare.context.joinpath(folder).mkdir(parents=True)
    with pytest.raises(StepFailed, match="changed since the plan"):
        devcontext.prepare(plan)
