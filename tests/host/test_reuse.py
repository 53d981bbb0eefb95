"""An image found by key is reused only where it sits on the image its target starts FROM (CI, 2026-12-01: on an
engine that had run the tier before, the session's candidate sat on one ATOM-layer image of its key and the
layer's name on another, built again with new bytes by Docker 20.10; an aiter bump built FROM the name and
shipped the ATOM layer again). A fake engine that keeps images, names and layers, and a build that stacks one new
layer on the image below: the steps' own lookup decides what is built."""

from __future__ import annotations

import pytest

from cleanbuild import buildx, commands, dockerfile, engine, steps
from cleanbuild.record import BuildRecord
from cleanbuild.spec import DOCKER_DIR
from tests.support.builds import VARIANTS, offline_plan


class Image:
    def __init__(self, store, image_id, labels, layers, created):
        self.store, self.id, self.labels, self.layers = store, image_id, labels, layers
        self.attrs = {"Created": created, "RootFS": {"Layers": list(layers)}}

    @property
    def tags(self):
        return [t for t, i in self.store.names.items() if i == self.id]

    def tag(self, repository, tag):
        self.store.names[f"{repository}:{tag}"] = self.id
        return True


class Store:
    """images.list (label filters), images.get and api.inspect_image (by name or ID), names that move."""

    def __init__(self):
        self.images, self.names, self.built = {}, {}, []

    def add(self, unit, layers, name=None):
        image_id = f"sha256:{len(self.images):04d}"
        labels = {engine.UNIT_LABEL: unit.name, engine.KEY_LABEL: unit.key}
        self.images[image_id] = Image(self, image_id, labels, tuple(layers), f"2026-12-01T{len(self.images):04d}")
        if name:
            self.names[name] = image_id
        return image_id

    def get(self, ref):
        return self.images[self.names.get(ref, ref)]

    def list(self, filters):
        wanted = dict(f.split("=", 1) for f in filters["label"])
        return [i for i in self.images.values() if all(i.labels.get(k) == v for k, v in wanted.items())]

    def inspect_image(self, ref):
        return {"RootFS": {"Layers": list(self.get(ref).layers)}}


class Cli:
    def __init__(self, store):
        self.images, self.api = store, store


@pytest.fixture
def plan():
    return offline_plan(VARIANTS[0])


@pytest.fixture
def store(plan, monkeypatch):
    """The plan's venv here; a build of a unit stacks one layer named for it on the image it starts FROM."""
    s = Store()
    s.add(plan.unit("venv"), ("base", "venv"), plan.unit("venv").image)

    def build(spec, options, **kw):
        unit = next(u for u in plan.units if u.image == spec.image)
        below = plan.below(unit)
        s.built.append(unit.name)
        return s.add(unit, (*s.get(below.image).layers, f"{unit.name}-{len(s.built)}"), unit.image)

    monkeypatch.setattr(buildx, "build", build)
    return s


def ensure_clean_and_candidate(plan, cli) -> list[str]:
    ctx = steps.Ctx(plan=plan, cli=cli, journal=steps.Journal())
    rec = BuildRecord(run_id="r", started=0.0, started_at="now")
    return [steps._ensure(ctx, rec, u).status for u in (*plan.step_units("clean"), plan.unit("candidate"))]


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
    assert dockerfile.base_image(looped, "a", {}) == "a"  # a loop ends; BuildKit refuses the file itself


def test_a_chain_that_holds_is_reused_whole(plan, store):
    cli = Cli(store)
    assert ensure_clean_and_candidate(plan, cli) == ["reused", "built", "built", "built"]
    store.built.clear()
    assert ensure_clean_and_candidate(plan, cli) == ["reused"] * 4 and store.built == []


def test_a_layer_built_on_another_image_of_the_key_below_is_built_again(plan, store):
    """The ATOM layer's name on a second image of its key (new bytes): the clean image and the candidate found by
    key sit on the first one, so both are built again on the named one, and the candidate holds its layers."""
    cli = Cli(store)
    ensure_clean_and_candidate(plan, cli)
    atom = plan.unit("atom-layer")
    store.add(atom, ("base", "venv", "atom-again"), atom.image)  # the name moves to the new image
    store.built.clear()
    assert ensure_clean_and_candidate(plan, cli) == ["reused", "reused", "built", "built"]
    assert store.inspect_image(plan.patch.image)["RootFS"]["Layers"][:3] == ["base", "venv", "atom-again"]


def test_of_two_images_of_a_key_the_one_on_the_named_image_below_is_taken(plan, store):
    cli = Cli(store)
    ensure_clean_and_candidate(plan, cli)
    atom, clean = plan.unit("atom-layer"), plan.unit("clean")
    first_clean = store.names[clean.image]
    store.add(atom, ("base", "venv", "atom-again"), atom.image)
    on_it = store.add(clean, ("base", "venv", "atom-again", "clean-x"))  # no name: left by another run
    store.built.clear()
    assert ensure_clean_and_candidate(plan, cli) == ["reused", "reused", "reused", "built"]
    assert store.names[clean.image] == on_it != first_clean and store.built == ["candidate"]


def test_the_plan_preview_says_what_a_build_would_rebuild(plan, store, monkeypatch):
    cli = Cli(store)
    ensure_clean_and_candidate(plan, cli)
    atom = plan.unit("atom-layer")
    store.add(atom, ("base", "venv", "atom-again"), atom.image)
    monkeypatch.setattr(engine, "client", lambda: cli)
    states = dict(zip((u.name for u in plan.units), commands.unit_states(plan), strict=True))
    assert [states[n]["state"] for n in ("venv", "atom-layer", "clean", "candidate")] == [
        "reused", "reused", "build", "build"]
    assert states["candidate"]["why"] == "the image it starts FROM (clean) is built first"


def test_a_rebuild_below_means_a_rebuild_above_in_the_preview(plan, store, monkeypatch):
    cli = Cli(store)
    monkeypatch.setattr(engine, "client", lambda: cli)
    states = dict(zip((u.name for u in plan.units), commands.unit_states(plan), strict=True))
    assert states["venv"]["state"] == "reused"  # only the venv is here: every layer above it is to build
    assert [states[n]["state"] for n in ("atom-layer", "clean", "candidate")] == ["build"] * 3
    assert states["clean"]["why"] == "the image it starts FROM (atom-layer) is built first"
