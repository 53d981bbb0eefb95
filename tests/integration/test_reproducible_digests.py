"""Same inputs, same digest, on an engine that can give it (Docker >= 26 with the containerd image store): two
cold builds of gfx950 CK-free (the BuildKit cache pruned before each, every unit built again, the first build's
names dropped in between) give the same digest for every unit, here and in the registry, and the same closure
(wheels manifests, installed files, RECORD hashes). When they do not, the comparisons (cleanbuild.build.reproduce:
the first differing layer and file) are the failure message; both are written to reports/reproducibility/. Both
builds use the same names: the clean image's labels name the wheels image. The pushed candidate carries its SBOM
and provenance as attestations. `invoke verify` rebuilds an image from its labels: the same digest
for the image as built, the first differing layer and file for one changed after the build.

Docker 20.10 is not tested: its BuildKit 0.8 stamps build times into every image (verify refuses there, exit 3)
and, measured 2026-12-01, panics in its image puller (cache.setImageRefMetadata, nil ref in GetByBlob) when a build
starts FROM a local multi-layer image after `docker builder prune`, and the engine dies."""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import replace

import pytest

from cleanbuild import engine
from cleanbuild.build import attest, pipeline, reproduce, sbom, verify
from cleanbuild.build.plan import Plan, make_plan
from cleanbuild.errors import StepFailed
from cleanbuild.settings import resolve
from tests.integration.test_registry import registry, registry_blob, registry_digest  # noqa: F401 - the registry fixture
from tests.support.builds import REPO, VARIANTS, offline_plan

pytestmark = [pytest.mark.docker, pytest.mark.slow]
MEASURED = ("wheels", "clean", "candidate")
STEPS = ("preflight", "prepare", "wheels", "clean", "patch")


@pytest.fixture(scope="module")
def reproducible_engine(docker_engine):
    facts = engine.preflight(docker_engine, 1.0)
    if not facts.reproducible:
        pytest.skip(f"Docker {facts.version} (containerd store: {facts.containerd_store}) keeps the --load path, "
                    "whose image IDs carry build times: Docker >= 26 with the containerd image store is needed")
    return docker_engine


def cold_build(cli, plan: Plan) -> dict[str, str]:
    """Every unit of the plan built again from a pruned BuildKit cache; {unit: image ID}."""
    subprocess.run(["docker", "builder", "prune", "-af"], check=True, capture_output=True)  # noqa: S603,S607
    rec = pipeline.run(plan, cli, STEPS, rebuild=True, failed_report=False)
    return {u.name: u.image_id for u in rec.units}


def test_two_cold_builds_give_the_same_digests_and_closure_here_and_in_the_registry(reproducible_engine,
                                                                                    registry):  # noqa: F811
    cli = reproducible_engine
    base = offline_plan(VARIANTS[0], run_id="digests")
    # Both builds under the same names of their own (the clean image's labels name the wheels image), pushed;
    # no registry cache: cold. The first build's names are dropped before the second.
    plan = make_plan(base.profile, replace(base.options, registry=f"{registry}/digests-{uuid.uuid4().hex[:8]}", cache="none"))
    try:
        first = cold_build(cli, plan)
        for unit in plan.units:
            engine.untag(cli, unit.image)
        second = cold_build(cli, plan)
        for name, image_id in first.items():  # a first image the second did not match: back from the registry
            if image_id != second.get(name):
                engine.pull(cli, f"{plan.unit(name).image.rsplit(':', 1)[0]}@{image_id}")
        result = reproduce.compare_digests(cli, first, second)
        closure = reproduce.compare(cli, (first["wheels"], second["wheels"]), (first["clean"], second["clean"]))
        out = REPO / "reports" / "reproducibility"
        out.mkdir(parents=True, exist_ok=True)
        (out / "digests-offline-gfx950-ckfree.json").write_text(json.dumps(result, indent=2) + "\n")
        (out / "offline-gfx950-ckfree.json").write_text(json.dumps(closure, indent=2) + "\n")
        assert result["identical"], json.dumps(result["differing"])
        assert closure["manifests_identical"] and closure["files_identical"], closure["records_differing"]
        assert closure["records_identical"] and closure["distributions"] > 50 and closure["files"] > 1000
        for name in MEASURED:
            image = plan.unit(name).image
            repo, _, tag = image.removeprefix(f"{registry}/").rpartition(":")
            assert registry_digest(registry, repo, tag) == second[name], f"{image}: the registry holds another digest"
        check_attestations(registry, plan, second["candidate"])
    finally:
        for unit in plan.units:
            engine.untag(cli, unit.image)


def check_attestations(at: str, plan: Plan, digest: str) -> None:
    """The pushed candidate is an index of the image and its attestations: the SBOM names aiter's and ATOM's full
    commits, the provenance the pins and the lock digest; `invoke audit`'s reader lists both."""
    repo = plan.patch.image.removeprefix(f"{at}/").rpartition(":")[0]
    index = json.loads(registry_blob(at, repo, digest, manifest=True))
    manifests = {m["digest"] for m in index["manifests"]}
    found = attest.attestations(index, lambda d: registry_blob(at, repo, d, manifest=d in manifests))
    bom, prov = found[sbom.SBOM]["predicate"], found[sbom.PROVENANCE]["predicate"]
    commits = {p["name"]: p["value"] for c in bom["components"] for p in c.get("properties", [])
               if p["name"] == "io.atom-build:commit" and c["name"] in ("amd-aiter", "atom")}
    pins = {c.name: c.ref() for c in plan.profile.components}
    assert sorted(commits) == ["amd-aiter", "atom"]
    assert all(len(sha) == 40 and sha in pins[n.removeprefix("amd-")] for n, sha in commits.items()), (commits, pins)
    assert prov["buildDefinition"]["externalParameters"]["pins"] == pins
    assert attest.in_registry(f"{at}/{repo}@{digest}") == sorted([sbom.SBOM, sbom.PROVENANCE])


@pytest.fixture(scope="module")
def verified_build(reproducible_engine):
    """gfx950 CK-free built once under names of its own (local, no registry): what invoke verify is given."""
    base = offline_plan(VARIANTS[0], run_id="verify")
    plan = make_plan(base.profile, replace(base.options, registry=f"atom-build/verify-{uuid.uuid4().hex[:8]}"))
    pipeline.run(plan, reproducible_engine, ("preflight", "prepare", "wheels", "clean", "patch"), failed_report=False)
    yield plan
    for unit in plan.units:
        engine.untag(reproducible_engine, unit.image)


def test_verify_rebuilds_an_image_from_its_labels_with_the_same_digest(reproducible_engine, verified_build):
    ref = verified_build.patch.image
    result = verify.verify(reproducible_engine, ref, resolve({}, {}))
    assert (result["identical"], result["rebuilt"]) == (True, engine.image_id(reproducible_engine, ref))


def test_verify_names_the_layer_and_file_of_an_image_changed_after_the_build(reproducible_engine, verified_build,
                                                                              tmp_path):
    """A layer added on top (FROM keeps every label): the rebuild has one layer less, and the report names it."""
    ref = verified_build.patch.image
    (tmp_path / "Dockerfile").write_text(f"FROM {ref}\nRUN echo changed > /opt/atom-build/extra.txt\n")
    changed = f"{ref.rsplit(':', 1)[0]}:changed-after-build"
    subprocess.run(["docker", "buildx", "build", "--load", "--network", "host", "-t", changed, str(tmp_path)],  # noqa: S603,S607
                   check=True, capture_output=True)
    result = {}
    try:
        result = verify.verify(reproducible_engine, changed, resolve({}, {}))
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
