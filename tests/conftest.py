"""Shared fixtures: the Docker engine (a skip on a laptop without one, a failure when CI=true), the real upstream
repositories and a throw-away copy of the profiles folder."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cleanbuild.upstream.profiles import PROFILE_DIR
from devsupport.upstream import upstream_dir
from tests.support import exit_hooks

# A missing mirror of the real aiter and ATOM made a skip, a failure when CI=true (upstream: first, as gpucode imports
# it). Fixtures that test folders share: the collect stage of the wheels step, the local registry, aiter's real hsa/;
# and the garbage collector's settings of every process that runs tests (gc_tuning).
pytest_plugins = ["tests.support.upstream", "tests.support.collect_stage", "tests.support.registry",
                  "tests.support.gpucode", "tests.support.gc_tuning"]
MIRROR_ENV = "ATOM_BUILD_MIRROR"  # cleanbuild.upstream.mirror.ENV
MIRROR_DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "upstream"


def pytest_configure(config) -> None:
    """The tests read the real aiter and ATOM as a mirror: $ATOM_BUILD_MIRROR, else ../shared/upstream beside the
    checkout when it is there (what .ci/run exports), so a task run in-process reads them as CI's do."""
    if not os.environ.get(MIRROR_ENV) and (MIRROR_DEFAULT / "aiter.git").is_dir():
        os.environ[MIRROR_ENV] = str(MIRROR_DEFAULT)


def pytest_collection_modifyitems(config, items) -> None:
    """The tests that empty the engine run last, so none after them builds again what they removed."""
    items.sort(key=lambda item: item.get_closest_marker("wipes_engine") is not None)


@pytest.fixture(scope="session", autouse=True)
def _torch_can_exit():
    """At the end of each process of the tier (every xdist worker): no op that torch's exit hook would fail on
    (tests/support/exit_hooks.py). A test that loads aiter's source in this process instead of a process of its
    own (tests/support/aiter_loaded.py) errors here, not as a traceback after the summary."""
    yield
    held = exit_hooks.held_here()
    if held:
        pytest.fail(f"this process holds torch ops its exit hook cannot take down: {', '.join(held)}. To fix, load "
                    "aiter's source in a process of its own that leaves by os._exit (tests/support/aiter_loaded.py).",
                    pytrace=False)


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




@pytest.fixture
def no_engine(monkeypatch, tmp_path) -> None:
    """DOCKER_HOST at a socket nobody serves (for this process and the ones it starts): a command that would ask
    the engine (plan's unit states) hears "no engine" at once, whatever engine this host runs and however busy or
    full it is. The everyday tier needs none; with one, the plan tests took 5-10 s each listing its images."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


@pytest.fixture(scope="session")
def standin_base(docker_engine) -> str:
    """The offline profile's stand-in base image (mmdebstrap at a fixed SOURCE_DATE_EPOCH, added FROM scratch by BuildKit; once, cached after)."""
    from tests.support.builds import standin_base as make

    return make(docker_engine)


@pytest.fixture(scope="session")
def offline_builds(docker_engine):
    """The two offline variants (gfx950 CK-free, gfx942 CK), each built once per session by the pipeline's steps.
    Every image is content-keyed, so build-clean in later tests reuses them."""
    from tests.support.builds import VARIANTS, build_variant

    return {v.name: build_variant(docker_engine, v) for v in VARIANTS}


PROFILE_FILES = ("default.toml", "offline.toml", "default.lock", "default.build.lock", "offline.lock",
                 "offline.build.lock")


@pytest.fixture(scope="session")
def upstream() -> Path:
    """The folder holding the real aiter.git and atom.git (skip without it, fail when CI=true)."""
    return upstream_dir()


@pytest.fixture(scope="session")
def upstream_sets(upstream) -> dict[str, str]:
    """Profile overrides pointing aiter and ATOM at the upstream copies (same commits as GitHub's)."""
    return {"components.aiter.repo": str(upstream / "aiter.git"), "components.atom.repo": str(upstream / "atom.git")}


@pytest.fixture
def profile_dir(tmp_path) -> Path:
    """A copy of cleanbuild/profiles (both profiles and their four lock files) that a test may change."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    for name in PROFILE_FILES:
        shutil.copyfile(PROFILE_DIR / name, folder / name)
    return folder
