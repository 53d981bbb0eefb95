"""An image found by key is reused only where it sits on the image its target starts FROM (CI, 2026-12-01: on an
engine that had run the tier before, the session's candidate sat on one ATOM-layer image of its key and the
layer's name on another, built again with new bytes by Docker 20.10; an aiter bump built FROM the name and
shipped the ATOM layer again). A fake engine that keeps images, names and layers, and a build that stacks one new
layer on the image below: the steps' own lookup decides what is built."""

from __future__ import annotations

import pytest

from cleanbuild.commands import build
from cleanbuild.core import engine
from cleanbuild.core.spec import DOCKER_DIR
from cleanbuild.images import buildx, dockerfile, schedule
from tests.support.builds import VARIANTS, offline_plan
from tests.support.fake_engine import Builds, FakeEngine, keyed


@pytest.fixture
def plan():
    return offline_plan(VARIANTS[0])


@pytest.fixture
def fake(plan, monkeypatch):
    """The plan's venv here; a build of a unit stacks one layer named for it on the image it starts FROM."""
    f = FakeEngine()
    f.add_image(("base", "venv"), keyed(plan.unit("venv")), plan.unit("venv").image)
    f.builds = Builds(f, plan)
    monkeypatch.setattr(buildx, "build", f.builds)
    return f


def ensure_clean_and_candidate(plan, client) -> list[str]:
    site = schedule.Site(plan, client, None)
    return [schedule.ensure(site, u).status for u in (*plan.step_units("clean"), plan.unit("candidate"))]


def test_the_image_below_each_layer_is_the_unit_it_starts_from(plan):
    below = {u.name: (plan.below(u).name if plan.below(u) else None) for u in plan.units}
    assert below["atom-layer"] == "venv" and below["clean"] == "atom-layer" and below["candidate"] == "clean"
    assert below["builder-git"] == "builder"  # FROM builder, a stage FROM ${BUILDER}
    assert below["venv"] is None  # the base image: not a unit of the plan
    assert {below[n] for n in ("torch", "aiter", "atom", "wheels")} == {None}  # FROM scratch


def test_base_image_follows_stages_and_substitutes_arguments(tmp_path):
    assert dockerfile.base_image(DOCKER_DIR / "Dockerfile.clean", "clean", {"ENABLE_CK": "0", "ATOM_IMAGE": "a:1"}) == "a:1"
    assert dockerfile.base_image(DOCKER_DIR / "Dockerfile.patch", None, {"IMAGE": "c:1"}) == "c:1"
    assert dockerfile.base_image(DOCKER_DIR / "Dockerfile.wheels", "wheels", {}) == "scratch"
    looped = tmp_path / "Dockerfile"
    looped.write_text("FROM b AS a\nFROM a AS b\n")
    assert dockerfile.base_image(looped, "a", {}) == "b"  # no loop: stage b is below a, so a's FROM b is an image
    assert dockerfile.base_image(looped, "b", {}) == "b"


def test_a_chain_that_holds_is_reused_whole(plan, fake):
    assert ensure_clean_and_candidate(plan, fake) == ["reused", "built", "built", "built"]
    fake.builds.built.clear()
    assert ensure_clean_and_candidate(plan, fake) == ["reused"] * 4 and fake.builds.built == []


def test_a_layer_built_on_another_image_of_the_key_below_is_built_again(plan, fake):
    """The ATOM layer's name on a second image of its key (new bytes): the clean image and the candidate found by
    key sit on the first one, so both are built again on the named one, and the candidate holds its layers."""
    ensure_clean_and_candidate(plan, fake)
    atom = plan.unit("atom-layer")
    fake.add_image(("base", "venv", "atom-again"), keyed(atom), atom.image)  # the name moves to the new image
    fake.builds.built.clear()
    assert ensure_clean_and_candidate(plan, fake) == ["reused", "reused", "built", "built"]
    assert fake.api.inspect_image(plan.patch.image)["RootFS"]["Layers"][:3] == ["base", "venv", "atom-again"]


def test_of_two_images_of_a_key_the_one_on_the_named_image_below_is_taken(plan, fake):
    ensure_clean_and_candidate(plan, fake)
    atom, clean = plan.unit("atom-layer"), plan.unit("clean")
    first_clean = fake.names[clean.image]
    fake.add_image(("base", "venv", "atom-again"), keyed(atom), atom.image)
    on_it = fake.add_image(("base", "venv", "atom-again", "clean-x"), keyed(clean))  # no name: left by another run
    fake.builds.built.clear()
    assert ensure_clean_and_candidate(plan, fake) == ["reused", "reused", "reused", "built"]
    assert fake.names[clean.image] == on_it != first_clean and fake.builds.built == ["candidate"]


def test_the_plan_preview_says_what_a_build_would_rebuild(plan, fake, monkeypatch):
    ensure_clean_and_candidate(plan, fake)
    atom = plan.unit("atom-layer")
    fake.add_image(("base", "venv", "atom-again"), keyed(atom), atom.image)
    monkeypatch.setattr(engine, "client", lambda: fake)
    states = dict(zip((u.name for u in plan.units), build.unit_states(plan), strict=True))
    assert [states[n]["state"] for n in ("venv", "atom-layer", "clean", "candidate")] == [
        "reused", "reused", "build", "build"]
    assert states["candidate"]["why"] == "the image it starts FROM (clean) is built first"


def test_a_rebuild_below_means_a_rebuild_above_in_the_preview(plan, fake, monkeypatch):
    monkeypatch.setattr(engine, "client", lambda: fake)
    states = dict(zip((u.name for u in plan.units), build.unit_states(plan), strict=True))
    assert states["venv"]["state"] == "reused"  # only the venv is here: every layer above it is to build
    assert [states[n]["state"] for n in ("atom-layer", "clean", "candidate")] == ["build"] * 3
    assert states["clean"]["why"] == "the image it starts FROM (atom-layer) is built first"
