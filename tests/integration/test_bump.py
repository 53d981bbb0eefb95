"""A pin bump costs what it changed: after the session's offline build, an ATOM-only and an aiter-only bump build
exactly the images whose keys they moved (read from the run's own record), and the new candidate shares every
layer below what changed with the session's candidate (the same diff IDs)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from cleanbuild.core import engine
from cleanbuild.core.refs import split_image
from cleanbuild.images import pipeline
from cleanbuild.images.plan import make_plan
from tests.support.builds import (
    AITER_BUMP,
    ATOM_BUMP,
    REPO,
    bumped_profile,
    forget,
    only_in,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.network]
BUILD = ("preflight", "prepare", "wheels", "clean", "patch")


def bump_build(client, built, component: str, ref: str):
    """The bump after the session's build, and nothing of it here before (a run before this one on the same engine
    may have left the bump's images: they would be found by key)."""
    profile = bumped_profile(REPO / ".cache" / "test-profiles", component, ref)
    plan = make_plan(profile, replace(built.plan.options, run_id=f"itest-bump-{component}"))
    forget(client, only_in(plan, built.plan))
    retag(client, built.plan)
    return plan, pipeline.run(plan, client, BUILD, failed_report=False)


def retag(client, plan) -> None:
    """The session's build is the one "tagged here last", as it is for a user who bumps right after building: an
    engine that also holds images of an earlier checkout (another commit of this repo, tagged later) would otherwise
    be what "changed" is read against (engine.last_inputs)."""
    for unit in plan.units:
        if engine.image_id(client, unit.image):
            engine.tag(client, unit.image, *split_image(unit.image))


def built_units(rec) -> set[str]:
    return {u.name for u in rec.units if u.status == "built"}


@pytest.fixture(scope="module")
def atom_bump(docker_engine, offline_builds):
    built, started = offline_builds["gfx950-ckfree"], datetime.now(UTC)
    plan, rec = bump_build(docker_engine, built, "atom", ATOM_BUMP)
    yield built, plan, rec, started
    forget(docker_engine, only_in(plan, built.plan))


def test_an_atom_bump_builds_atom_and_what_holds_it_and_nothing_else(atom_bump):
    _, _, rec, _ = atom_bump
    assert built_units(rec) == {"atom", "wheels", "atom-layer", "clean", "candidate"}
    assert {u.how for u in rec.units if u.status == "reused"} == {"found here by key"}


def test_an_atom_bump_says_what_changed(atom_bump):
    _, _, rec, _ = atom_bump
    atom = next(u for u in rec.units if u.name == "atom")
    assert atom.changed == ("ATOM_REF",)


def test_a_built_image_is_dated_by_the_build_here(docker_engine, atom_bump):
    """What changed is read from the unit's build tagged here last (engine.last_inputs, by LastTagTime): every
    image the bump built is named after the build, never dated SOURCE_DATE_EPOCH (the exporter's own name is)."""
    _, _, rec, started = atom_bump
    for unit in (u for u in rec.units if u.status == "built"):
        tagged = docker_engine.images.get(unit.image_id).attrs["Metadata"]["LastTagTime"]
        assert engine.engine_time(tagged) >= started, (unit.name, tagged)


def test_an_atom_bump_keeps_the_base_and_venv_layers(docker_engine, atom_bump):
    built, plan, _, _ = atom_bump
    before, after = (engine.layers(docker_engine, image) for image in (built.candidate, plan.patch.image))
    assert after[:2] == before[:2]  # the base and the venv layer (torch and the closure): not shipped again
    assert after[2] != before[2]  # ATOM's layer is new


def test_an_aiter_bump_keeps_the_venv_and_atom_layers(docker_engine, offline_builds):
    built = offline_builds["gfx950-ckfree"]
    plan, rec = bump_build(docker_engine, built, "aiter", AITER_BUMP)
    try:
        assert built_units(rec) == {"aiter", "wheels", "clean", "candidate"}
        before, after = (engine.layers(docker_engine, image) for image in (built.candidate, plan.patch.image))
        assert after[:3] == before[:3]  # base, venv, ATOM: byte for byte the same layers
        assert after[3] != before[3]  # aiter's layer
    finally:
        forget(docker_engine, only_in(plan, built.plan))
