"""Same inputs, same digest, on an engine that can give it (Docker >= 26 with the containerd image store).

The session's gfx950 CK-free build (tests/support/builds.py: on a fresh engine, a cold build) is built again by
`invoke verify` of its candidate on an engine where nothing a rebuild reads is left: every name of every unit's
images but those that hold the session's for the comparison (verify rebuilds every unit whatever it finds), the
stand-in base's name, the BuildKit cache, and the cache folder (verify gets one of its own, so mmdebstrap makes the
stand-in's tar again and the build context is made again); its caller has PYTHONDONTWRITEBYTECODE the other way round
from the session's build, which reached the stand-in's tar before cleanbuild.images.plan.STANDIN_ENV. Only the Debian
archive, which no pin holds, survives; when it served other packages since the session's stand-in was made, the
fixture says which moved and every test of the rebuild skips. Every unit and the stand-in must come out with the
same digest, and the same closure (wheels manifests, installed files, RECORD hashes); when they do not, the
comparisons (cleanbuild.images.reproduce: the first differing layer and file) are the failure message, and both are
written to reports/reproducibility/. Pushed, the wheels, clean and candidate images keep their digests, and the
candidate carries its SBOM and provenance as attestations. `invoke verify` of an image changed after the build names
the first differing layer and file.

One rebuild from nothing serves all of these. Its tests are marked wipes_engine, so they run after every other
test of the tier (tests/conftest.py) and no later test has to build again what the wipe removed. The one test here
that needs no wipe (the units built at once against one after another) runs before them.

Docker 20.10 is not tested: its BuildKit 0.8 stamps build times into every image (verify refuses there, exit 3)
and, measured 2026-12-01, panics in its image puller (cache.setImageRefMetadata, nil ref in GetByBlob) when a build
starts FROM a local multi-layer image after `docker builder prune`, and the engine dies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from dataclasses import replace

import pytest

from cleanbuild.cli.settings import resolve
from cleanbuild.core import engine, metadata
from cleanbuild.core.errors import StepFailed
from cleanbuild.core.refs import split_image
from cleanbuild.images import (
    attest,
    pipeline,
    reproduce,
    sbom,
    schedule,
    standin,
    verify,
)
from cleanbuild.images.plan import CLEAN_UNITS, Plan
from cleanbuild.images.record import clean_labels
from tests.support.builds import REPO, VARIANTS, forget
from tests.support.registry import registry_blob, registry_digest

pytestmark = [pytest.mark.docker, pytest.mark.slow]
MEASURED = ("wheels", "clean", "candidate")


@pytest.fixture(scope="module")
def reproducible_engine(docker_engine):
    facts = engine.preflight(docker_engine, 1.0)
    if not facts.reproducible:
        pytest.skip(f"Docker {facts.version} (containerd store: {facts.containerd_store}) keeps the --load path, "
                    "whose image IDs carry build times: Docker >= 26 with the containerd image store is needed")
    return docker_engine


@pytest.fixture(scope="module")
def cold_rebuild(reproducible_engine, offline_builds, tmp_path_factory):
    """(plan, first, second, verify's result, archives, cache): the session's gfx950 CK-free images ({unit: image ID},
    the stand-in's under "standin-base"), and each one's image after `invoke verify` rebuilt the candidate on an
    engine where nothing a rebuild reads is left (wipe): every other name of every unit's key and the stand-in's
    name removed, the BuildKit cache pruned, and a cache folder of its own (so mmdebstrap makes the stand-in's tar and
    the build context is made again), and PYTHONDONTWRITEBYTECODE the other way round (other_bytecode_setting).
    archives: what the Debian archive gave the session's stand-in and the rebuild's (archive_of: their labels); cache:
    the rebuild's cache folder. The first images are held under names of their own meanwhile (the containerd store
    drops an image that loses its last name; verify is given the held candidate); the session's names point at them again
    afterwards. Other units' images that share a key (the gfx942 variant's wheels) lose their names too: the tests
    that use this are marked wipes_engine and run after every other test of the tier (tests/conftest.py)."""
    client = reproducible_engine
    plan = offline_builds[VARIANTS[0].name].plan
    # The session's images, as they are now: an earlier test may have removed one (a fresh node's bump drops the
    # atom it did not pull), which this builds again.
    rec = pipeline.run(plan, client, verify.STEPS, failed_report=False)
    first = {"standin-base": str(engine.image_id(client, plan.base_image)), **{u.name: u.image_id for u in rec.units}}
    held = {name: engine.tag(client, first[name], split_image(image)[0], f"first-{name}")
            for name, image in (("standin-base", plan.base_image), *((u.name, u.image) for u in plan.units))}
    cache = tmp_path_factory.mktemp("cold-cache")
    try:
        wipe(client, plan, held=frozenset(held.values()))
        with pytest.MonkeyPatch.context() as env:
            other_bytecode_setting(env)
            result = verify.rebuild_and_compare(client, held["candidate"], replace(resolve({}, {}), cache_dir=cache))
        second = {name: str(engine.image_id(client, image))
                  for name, image in (("standin-base", plan.base_image), *((u.name, u.image) for u in plan.units))}
        assert standin.record(standin.folder(cache, plan.base_image)), "the rebuild made no stand-in tar of its own"
        archives = (archive_of(client, first["standin-base"]), archive_of(client, plan.base_image))
        debian_moved(first, second, archives)
        yield plan, first, second, result, archives, cache
    finally:
        engine.tag(client, first["standin-base"], *split_image(plan.base_image))
        for unit in plan.units:
            engine.tag(client, first[unit.name], *split_image(unit.image))
        for ref in held.values():
            engine.untag(client, ref)
        shutil.rmtree(cache, ignore_errors=True)


def other_bytecode_setting(env: pytest.MonkeyPatch) -> None:
    """The rebuild's caller with PYTHONDONTWRITEBYTECODE flipped from the session build's: before plan.STANDIN_ENV it
    reached the chroot through mmdebstrap and gave the same archive two stand-in tars (2026-12-05, CI's fresh clone:
    nox unsets it, a shell may set it)."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        env.delenv("PYTHONDONTWRITEBYTECODE")
    else:
        env.setenv("PYTHONDONTWRITEBYTECODE", "1")


