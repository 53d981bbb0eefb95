"""cleanbuild.images.reuse.decide on a fake engine with a registry: each way a unit's image is had (found here on
the image below, pulled, built, and why), and `invoke plan`'s preview against what the build then does."""

from __future__ import annotations

import json

import pytest

from cleanbuild.commands import build
from cleanbuild.core import engine
from cleanbuild.images import buildx, schedule
from cleanbuild.images.plan import make_plan
from cleanbuild.images.reuse import NO_EARLIER_BUILD, Action, Below, decide
from tests.support.builds import VARIANTS, offline_plan
from tests.support.fake_engine import Builds, FakeEngine, keyed
from tests.support.requests import changed

VENV = ("base", "venv")


@pytest.fixture
def plan():
    return offline_plan(VARIANTS[0])


@pytest.fixture
def fake(plan):
    """The plan's venv here, nothing else."""
    f = FakeEngine()
    f.add_image(VENV, keyed(plan.unit("venv")), plan.unit("venv").image)
    return f


def atom(fake, plan, *, here: bool = True, registry: bool = False, rebuild: bool = False):
    """The decision for the ATOM layer, whose target starts FROM the venv."""
    venv = plan.unit("venv").image if here else None
    return decide(fake, plan.unit("atom-layer"), variant="", below=Below("venv", venv), registry=registry,
                  rebuild=rebuild)


def test_an_image_of_its_key_on_the_image_below_is_reused(plan, fake):
    layer = plan.unit("atom-layer")
    image_id = fake.add_image((*VENV, "atom"), keyed(layer), layer.image)
    decision = atom(fake, plan, registry=True)
    assert (decision.action, decision.image_id, decision.tags) == (Action.REUSE, image_id, (layer.image,))
    assert decision.reason == f"found here by key ({layer.image})"


def test_an_image_of_its_key_found_by_key_alone_is_reused_under_no_name(plan, fake):
    image_id = fake.add_image((*VENV, "atom"), keyed(plan.unit("atom-layer")))
    decision = atom(fake, plan)
    assert (decision.action, decision.image_id, decision.reason) == (Action.REUSE, image_id, f"found here by key ({image_id[:19]})")


def test_an_image_of_its_key_on_another_image_below_is_built_again(plan, fake):
    fake.add_image(("base", "venv-again", "atom"), keyed(plan.unit("atom-layer")))
    decision = atom(fake, plan)
    assert (decision.action, decision.reason) == (Action.BUILD, "its key is here on another image of venv")
    assert decision.changed == (NO_EARLIER_BUILD,)


def test_rebuild_builds_what_is_here(plan, fake):
    layer = plan.unit("atom-layer")
    fake.add_image((*VENV, "atom"), keyed(layer), layer.image)
    decision = atom(fake, plan, rebuild=True)
    assert (decision.action, decision.reason) == (Action.BUILD, "--rebuild")


def test_the_registry_is_pulled_from_when_nothing_here_has_the_key(plan, fake):
    layer = plan.unit("atom-layer")
    fake.add_remote((*VENV, "atom"), keyed(layer), layer.image)
    decision = atom(fake, plan, registry=True)
    assert (decision.action, decision.reason) == (Action.PULL, f"the registry holds {layer.image}")


def test_without_the_registry_what_only_it_holds_is_built(plan, fake):
    """The build's second question, after its pull: the registry is left out."""
    layer = plan.unit("atom-layer")
    fake.add_remote((*VENV, "atom"), keyed(layer), layer.image)
    assert atom(fake, plan, registry=False).action is Action.BUILD


def test_a_build_names_the_inputs_that_changed_since_the_last_build_here(plan, fake):
    layer = plan.unit("atom-layer")
    earlier = {**dict(layer.inputs), "unit:atom": "key:older"}
    fake.add_image((*VENV, "atom-old"), {**keyed(layer), engine.KEY_LABEL: "older-key",
                                        engine.INPUTS_LABEL: json.dumps(earlier)})
    decision = atom(fake, plan)
    assert (decision.action, decision.changed, decision.reason) == (Action.BUILD, ("unit:atom",), "unit:atom")


