"""The same inputs give the same image: two cold builds of the offline profile (BuildKit cache pruned in between)
give byte-identical wheels manifests, and their clean images the same installed files and RECORD hashes.
The comparison is written to reports/reproducibility/ (with why image IDs may still differ)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace

import pytest

from cleanbuild import engine
from cleanbuild.build import pipeline, reproduce
from cleanbuild.build.plan import Plan, make_plan
from tests.support.builds import REPO, VARIANTS, offline_plan

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def cold_build(cli, n: int) -> Plan:
    """Every image of gfx950 CK-free built again (rebuild: no image found by key) under names of its own
    (atom-build/repro<n>/...), from a pruned BuildKit cache."""
    subprocess.run(["docker", "builder", "prune", "-af"], check=True, capture_output=True)  # noqa: S603,S607
    plan = offline_plan(VARIANTS[0], run_id=f"repro{n}")
    plan = make_plan(plan.profile, replace(plan.options, registry=f"atom-build/repro{n}"))
    pipeline.run(plan, cli, ("preflight", "prepare", "wheels", "clean"), rebuild=True, failed_report=False)
    return plan


def test_two_cold_builds_give_the_same_closure(docker_engine, offline_builds):
    version = docker_engine.version().get("Version", "0")
    if int(version.split(".")[0]) < 23:
        # Measured 2026-12-01: after `docker builder prune`, BuildKit 0.8 (Docker 20.10) panics in its image puller
        # (cache.setImageRefMetadata, nil ref in GetByBlob) when a build starts FROM a local multi-layer image, and
        # the engine dies. The same check on a current engine: test_reproducible_digests.py (Docker >= 26).
        pytest.skip(f"Docker {version}: BuildKit 0.8 crashes on a pruned cache under FROM-image builds")
    first, second = cold_build(docker_engine, 1), cold_build(docker_engine, 2)
    try:
        result = reproduce.compare(docker_engine, (first.wheels.image, second.wheels.image),
                                   (first.clean.image, second.clean.image))
        out = REPO / "reports" / "reproducibility"
        out.mkdir(parents=True, exist_ok=True)
        (out / "offline-gfx950-ckfree.json").write_text(json.dumps(result, indent=2) + "\n")
        assert result["manifests_identical"], "the wheels manifests of two cold builds differ"
        assert result["files_identical"] and result["records_identical"], result["records_differing"]
        assert result["distributions"] > 50 and result["files"] > 1000
        if not result["clean_ids_identical"]:
            assert "rewrite-timestamp" in result["why_ids_differ"]
    finally:
        for image in (u.image for plan in (first, second) for u in plan.units):
            engine.untag(docker_engine, image)  # untag only: an identical image may be the session's too