def debian_moved(first: dict, second: dict, archives: tuple) -> None:
    """Writes what the two stand-ins were made from; skips (every test of the rebuild) when the Debian archive
    served other packages to the rebuild's mmdebstrap than to the session's: then the inputs differ."""
    moved = sorted(set(archives[0]["packages"].items()) ^ set(archives[1]["packages"].items()))
    out = REPO / "reports" / "reproducibility"
    out.mkdir(parents=True, exist_ok=True)
    (out / "cold-offline-gfx950-ckfree.json").write_text(json.dumps(
        {"units": {u: [first[u], second.get(u)] for u in first}, "debian_moved": moved,
         "archive": [a | {"packages": len(a["packages"])} for a in archives]}, indent=2) + "\n")
    if moved:
        pytest.skip(f"the Debian archive served other packages since the session's stand-in was made: {moved[:6]}")


def wipe(client, plan: Plan, held: frozenset[str]) -> None:
    """Nothing a rebuild of plan could read: every name of every image of its units' keys but the held ones (verify
    rebuilds every unit whatever it finds by key, and BuildKit reads no image by key), the stand-in's name and the
    BuildKit cache."""
    forget(client, plan.units, keep=held)
    engine.untag(client, plan.base_image)
    subprocess.run(["docker", "builder", "prune", "-af"], check=True, capture_output=True)  # noqa: S603,S607
    left = [ref for ref in (plan.base_image, *(u.image for u in plan.units)) if engine.image_id(client, ref)]
    assert left == [], f"still here after the wipe: {left}"


def archive_of(client, image: str) -> dict:
    """What the Debian archive gave a stand-in base, from the labels its build wrote (cleanbuild.images.standin):
    the tar's sha256 and every package's version. The image's, not the cache folder's: a fresh checkout on an
    engine that already holds the stand-in finds the image and makes no tar."""
    labels = engine.inspect(client, image).get("Config", {}).get("Labels") or {}
    debs = labels.get(metadata.STANDIN_DEBS, "")
    return {"tar_sha256": labels.get(metadata.STANDIN_TAR),
            "packages": dict(pair.split("=", 1) for pair in debs.split() if "=" in pair)}


