"""Shared fixtures: the Docker engine (a skip on a laptop without one, a failure when CI=true)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def _engine_problem() -> str | None:
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:  # noqa: BLE001 - any failure means no usable engine
        return f"no Docker engine answers ({exc})"
    proc = subprocess.run(["docker", "buildx", "version"], capture_output=True, text=True, check=False)  # noqa: S603,S607
    if proc.returncode != 0:
        return "the buildx plugin is missing (run .ci/install-docker.sh)"
    return None


@pytest.fixture(scope="session")
def docker_engine():
    """The docker SDK client; skips without an engine, or fails when CI=true."""
    problem = _engine_problem()
    if problem:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {problem}: the docker tests must run in CI", pytrace=False)
        pytest.skip(problem)
    import docker

    return docker.from_env()


