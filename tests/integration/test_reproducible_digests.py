"""Same inputs, same digest, on an engine that can give it (Docker >= 26 with the containerd image store): two cold
builds of gfx950 CK-free (every image rebuilt, the BuildKit cache pruned and the first build's images removed in
between) give the same wheels, clean and candidate digests, here and in the registry. When they do not, the
comparison (cleanbuild.reproduce.compare_digests: the first differing layer and file) is the failure message; it
is written to reports/reproducibility/ either way."""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import replace

import pytest

from cleanbuild import engine, pipeline, reproduce
from cleanbuild.plan import Plan, make_plan
from tests.integration.test_registry import registry, registry_digest  # noqa: F401 - the registry fixture
from tests.support.builds import REPO, VARIANTS, offline_plan

pytestmark = [pytest.mark.docker, pytest.mark.slow]
MEASURED = ("wheels", "clean", "candidate")


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
    pipeline.run(plan, cli, ("preflight", "prepare", "wheels", "clean", "patch"), rebuild=True, failed_report=False)
    return {unit.name: engine.image_id(cli, unit.image) for unit in plan.units}


def test_two_cold_builds_give_the_same_digests_here_and_in_the_registry(reproducible_engine, registry):  # noqa: F811
    cli = reproducible_engine
    base = offline_plan(VARIANTS[0], run_id="digests")
    # Its own names (the labels name the wheels image, so both builds use the same); no registry cache: cold.
    plan = make_plan(base.profile, replace(base.options, registry=f"{registry}/digests-{uuid.uuid4().hex[:8]}", cache="none"))
    try:
        first = cold_build(cli, plan)
        for unit in plan.units:
            engine.untag(cli, unit.image)
        second = cold_build(cli, plan)
        result = reproduce.compare_digests(cli, first, second)
        out = REPO / "reports" / "reproducibility"
        out.mkdir(parents=True, exist_ok=True)
        (out / "digests-offline-gfx950-ckfree.json").write_text(json.dumps(result, indent=2) + "\n")
        assert result["identical"], json.dumps(result["differing"])
        for name in MEASURED:
            image = plan.unit(name).image
            repo, _, tag = image.removeprefix(f"{registry}/").rpartition(":")
            assert registry_digest(registry, repo, tag) == second[name], f"{image}: the registry holds another digest"
    finally:
        for unit in plan.units:
            engine.untag(cli, unit.image)
