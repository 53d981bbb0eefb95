"""Units built at once (cleanbuild.images.atonce, schedule.ensure_step): which build arguments name a stage instead
of an image, which unit waits for another's image, and when the units are built together, one after another, or
not at all. The engine is a fake (tests/support/fake_engine.py); tests/integration/test_reproducible_digests.py
builds the same units both ways on a real engine and compares their digests."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from cleanbuild.core.spec import EngineFacts
from cleanbuild.images import atonce, buildx, schedule
from cleanbuild.images.dockerfile import base_image
from cleanbuild.images.record import BuildRecord
from tests.support.builds import VARIANTS, offline_plan
from tests.support.fake_engine import Builds, FakeEngine, keyed

LAYERS = ("venv", "atom-layer", "clean")


@pytest.fixture
def plan():
    return offline_plan(VARIANTS[0])


def record(reproducible: bool) -> BuildRecord:
    facts = EngineFacts("26.1.5", "buildx", "/var/lib/docker", 100.0, reproducible, reproducible)
    return BuildRecord(run_id="r", started=0.0, started_at="now", engine=facts)


def stage_args(plan, batch, unit):
    return dict(atonce.batch(batch, plan.needs)[unit.name].args)


def test_each_layer_names_the_stages_of_the_layers_below_it_in_the_batch(plan):
    venv, atom, clean = (plan.unit(n) for n in LAYERS)
    batch = [venv, atom, clean]
    assert stage_args(plan, batch, venv) == dict(venv.args)
    assert stage_args(plan, batch, atom) == {**dict(atom.args), "VENV_IMAGE": "venv"}
    assert stage_args(plan, batch, clean) == {**dict(clean.args), "VENV_IMAGE": "venv", "ATOM_IMAGE": "atom"}
    assert {n: j.inline for n, j in atonce.batch(batch, plan.needs).items()} == {
        "venv": (), "atom-layer": ("venv",), "clean": ("venv", "atom-layer")}


def test_the_top_layer_built_at_once_starts_from_the_base_image_and_on_a_found_venv_from_it(plan):
    """Following clean's FROM lines with those arguments: every layer below is built inline (from the profile's
    base image); with the venv found (not in the batch), from the venv's image."""
    venv, atom, clean = (plan.unit(n) for n in LAYERS)
    inline = stage_args(plan, [venv, atom, clean], clean)
    assert base_image(clean.dockerfile, clean.target, inline) == plan.base_image
    on_venv = stage_args(plan, [atom, clean], clean)
    assert base_image(clean.dockerfile, clean.target, on_venv) == venv.image
    assert base_image(clean.dockerfile, clean.target, dict(clean.args)) == atom.image  # one after another


def test_a_unit_of_another_dockerfile_or_without_a_target_is_waited_for(plan):
    venv, atom, clean, wheels, candidate = (plan.unit(n) for n in (*LAYERS, "wheels", "candidate"))
    joined = atonce.batch([wheels, venv, atom, clean, candidate], plan.needs)
    assert joined["venv"].waits == ("wheels",) and joined["venv"].inline == ()  # WHEELS_IMAGE: Dockerfile.wheels
    assert joined["candidate"].waits == ("clean",) and joined["candidate"].inline == ()  # Dockerfile.patch
    assert dict(joined["venv"].args) == dict(venv.args)


def test_the_assembly_waits_for_an_aiter_built_with_other_arguments_and_reads_what_aiter_read_as_images():
    """Triton-only: aiter's wheel is built with GPU_ARCH="" (one wheel for every arch) while the assembly's
    GPU_ARCH names the arch; inlined, aiter's stage would be another vertex and another wheel. So the assembly
    starts once aiter's image is there, and by then every unit aiter needs is built too: it reads their images.
    ATOM, mori and the installer need nothing aiter needs but the build environments: they stay inline."""
    plan = offline_plan(next(v for v in VARIANTS if v.ck_free))
    units = plan.step_units("wheels")
    aiter, wheels = plan.unit("aiter"), plan.unit("wheels")
    assert dict(aiter.args)["GPU_ARCH"] != dict(wheels.args)["GPU_ARCH"]
    joined = atonce.batch(units, plan.needs)
    assert set(joined["wheels"].waits) == {"builder", "torch", "triton", "deps", "sdists", "aiter"}
    assert joined["wheels"].inline == ("atom", "mori", "installer")
    args = dict(joined["wheels"].args)
    assert args["AITER_WHEELS"] == aiter.image and args["DEPS_WHEELS"] == plan.unit("deps").image
    assert args["ATOM_WHEELS"] == "atom-out"
    assert set(joined["aiter"].inline) == {"torch", "triton", "deps", "sdists"}
    assert dict(joined["aiter"].args)["DEPS_WHEELS"] == "deps-out"
    assert dict(joined["aiter"].args)["GPU_ARCH"] == ""  # its own value, not the assembly's


