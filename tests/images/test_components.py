"""Per-component keys (cleanbuild.images.components): each key moves with each of its inputs and with nothing else.

Every test changes ONE input and asserts the exact set of units whose key moved. The plan is pure, so no engine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import components, dockerfile
from cleanbuild.images import plan as P
from cleanbuild.upstream import lockfile, profiles
from tests.support.requests import build_of
from tests.support.upstream import AITER_HEAD, ATOM_HEAD

ALL = {"builder", "builder-git", "torch", "triton", "deps", "sdists", "atom", "aiter", "mori", "installer", "wheels", "venv", "atom-layer",
       "clean", "candidate"}
DOWNSTREAM_OF_AITER = {"aiter", "wheels", "clean", "candidate"}


def keys(profile="offline", overrides=None, path=None, **kw) -> dict[str, str]:
    opts = build_of(kw.pop("arch", Arch.GFX950), ck_free=kw.pop("ck_free", True), **kw)
    plan = P.make_plan(profiles.load(profile, overrides, path), opts)
    return {u.name: u.key for u in plan.units}


def moved(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {name for name in before if before[name] != after[name]}


BASE = keys()


def test_every_unit_has_a_key():
    assert set(BASE) == ALL


def test_the_same_inputs_give_the_same_keys():
    assert keys() == BASE


def test_an_atom_bump_moves_atom_and_what_holds_it_only():
    after = keys(overrides={"components.atom.ref": ATOM_HEAD})
    assert moved(BASE, after) == {"atom", "wheels", "atom-layer", "clean", "candidate"}


def test_an_aiter_bump_moves_aiter_and_what_holds_it_only():
    after = keys(overrides={"components.aiter.ref": AITER_HEAD})
    assert moved(BASE, after) == DOWNSTREAM_OF_AITER


COMPILED = {"components.aiter.triton_only": "false"}


@pytest.mark.parametrize("change", [{"arch": Arch.GFX942}, {"ck_free": False}])
def test_the_arch_and_the_ck_mode_move_a_compiled_aiter_never_the_shared_layers(change):
    assert moved(keys(overrides=COMPILED), keys(overrides=COMPILED, **change)) == DOWNSTREAM_OF_AITER


@pytest.mark.parametrize("change", [{"arch": Arch.GFX942}, {"ck_free": False}])
def test_the_arch_and_the_ck_mode_leave_a_triton_only_aiter_alone(change):
    """AITER_TRITON_ONLY=1: aiter's setup.py reads neither (cleanbuild.images.plan._aiter_args)."""
    assert moved(BASE, keys(**change)) == DOWNSTREAM_OF_AITER - {"aiter"}


def test_aiters_own_build_switches_move_aiter_only():
    after = keys(overrides={"components.aiter.prebuild_kernels": "true"})
    assert moved(BASE, after) == DOWNSTREAM_OF_AITER


def test_max_jobs_is_how_fast_not_what_so_it_moves_nothing():
    assert keys(overrides={"components.aiter.max_jobs": "7"}) == BASE


def test_the_registry_moves_names_not_keys():
    assert keys(registry="127.0.0.1:5000/other") == BASE


def test_the_torch_wheel_moves_torch_aiter_and_the_venv():
    after = keys(overrides={"components.torch.version": "2.12.0"})
    assert moved(BASE, after) == {"torch", "aiter", "venv", "atom-layer", "wheels", "clean", "candidate"}


def test_the_installer_moves_every_layer_it_installs():
    after = keys(overrides={"components.installer.version": "0.13.8"})
    assert moved(BASE, after) == {"installer", "wheels", "venv", "atom-layer", "clean", "candidate"}


# ---- the lock: its blocks, never its header --------------------------------------------------------------------

def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


LAYERS_ABOVE = {"venv", "atom-layer", "wheels", "clean", "candidate"}


@pytest.mark.parametrize("lock_file,old,new,expected", [
    # the header alone (it names both pins): only what records the lock's digest
    ("offline.lock", '"python": "3.11"', '"python": "3.11", "note": "x"', {"wheels", "clean", "candidate"}),
    # a line outside aiter's closure: the closure's wheels, not aiter
    ("offline.lock", "uvicorn==0.54.0", "uvicorn==0.54.1", {"deps", *LAYERS_ABOVE}),
    # a line aiter's build installs: the closure's wheels and aiter
    ("offline.lock", "pandas==3.1.1", "pandas==3.1.2", {"deps", "aiter", *LAYERS_ABOVE}),
    # the sdist line: sdists, not deps
    ("offline.lock", "zmq==0.0.0", "zmq==0.0.1", {"sdists", *LAYERS_ABOVE}),
    # the build tools: every image
    ("offline.build.lock", "wheel==", "wheel===", ALL),
], ids=["header", "outside-aiter", "aiter-closure", "sdist", "build-tools"])
def test_a_lock_edit_moves_exactly_the_keys_that_read_it(profile_dir, lock_file, old, new, expected):
    path = profile_dir / "offline.toml"
    before = keys(path=path)
    _edit(profile_dir / lock_file, old, new)
    assert moved(before, keys(path=path)) == expected


def test_aiters_build_environment_is_aiters_and_torchs_closure_not_atoms():
    text = (profiles.PROFILE_DIR / "offline.lock").read_text()
    names = {b.name for b in lockfile.closure(text, {"pandas", "flydsl", "torch"})}
    assert {"pandas", "numpy", "flydsl", "sympy"} <= names
    assert not {"transformers", "fastapi", "uvicorn", "zmq", "pyzmq"} & names


# ---- Dockerfile stages ----------------------------------------------------------------------------------------