def test_a_first_build_says_there_was_none_here(plan, fake):
    decision = atom(fake, plan)
    assert (decision.action, decision.changed, decision.reason) == (Action.BUILD, (NO_EARLIER_BUILD,), NO_EARLIER_BUILD)


def test_with_the_image_below_not_here_yet_what_is_here_is_not_taken(plan, fake):
    layer = plan.unit("atom-layer")
    fake.add_image((*VENV, "atom"), keyed(layer), layer.image)
    decision = atom(fake, plan, here=False)
    assert (decision.action, decision.reason) == (Action.BUILD, "the image it starts FROM (venv) is built first")


def test_with_the_image_below_not_here_yet_the_registry_is_pulled_from(plan, fake):
    layer = plan.unit("atom-layer")
    fake.add_remote((*VENV, "atom"), keyed(layer), layer.image)
    decision = decide(fake, layer, variant="", below=Below("venv", None, "pulled"), registry=True)
    assert (decision.action, decision.reason) == (
        Action.PULL, f"the registry holds {layer.image}; the image it starts FROM (venv) is pulled first")


# ---- the plan's preview and the build ------------------------------------------------------------------------

CHAIN = ("venv", "atom-layer", "clean", "candidate")


@pytest.fixture
def remote(plan):
    """A plan with a remote registry: the venv here, the ATOM layer only in the registry (on this venv), the
    clean image nowhere, the candidate here but on another clean image."""
    plan = make_plan(plan.profile, changed(plan.options, registry="localhost:5000/ab"))
    f = FakeEngine()
    f.add_image(VENV, keyed(plan.unit("venv")), plan.unit("venv").image)
    f.add_remote((*VENV, "atom"), keyed(plan.unit("atom-layer")), plan.unit("atom-layer").image)
    f.add_image((*VENV, "atom", "clean-elsewhere", "candidate"), keyed(plan.unit("candidate")), plan.unit("candidate").image)
    return plan, f


def test_every_unit_ends_where_the_preview_said(remote, monkeypatch):
    plan, fake = remote
    monkeypatch.setattr(engine, "client", lambda: fake)
    states = dict(zip((u.name for u in plan.units), build.unit_states(plan), strict=True))
    assert [states[n]["state"] for n in CHAIN] == ["reused", "pull", "build", "build"]
    assert states["clean"]["why"] == "the image it starts FROM (atom-layer) is pulled first"

    fake.builds = Builds(fake, plan)
    monkeypatch.setattr(buildx, "build", fake.builds)
    site = schedule.Site(plan, fake, None)
    done = {n: schedule.ensure(site, plan.unit(n)) for n in CHAIN}
    assert [done[n].status for n in CHAIN] == ["reused", "reused", "built", "built"]
    assert [done[n].how for n in CHAIN] == ["found here by key, pushed (the registry lacked it)",
                                            "pulled from the registry by key", "built and pushed", "built and pushed"]
    assert fake.builds.built == ["clean", "candidate"]
    assert {plan.unit(n).image for n in CHAIN} <= set(fake.registry)


def test_a_pulled_image_not_on_the_image_below_is_built(remote, monkeypatch):
    """The registry's ATOM layer sits on another venv: pulled, then built, as the build's second question says."""
    plan, fake = remote
    layer = plan.unit("atom-layer")
    fake.add_remote(("base", "venv-elsewhere", "atom"), keyed(layer), layer.image)
    fake.builds = Builds(fake, plan)
    monkeypatch.setattr(buildx, "build", fake.builds)
    done = schedule.ensure(schedule.Site(plan, fake, None), layer)
    assert (done.status, done.changed, fake.builds.built) == ("built", (NO_EARLIER_BUILD,), ["atom-layer"])