def test_a_unit_whose_own_stages_start_from_a_build_environment_reads_its_image():
    """aiter's torch-env and aiter-env start FROM builder-git and read no aiter pin. Built on builder-git's stage,
    BuildKit's cache of them would not serve an aiter bump, which reads builder-git's image: aiter waits for the
    build environments' images. builder-git's own target is a layer of builder's chain: it inlines builder. The
    clean layers start FROM the layer below and are its image's layers: they stay inline (first test)."""
    plan = offline_plan(VARIANTS[0])
    joined = atonce.batch(plan.step_units("wheels"), plan.needs)
    assert joined["aiter"].waits == ("builder-git",)  # builder is below it
    aiter_args = dict(joined["aiter"].args)
    assert (aiter_args["BUILDER"], aiter_args["BUILDER_GIT"]) == (plan.unit("builder").image,
                                                                  plan.unit("builder-git").image)
    assert joined["builder-git"].inline == ("builder",) and dict(joined["builder-git"].args)["BUILDER"] == "builder-base"
    assert joined["torch"].waits == ("builder",) and joined["atom"].waits == ("builder-git",)


def test_an_argument_an_inlined_stage_reads_with_another_value_keeps_it_out():
    """A stage read with another value of an argument than its own build's is another vertex: not inlined."""
    plan = offline_plan(VARIANTS[0])
    deps, aiter = plan.unit("deps"), plan.unit("aiter")
    other = replace(deps, args=tuple((k, "other" if k == "BUILDER" else v) for k, v in deps.args))
    joined = atonce.batch([other, aiter], plan.needs)
    assert joined["aiter"].inline == () and joined["aiter"].waits == ("deps",)
    assert atonce.batch([deps, aiter], plan.needs)["aiter"].inline == ("deps",)


class AtOnce:
    """buildx.build for units built at once: records each call's unit and build arguments, and the units whose
    builds had returned when it started (finished_before), then adds the unit's image on the fake engine."""

    def __init__(self, fake: FakeEngine, plan):
        self.fake, self.plan, self.calls = fake, plan, []
        self.finished: set[str] = set()
        self.finished_before: dict[str, set[str]] = {}
        self.guard = threading.Lock()

    def __call__(self, spec, options, *, labels=(), build_args=None, **kwargs) -> str:
        unit = next(u for u in self.plan.units if u.image == spec.image)
        with self.guard:
            self.calls.append((unit.name, dict(build_args or spec.build_args)))
            self.finished_before[unit.name] = set(self.finished)
        image = self.fake.add_image(("base", unit.name), dict(labels), unit.image)
        with self.guard:
            self.finished.add(unit.name)
        return image


def clean_layers(plan, fake, reproducible: bool = True):
    site = schedule.Site(plan, fake, record(reproducible).engine)
    return schedule.ensure_step(site, tuple(plan.unit(n) for n in LAYERS), {})


def test_on_the_containerd_store_every_layer_to_build_is_built_at_once_the_top_one_first(plan, monkeypatch):
    """The top layer builds the two below inline: it starts first, with no image below it there (the longest chain
    first: on a machine of few cores BuildKit gives its vertices the CPU, and the layers below then find theirs)."""
    fake = FakeEngine()
    builds = AtOnce(fake, plan)
    monkeypatch.setattr(buildx, "build", builds)
    done = clean_layers(plan, fake)
    assert [(u.name, u.status, u.how) for u in done] == [(n, "built", "built at once (venv, atom-layer, clean)")
                                                         for n in LAYERS]
    args = dict(builds.calls)
    assert (args["atom-layer"]["VENV_IMAGE"], args["clean"]["ATOM_IMAGE"], args["clean"]["VENV_IMAGE"]) == (
        "venv", "atom", "venv")
    assert all(u.began is not None for u in done)
    assert builds.calls[0][0] == "clean" and builds.finished_before["clean"] == set()


def test_a_found_venv_is_reused_and_the_layers_above_are_built_at_once_on_its_image(plan, monkeypatch):
    fake = FakeEngine()
    fake.add_image(("base", "venv"), keyed(plan.unit("venv")), plan.unit("venv").image)
    builds = AtOnce(fake, plan)
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
    builds = AtOnce(fake, plan)
    monkeypatch.setattr(buildx, "build", builds)
    assert [u.status for u in clean_layers(plan, fake)] == ["reused"] * 3 and builds.calls == []


def test_the_wheels_step_builds_aiter_on_the_environments_images_with_its_components_inline(monkeypatch):
    plan = offline_plan(next(v for v in VARIANTS if v.ck_free))
    units = plan.step_units("wheels")
    fake = FakeEngine()
    builds = AtOnce(fake, plan)
    monkeypatch.setattr(buildx, "build", builds)
    done = schedule.ensure_step(schedule.Site(plan, fake, record(True).engine), units, {})
    assert [u.status for u in done] == ["built"] * len(units)
    assert {n for n, _ in builds.calls[:2]} == {"builder", "builder-git"}  # builder-git inlines builder
    assert builds.finished_before["aiter"] >= {"builder", "builder-git"}
    assert builds.finished_before["wheels"] >= {"aiter", "deps", "torch"}  # ATOM and the installer: inline
    args = dict(builds.calls)
    assert args["aiter"]["DEPS_WHEELS"] == "deps-out" and args["wheels"]["AITER_WHEELS"] == plan.unit("aiter").image
    assert args["aiter"]["BUILDER_GIT"] == plan.unit("builder-git").image
    free = [schedule.key_lock(u.key).acquire(blocking=False) for u in units]  # every lock given back
    for unit, taken in zip(units, free, strict=True):
        if taken:
            schedule.key_lock(unit.key).release()
    assert all(free)
