"""Build once, run on many nodes: a real registry on 127.0.0.1 (Debian's docker-registry, started by .ci/run or
here), two "machines" simulated by removing the images and the BuildKit cache in between, promotion by digest."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cleanbuild.cli.settings import resolve
from cleanbuild.commands import existing
from cleanbuild.core import engine
from cleanbuild.core.errors import StepFailed
from cleanbuild.images import pipeline
from cleanbuild.images.plan import make_plan
from tests.support.builds import (
    ATOM_BUMP,
    REPO,
    bumped_profile,
    forget,
    offline_plan,
    only_in,
)
from tests.support.registry import (
    registry_digest,
    registry_tags,
    start_registry,
)
from tests.support.requests import changed
from tests.support.tiny_model import make_tiny_model

pytestmark = [pytest.mark.docker, pytest.mark.slow]
RUN = os.urandom(3).hex()
BUILD = ("preflight", "prepare", "wheels", "clean", "patch")
def invoke(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=2400, env={**os.environ, "CI": "true"})


def forget_machine(client, prefix: str, plans=()) -> None:
    """The second machine has none of the images the plans read and no BuildKit cache. Images are found by key
    whatever their name, so every name of the plans' images goes too (top of each stack first); restore() puts the
    session's names back on the same images once the second machine pulled them. Only the plans' images: an image
    with no name left is gone from the containerd store, and the session's other variant is not the test's."""
    for plan in plans:
        forget(client, reversed(plan.units))
    for image in client.images.list():
        for tag in image.tags:
            if tag.startswith(prefix):
                engine.untag(client, tag)
    subprocess.run(["docker", "builder", "prune", "-af"], check=True, capture_output=True)  # noqa: S603,S607


def restore(client, plans, prefix: str | None = None) -> None:
    """The session's names back on its images: pulled again by the second machine (the same image IDs), or, where
    it did not need one (a bump builds its own clean and candidate above the pulled venv), pulled here from prefix,
    where the first machine pushed every unit. Without this, a test run after this module lacks them."""
    for plan in plans:
        pushed = {u.name: u.image for u in make_plan(plan.profile, changed(plan.options, registry=prefix)).units} \
            if prefix else {}
        for unit in plan.units:
            found = engine.find_by_key(client, unit.name, unit.key)
            if found is None and unit.name in pushed and engine.pull(client, pushed[unit.name]):
                found = engine.find_by_key(client, unit.name, unit.key)
            if found and unit.image not in found[1]:
                engine.tag(client, found[0], *unit.image.rsplit(":", 1))


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("model"))


def _step_lines(proc) -> str:
    return "\n".join(ln for ln in proc.stderr.splitlines() if ln.startswith(("✓ wheels", "✓ clean", "✓ patch")))


def test_two_machines_build_once_and_promote_by_digest(docker_engine, offline_builds, registry, model):
    prefix = f"{registry}/itest-{RUN}"
    first = invoke("build-clean", "--profile", "offline", "--arch", "gfx950", "--ck-free", "--allow-unservable", "--registry", prefix,
                   "--progress", "plain", "--user", f"ci-reg-{RUN}")
    assert first.returncode == 0, first.stderr[-3000:]
    # Every image is already here under the session's names: found by key, not rebuilt, and pushed because the
    # registry lacked it.
    assert "found here by key, pushed (the registry lacked it)" in first.stderr and "built" not in _step_lines(first)
    plan = offline_plan(offline_builds["gfx950-ckfree"].variant)
    plan = make_plan(plan.profile, changed(plan.options, registry=prefix))
    for image in (u.image for u in plan.units):
        repo, tag = image.removeprefix(registry + "/").rsplit(":", 1)
        assert tag in registry_tags(registry, repo), image

    session = [b.plan for b in offline_builds.values()]
    try:  # a forget that fails half-way still gets the session's names back
        # the second machine lacks every image a gfx950 CK-free build reads; the gfx942 variant's own images stay,
        # so the tests after this one still find the session's builds
        forget_machine(docker_engine, prefix, [offline_builds["gfx950-ckfree"].plan])
        second = invoke("build-clean", "--profile", "offline", "--arch", "gfx950", "--ck-free", "--allow-unservable", "--registry", prefix,
                        "--progress", "plain", "--user", f"ci-reg-{RUN}")
    finally:
        restore(docker_engine, session)
    assert second.returncode == 0, second.stderr[-3000:]
    for step in ("wheels", "clean", "patch"):
        line = next(ln for ln in second.stderr.splitlines() if ln.startswith(f"✓ {step} ("))
        assert "pulled from the registry by key" in line, line
    assert "built" not in _step_lines(second)

    repo, tag = plan.patch.image.removeprefix(registry + "/").rsplit(":", 1)
    digest = registry_digest(registry, repo, tag)
    promoted = invoke("promote", f"{registry}/{repo}@{digest}", "--arch", "gfx950", "--profile", "offline",
                      "--allow-unservable", "--model", str(model), "--registry", prefix, "--user", f"ci-reg-{RUN}")
    assert promoted.returncode == 0, promoted.stderr[-3000:]
    released = [t for t in registry_tags(registry, f"itest-{RUN}/atom-gfx950-ckfree") if t.startswith(f"ci-reg-{RUN}_")]
    assert len(released) == 2 and released[1] == released[0] + ".report", released
    assert registry_digest(registry, f"itest-{RUN}/atom-gfx950-ckfree", released[0]) == digest  # what passed is what is tagged


@pytest.mark.network
def test_a_bump_on_a_fresh_node_pulls_everything_but_what_moved(docker_engine, offline_builds, registry):
    """The registry holds the pins' images (a first machine pushed them); a second machine with none of them bumps
    ATOM: it pulls every image by key and builds only ATOM's wheel and what holds it."""
    built = offline_builds["gfx950-ckfree"]
    prefix = f"{registry}/itest-bump-{RUN}"
    first = make_plan(built.plan.profile, changed(built.plan.options, registry=prefix, run_id=f"itest-bump1-{RUN}"))
    pipeline.run(first, docker_engine, BUILD, failed_report=False)  # found here by key, pushed where missing
    profile = bumped_profile(REPO / ".cache" / "test-profiles", "atom", ATOM_BUMP)
    plan = make_plan(profile, replace(first.options, run_id=f"itest-bump2-{RUN}"))
    session = [b.plan for b in offline_builds.values()]
    try:  # a forget that fails half-way still gets the session's names back
        forget_machine(docker_engine, prefix, [built.plan, plan])  # the bump's own images too, whoever left them
        rec = pipeline.run(plan, docker_engine, BUILD, failed_report=False)
    finally:
        restore(docker_engine, [built.plan], prefix)  # the pin's clean and candidate: the bump did not pull them
        restore(docker_engine, session)
        forget(docker_engine, only_in(plan, *session))
    assert {u.name for u in rec.units if u.status == "built"} == {"atom", "wheels", "atom-layer", "clean", "candidate"}
    assert {u.how for u in rec.units if u.status == "reused"} == {"pulled from the registry by key"}
    # on the containerd store the units a step builds are built at once (cleanbuild.images.atonce): the assembly
    # reads the ATOM wheel's stage, and the clean layers above the pulled venv build together
    hows = {u.name: u.how for u in rec.units if u.status == "built"}
    if engine.preflight(docker_engine, 1.0).reproducible:
        assert hows == {"atom": "built at once (atom, wheels) and pushed", "wheels": "built at once (atom, wheels) and pushed",
                        "atom-layer": "built at once (atom-layer, clean) and pushed",
                        "clean": "built at once (atom-layer, clean) and pushed", "candidate": "built and pushed"}
    else:
        assert set(hows.values()) == {"built and pushed"}


