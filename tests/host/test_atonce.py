"""The clean step's layers built at once (cleanbuild.images.atonce, steps._ensure_layers): which build arguments
name a stage instead of an image, and when the layers are built together, one after another, or not at all. The
engine is a fake (tests/support/fake_engine.py); tests/integration/test_reproducible_digests.py builds the same
layers both ways on a real engine and compares their digests."""

from __future__ import annotations

import threading

import pytest

from cleanbuild.images import atonce, buildx, steps
from cleanbuild.images.dockerfile import base_image
from cleanbuild.images.record import BuildRecord
from cleanbuild.spec import EngineFacts
from tests.support.builds import VARIANTS, offline_plan
from tests.support.fake_engine import Builds, FakeEngine, keyed

LAYERS = ("venv", "atom-layer", "clean")


@pytest.fixture
def plan():
    return offline_plan(VARIANTS[0])


def record(reproducible: bool) -> BuildRecord:
    facts = EngineFacts("26.1.5", "buildx", "/var/lib/docker", 100.0, reproducible, reproducible)
    return BuildRecord(run_id="r", started=0.0, started_at="now", engine=facts)


def test_each_layer_names_the_stages_of_the_layers_below_it_in_the_batch(plan):
    venv, atom, clean = (plan.unit(n) for n in LAYERS)
    batch = [venv, atom, clean]
    assert atonce.stage_args(batch, venv) == venv.args
    assert dict(atonce.stage_args(batch, atom)) == {**dict(atom.args), "VENV_IMAGE": "venv"}
    assert dict(atonce.stage_args(batch, clean)) == {**dict(clean.args), "VENV_IMAGE": "venv", "ATOM_IMAGE": "atom"}


def test_the_top_layer_built_at_once_starts_from_the_base_image_and_on_a_found_venv_from_it(plan):
    """Following clean's FROM lines with those arguments: every layer below is built inline (from the profile's
    base image); with the venv found (not in the batch), from the venv's image."""
    venv, atom, clean = (plan.unit(n) for n in LAYERS)
    inline = dict(atonce.stage_args([venv, atom, clean], clean))
    assert base_image(clean.dockerfile, clean.target, inline) == plan.base_image
    on_venv = dict(atonce.stage_args([atom, clean], clean))
    assert base_image(clean.dockerfile, clean.target, on_venv) == venv.image
    assert base_image(clean.dockerfile, clean.target, dict(clean.args)) == atom.image  # one after another


def test_only_a_stage_of_the_same_dockerfile_named_by_an_argument_joins(plan):
    venv, atom, clean, wheels, candidate = (plan.unit(n) for n in (*LAYERS, "wheels", "candidate"))
    assert atonce.joins(venv, atom) and atonce.joins(atom, clean) and atonce.joins(venv, clean) is False
    assert not atonce.joins(wheels, venv)  # WHEELS_IMAGE names it, but from Dockerfile.wheels
    assert not atonce.joins(clean, candidate)  # Dockerfile.patch, no target


class AtOnce:
    """buildx.build for the clean layers: every call waits until `width` builds are in flight (a barrier that
    breaks after 5 s when they are not), then adds the unit's image on the fake engine."""

    def __init__(self, fake: FakeEngine, plan, width: int):
        self.fake, self.plan, self.calls = fake, plan, []
        self.barrier = threading.Barrier(width, timeout=5)

    def __call__(self, spec, options, *, labels=(), build_args=None, **kwargs) -> str:
        unit = next(u for u in self.plan.units if u.image == spec.image)
        self.calls.append((unit.name, dict(build_args or spec.build_args)))
        self.barrier.wait()
        return self.fake.add_image(("base", unit.name), dict(labels), unit.image)


def clean_layers(plan, fake, reproducible: bool = True):
    ctx = steps.Ctx(plan=plan, cli=fake, journal=steps.Journal())
    return steps._ensure_layers(ctx, record(reproducible), tuple(plan.unit(n) for n in LAYERS), {})


def test_on_the_containerd_store_every_layer_to_build_is_built_at_once(plan, monkeypatch):
    fake = FakeEngine()
    builds = AtOnce(fake, plan, 3)
    monkeypatch.setattr(buildx, "build", builds)
    done = clean_layers(plan, fake)
    assert [(u.name, u.status, u.how) for u in done] == [(n, "built", "built at once (venv, atom-layer, clean)")
                                                         for n in LAYERS]
    args = dict(builds.calls)
    assert (args["atom-layer"]["VENV_IMAGE"], args["clean"]["ATOM_IMAGE"], args["clean"]["VENV_IMAGE"]) == (
        "venv", "atom", "venv")
    assert all(u.began is not None for u in done)


def test_a_found_venv_is_reused_and_the_layers_above_are_built_at_once_on_its_image(plan, monkeypatch):
    fake = FakeEngine()
    fake.add_image(("base", "venv"), keyed(plan.unit("venv")), plan.unit("venv").image)
    builds = AtOnce(fake, plan, 2)
    monkeypatch.setattr(buildx, "build", builds)
    done = clean_layers(plan, fake)
    assert [(u.name, u.status) for u in done] == [("venv", "reused"), ("atom-layer", "built"), ("clean", "built")]
    args = dict(builds.calls)
    venv = plan.unit("venv").image
    assert (args["atom-layer"]["VENV_IMAGE"], args["clean"]["ATOM_IMAGE"], args["clean"]["VENV_IMAGE"]) == (
        venv, "atom", venv)


def test_on_the_classic_store_the_layers_are_built_one_after_another_each_from_the_image_below(plan, monkeypatch):
    fake = FakeEngine()
    builds = Builds(fake, plan)  # fails when the image below is not there yet
    monkeypatch.setattr(buildx, "build", builds)
    done = clean_layers(plan, fake, reproducible=False)
    assert builds.built == list(LAYERS) and [u.how for u in done] == ["built"] * 3


def test_layers_all_found_are_all_reused_and_nothing_is_built(plan, monkeypatch):
    fake = FakeEngine()
    below = ("base",)
    for name in LAYERS:
        below = (*below, name)
        fake.add_image(below, keyed(plan.unit(name)), plan.unit(name).image)
    builds = AtOnce(fake, plan, 1)
    monkeypatch.setattr(buildx, "build", builds)
    assert [u.status for u in clean_layers(plan, fake)] == ["reused"] * 3 and builds.calls == []