def standin_difference(plan: Plan, cache) -> str:
    """The first file that differs between the session's stand-in tar and the rebuild's."""
    tars = [standin.folder(where, plan.base_image) / "context" / "base.tar"
            for where in (plan.options.request.cache_dir, cache)]
    if not all(tar.is_file() for tar in tars):
        return f"the session's tar is not on disk ({tars[0]}): its image came from an engine that held it"
    return "the stand-in tars differ first at {}: {}".format(*reproduce.diff_files(*map(reproduce.tar_files, tars)))


@pytest.mark.wipes_engine
def test_a_rebuild_from_nothing_gives_the_same_digests_and_closure(reproducible_engine, cold_rebuild):
    """Nothing survives the wipe but the Debian archive (cold_rebuild): the stand-in's tar is made again by
    mmdebstrap (a fixed SOURCE_DATE_EPOCH) and added FROM scratch by BuildKit (cleanbuild.images.standin), so the
    same archive gives the same tar and every image above it the same digest as the session's build (on a fresh
    machine, itself a build from nothing). Every .pyc in the tar is py3compile's, hash-checked: none was written by
    the import system of a Python a maintainer script ran, which a caller's environment could turn on or off."""
    client = reproducible_engine
    plan, first, second, _, archives, cache = cold_rebuild
    assert archives[0]["tar_sha256"] and len(archives[0]["packages"]) > 50, archives[0]
    assert archives[0]["tar_sha256"] == archives[1]["tar_sha256"], standin_difference(plan, cache)
    checked = standin.record(standin.folder(cache, plan.base_image))["pyc"]  # the rebuild's tar, read by make
    assert set(checked) == {"checked hash"} and checked["checked hash"] > 1000, checked
    out = REPO / "reports" / "reproducibility"
    units = {name: image for name, image in first.items() if name != "standin-base"}
    result = reproduce.compare_digests(client, units, {name: second[name] for name in units})
    closure = reproduce.compare(client, (first["wheels"], second["wheels"]), (first["clean"], second["clean"]))
    (out / "digests-offline-gfx950-ckfree.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "offline-gfx950-ckfree.json").write_text(json.dumps(closure, indent=2) + "\n")
    assert sorted(units) == sorted(u.name for u in plan.units) and len(units) > 8
    assert second["standin-base"] == first["standin-base"]
    assert result["identical"], json.dumps(result["differing"])
    assert closure["manifests_identical"] and closure["files_identical"], closure["records_differing"]
    assert closure["records_identical"] and closure["distributions"] > 50 and closure["files"] > 1000


@pytest.mark.wipes_engine
def test_verify_rebuilds_an_image_from_its_labels_with_the_same_digest(cold_rebuild):
    _, first, _, result, _, _ = cold_rebuild
    assert (result["identical"], result["image"], result["rebuilt"]) == (True, first["candidate"], first["candidate"])


@pytest.mark.wipes_engine
def test_pushed_images_keep_their_digests_and_the_candidate_its_attestations(reproducible_engine, cold_rebuild,
                                                                              registry):  # noqa: F811
    client = reproducible_engine
    plan, _, second, _, _, _ = cold_rebuild
    at = f"{registry}/digests-{uuid.uuid4().hex[:8]}"
    pushed = []
    try:
        for name in MEASURED:
            repo, tag = split_image(plan.unit(name).image)
            pushed.append(engine.tag(client, second[name], f"{at}/{repo.rsplit('/', 1)[-1]}", tag))
            engine.push(client, pushed[-1])
            registry_repo, _, registry_tag = pushed[-1].removeprefix(f"{registry}/").rpartition(":")
            assert registry_digest(registry, registry_repo, registry_tag) == second[name], f"{pushed[-1]}: another digest"
        check_attestations(registry, plan, pushed[-1].removeprefix(f"{registry}/").rpartition(":")[0], second["candidate"])
    finally:
        for ref in pushed:
            engine.untag(client, ref)


def check_attestations(at: str, plan: Plan, repo: str, digest: str) -> None:
    """The candidate pushed to at/repo is an index of the image and its attestations: the SBOM names aiter's and
    ATOM's full commits, the provenance the pins and the lock digest; `invoke audit`'s reader lists both."""
    index = json.loads(registry_blob(at, repo, digest, manifest=True))
    manifests = {m["digest"] for m in index["manifests"]}
    found = attest.attestations(index, lambda d: registry_blob(at, repo, d, manifest=d in manifests))
    bom, prov = found[sbom.SBOM]["predicate"], found[sbom.PROVENANCE]["predicate"]
    commits = {c["name"]: p["value"] for c in bom["components"] for p in c.get("properties", [])
               if p["name"] == "io.atom-build:commit" and c["name"] in ("amd-aiter", "atom")}
    pins = {c.name: c.provenance() for c in plan.profile.components}
    assert sorted(commits) == ["amd-aiter", "atom"]
    assert all(len(sha) == 40 and sha in pins[n.removeprefix("amd-")] for n, sha in commits.items()), (commits, pins)
    assert prov["buildDefinition"]["externalParameters"]["pins"] == pins
    assert attest.in_registry(f"{at}/{repo}@{digest}") == sorted([sbom.SBOM, sbom.PROVENANCE])


@pytest.mark.wipes_engine
def test_verify_names_the_layer_and_file_of_an_image_changed_after_the_build(reproducible_engine, cold_rebuild,
                                                                              tmp_path):
    """A layer added on top (FROM keeps every label): the rebuild has one layer less, and the report names it."""
    ref = cold_rebuild[0].patch.image
    (tmp_path / "Dockerfile").write_text(f"FROM {ref}\nRUN echo changed > /opt/atom-build/extra.txt\n")
    changed = f"{ref.rsplit(':', 1)[0]}:changed-after-build"
    subprocess.run(["docker", "buildx", "build", "--load", "--network", "host", "-t", changed, str(tmp_path)],  # noqa: S603,S607
                   check=True, capture_output=True)
    result = {}
    try:
        result = verify.rebuild_and_compare(reproducible_engine, changed, resolve({}, {}))
        layers = len(engine.layers(reproducible_engine, ref))
        assert (result["identical"], result["difference"]["layer"], result["difference"]["file"]) == (
            False, layers, "opt/atom-build/extra.txt")
        with pytest.raises(StepFailed) as info:
            verify.check(result)
        assert f"layer {layers}" in str(info.value)
    finally:
        engine.untag(reproducible_engine, changed)
        if result.get("rebuilt_ref") not in (None, ref):
            engine.untag(reproducible_engine, result["rebuilt_ref"])


def test_the_units_built_at_once_have_the_digests_of_those_built_one_after_another(reproducible_engine,
                                                                                   offline_builds):
    """The session built the wheels and clean steps' units at once (cleanbuild.images.atonce: each target builds
    inline the stages of the units it shares with the others). Built again from a pruned BuildKit cache one after
    another, each from the images of the units it reads (schedule.ensure, the classic store's path), they come out
    with the same digests: a unit found by key and a unit built on images found by key are the bytes a cold build
    would give."""
    client = reproducible_engine
    plan = offline_builds[VARIANTS[0].name].plan
    rec = pipeline.run(plan, client, ("preflight", "prepare", "wheels", "clean"), failed_report=False)
    units = [*plan.step_units("wheels"), *plan.step_units("clean")]
    names = {u.name for u in units}
    first = {u.name: u.image_id for u in rec.units if u.name in names}
    assert set(first) == names
    assert {u.how for u in rec.units if u.name in CLEAN_UNITS} <= {"found here by key",
                                                                   "built at once (venv, atom-layer, clean)"}
    forget(client, units)
    subprocess.run(["docker", "builder", "prune", "-af"], check=True, capture_output=True)  # noqa: S603,S607
    site = schedule.Site(plan, client, rec.engine)
    own = {"clean": clean_labels(plan, rec)}
    second = {u.name: schedule.ensure(site, u, own.get(u.name, ())) for u in units}
    assert {u.how for u in second.values()} == {"built"}
    assert {n: u.image_id for n, u in second.items()} == first