DOCKERFILE = """ARG BASE=scratch
ARG SRC=a
FROM ${BASE} AS builder
RUN echo build
FROM builder AS src-a
RUN echo a
FROM builder AS src-b
RUN echo b
FROM src-${SRC} AS src
FROM builder AS one
ARG ONE_REF
RUN --mount=type=bind,from=src,source=/x,target=/x echo one
FROM builder AS two
ARG TWO_REF
RUN echo two
"""


@pytest.fixture
def small(tmp_path) -> Path:
    path = tmp_path / "Dockerfile"
    path.write_text(DOCKERFILE)
    return path


def test_a_target_reaches_its_stages_with_the_arguments_substituted(small):
    assert [s.name for s in dockerfile.reached(small.read_text(), "one", {"SRC": "b"})] == ["builder", "src-b", "src", "one"]
    assert dockerfile.used_args(small, "one", {}) == {"BASE", "SRC", "ONE_REF"}


def test_from_names_only_a_stage_above_it_a_name_defined_below_is_an_image(small):
    """BuildKit's FROM resolves a stage defined above it; the same name defined below is pulled as an image."""
    small.write_text(DOCKERFILE + "FROM ${LATE} AS late-in\nFROM builder AS late\nRUN echo late\n"
                     "FROM ${LATE} AS late-in-again\n")
    assert dockerfile.base_image(small, "late-in", {"LATE": "late"}) == "late"
    assert [s.name for s in dockerfile.reached(small.read_text(), "late-in", {"LATE": "late"})] == ["late-in"]
    assert dockerfile.base_image(small, "late-in-again", {"LATE": "late", "BASE": "img"}) == "img"
    assert [s.name for s in dockerfile.reached(small.read_text(), "late-in-again", {"LATE": "late"})] == [
        "builder", "late", "late-in-again"]


def test_the_stages_built_on_a_stage_are_those_whose_from_chain_passes_it_and_that_run_something():
    """from_chain: a target's FROM lines followed through stages (its image's layers); built_on: the stages that
    start FROM a stage, aliases (a FROM and nothing else) and stages read with COPY --from left out."""
    text = ("ARG ENV=env-base\nFROM img AS env-base\nRUN make-env\nFROM ${ENV} AS env\nFROM env AS tool\nARG X\n"
            "RUN build-tool\nFROM tool AS top\nRUN more\nFROM scratch AS out\nCOPY --from=top /out/ /out/\n")
    assert dockerfile.from_chain(text, "top", {}) == ["top", "tool", "env", "env-base"]
    assert dockerfile.from_chain(text, "out", {}) == ["out"]
    assert dockerfile.built_on(text, "out", {}, "env-base") == {"tool", "top"}
    assert dockerfile.built_on(text, "out", {"ENV": "registry/env:key"}, "env-base") == set()  # env is an image
    assert dockerfile.built_on(text, "out", {}, "top") == set()


def test_an_edit_of_another_stage_does_not_move_a_targets_digest(small):
    before = {t: dockerfile.stage_digest(small, t, {}) for t in ("one", "two")}
    small.write_text(re.sub("echo two", "echo 2", DOCKERFILE))
    assert (dockerfile.stage_digest(small, "one", {}), dockerfile.stage_digest(small, "two", {})) == (
        before["one"], dockerfile.stage_digest(small, "two", {}))
    assert dockerfile.stage_digest(small, "two", {}) != before["two"]


def test_a_comment_edit_moves_no_digest_and_a_directive_edit_moves_every_one(small):
    """BuildKit drops comments, continuation lines' included: a reworded comment must not rebuild aiter."""
    before = {t: dockerfile.stage_digest(small, t, {}) for t in ("one", "two")}
    commented = DOCKERFILE.replace("RUN echo two\n", "# why two\nRUN echo two \\\n  # a continuation comment\n  && true\n")
    small.write_text(commented)
    moved_by_run = {t: dockerfile.stage_digest(small, t, {}) for t in ("one", "two")}
    small.write_text(commented.replace("# why two", "# why two, reworded").replace("a continuation", "another"))
    assert {t: dockerfile.stage_digest(small, t, {}) for t in ("one", "two")} == moved_by_run
    assert moved_by_run["one"] == before["one"] and moved_by_run["two"] != before["two"]  # the `&& true` counts
    small.write_text("# syntax=docker/dockerfile:1.7\n" + DOCKERFILE)
    assert all(dockerfile.stage_digest(small, t, {}) != before[t] for t in ("one", "two"))


def test_a_reference_in_a_comment_reaches_no_stage(small):
    small.write_text(DOCKERFILE.replace("RUN echo two", "# was: --mount=type=bind,from=src-b\nRUN echo two"))
    assert [s.name for s in dockerfile.reached(small.read_text(), "two", {})] == ["builder", "two"]


def test_changed_names_the_inputs_that_differ():
    assert components.changed({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == ["b", "c"]


def test_an_images_labels_hold_nothing_its_key_does_not():
    """A unit with one key for every variant (torch, ATOM, mori from PyPI, a Triton-only aiter) is one image,
    whichever variant built it first: its labels, so its config and its digest, are the same from every variant's
    plan."""
    from cleanbuild.images.schedule import unit_labels

    plans = [P.make_plan(profiles.load("offline"), build_of(arch, ck_free=ck))
             for arch, ck in ((Arch.GFX950, True), (Arch.GFX942, False))]
    first, second = ({u.name: u for u in plan.units} for plan in plans)
    shared = sorted(name for name in first if first[name].key == second[name].key)
    assert {"torch", "atom", "mori", "aiter"} <= set(shared) and "wheels" not in shared
    for name in shared:
        assert unit_labels(first[name]) == unit_labels(second[name]), name