def test_promote_refuses_a_node_of_another_arch(docker_engine, offline_builds, registry, model):
    prefix = f"{registry}/itest-{RUN}"
    plan = make_plan(offline_plan(offline_builds["gfx950-ckfree"].variant).profile,
                     changed(offline_plan(offline_builds["gfx950-ckfree"].variant).options, registry=prefix))
    result = invoke("promote", plan.patch.image, "--arch", "gfx942", "--profile", "offline", "--model", str(model),
                    "--registry", prefix)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert lines == [f"error: this node is gfx942 and {plan.patch.image} is built for gfx950. To fix, promote it on a gfx950 node."]


def test_a_registry_that_goes_away_mid_push_leaves_no_release(docker_engine, offline_builds, tmp_path, model, monkeypatch):
    """Its own registry on another port, stopped as the release push starts: one line, no tag anywhere."""
    port = 5099
    proc = start_registry(port, tmp_path)
    prefix = f"127.0.0.1:{port}/gone-{RUN}"
    built = offline_builds["gfx950-ckfree"]
    try:
        engine.tag(docker_engine, built.record.candidate_id, f"{prefix}/candidate", "x")
        digest = engine.push(docker_engine, f"{prefix}/candidate:x")
        real_push = engine.push

        def push_after_the_registry_died(client, ref):
            if "/atom-" in ref:
                proc.kill()
                proc.wait()
            return real_push(client, ref)

        monkeypatch.setattr(engine, "push", push_after_the_registry_died)
        with pytest.raises(StepFailed) as info:
            existing.promote(f"{prefix}/candidate@{digest}", resolve({"arch": "gfx950", "profile": "offline", "model": str(model), "allow_unservable": True,
                                                                      "registry": prefix, "user": f"ci-gone-{RUN}"}, {}))
        assert str(info.value).startswith(f"push of {prefix}/atom-gfx950-ckfree:ci-gone-{RUN}_")
        assert "\n" not in str(info.value)
        local = [t for i in docker_engine.images.list() for t in i.tags if t.startswith(f"{prefix}/atom-gfx950-ckfree:ci-gone-{RUN}_")]
        assert local == []  # cleanup removed the release tag it had applied
        monkeypatch.setattr(engine, "push", real_push)
        proc = start_registry(port, tmp_path)
        assert [t for t in registry_tags(f"127.0.0.1:{port}", f"gone-{RUN}/atom-gfx950-ckfree") if "ci-gone" in t] == []
    finally:
        proc.kill()
        for image in docker_engine.images.list():
            for tag in image.tags:
                if tag.startswith(prefix):
                    docker_engine.images.remove(tag, force=True)
