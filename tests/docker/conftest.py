"""Fixtures for the tests that build the real Dockerfiles on the real engine with the offline profile.

Every build goes through `buildx_build` (one argv, one place). A missing engine skips these tests on a laptop and
fails them when CI=true. Each image is built once per session; later builds reuse BuildKit's cached layers.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from cleanbuild import offline, profiles
from cleanbuild.arch import Arch
from cleanbuild.plan import Options, Plan, make_plan

REPO = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO / "docker"
BUILD_TIMES: list[tuple[str, float, bool]] = []  # (what, seconds, ok), printed at the end of the session


class BuildError(Exception):
    """A buildx build failed; `output` holds its plain progress log."""

    def __init__(self, argv: list[str], returncode: int, output: str) -> None:
        super().__init__(f"build failed ({returncode}): {' '.join(argv)}\n{output[-6000:]}")
        self.argv, self.returncode, self.output = argv, returncode, output


def buildx_argv(dockerfile: Path, context: Path, target: str | None, build_args: Mapping[str, str],
                tags: Iterable[str], secrets: Iterable[str], labels: Mapping[str, str], iidfile: Path) -> list[str]:
    argv = ["docker", "buildx", "build", "--file", str(dockerfile), "--network", "host", "--progress", "plain",
            "--iidfile", str(iidfile)]
    if target:
        argv += ["--target", target]
    for key, value in build_args.items():
        argv += ["--build-arg", f"{key}={value}"]
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    for tag in tags:
        argv += ["--tag", tag]
    for secret in secrets:
        argv += ["--secret", secret]
    return [*argv, str(context)]


def buildx_build(dockerfile: Path, context: Path, target: str | None = None, build_args: Mapping[str, str] = (),
                 tags: Iterable[str] = (), secrets: Iterable[str] | None = None,
                 labels: Mapping[str, str] = (), what: str = "") -> str:
    """Build with buildx (the docker driver loads the result) and return the image ID; BuildError on failure."""
    if secrets is None:
        ca = offline.ca_bundle()
        secrets = [f"id=ca,src={ca}"] if ca else []
    iidfile = Path(os.environ.get("TMPDIR", "/tmp")) / f"atom-build-iid-{os.getpid()}-{time.monotonic_ns()}"
    argv = buildx_argv(Path(dockerfile), Path(context), target, dict(build_args), tags, secrets, dict(labels),
                       iidfile)
    start = time.monotonic()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)  # noqa: S603
    BUILD_TIMES.append((what or " ".join(tags) or str(dockerfile.name), time.monotonic() - start,
                        proc.returncode == 0))
    if proc.returncode != 0:
        raise BuildError(argv, proc.returncode, proc.stdout)
    image_id = iidfile.read_text().strip()
    iidfile.unlink()
    return image_id


def pytest_terminal_summary(terminalreporter) -> None:
    if BUILD_TIMES:
        terminalreporter.section("docker builds")
        for what, seconds, ok in BUILD_TIMES:
            terminalreporter.write_line(f"{'ok  ' if ok else 'FAIL'} {seconds:7.1f} s  {what}")


@pytest.fixture(scope="session")
def standin_base(docker_engine) -> str:
    return offline.ensure_standin_base()


@pytest.fixture(scope="session")
def offline_context(docker_engine) -> Path:
    return offline.prepare_sources()


@dataclass(frozen=True)
class Variant:
    arch: str
    enable_ck: bool

    @property
    def ck_mode(self) -> str:
        return "ck" if self.enable_ck else "ckfree"

    @property
    def name(self) -> str:
        return f"{self.arch}-{self.ck_mode}"


VARIANTS = [Variant("gfx942", False), Variant("gfx950", False), Variant("gfx950", True)]
OCI_LABELS = {"org.opencontainers.image.title": "atom-build clean (offline test)",
              "org.opencontainers.image.revision": "test"}


@dataclass(frozen=True)
class Built:
    variant: Variant
    wheels_id: str
    clean_id: str
    wheels_tag: str
    clean_tag: str


def offline_plan(context: Path, base: str, variant: Variant) -> Plan:
    """The planner's view of this variant: build arguments and image names come from the offline profile."""
    options = Options(arch=Arch.parse(variant.arch), ck_free=not variant.enable_ck, context=context,
                      base_image=base, run_id="docker-tests")
    return make_plan(profiles.load("offline"), options)


def build_wheels(context: Path, base: str, variant: Variant, tag: str | None = None, **overrides: str) -> str:
    spec = offline_plan(context, base, variant).wheels
    args = {**dict(spec.build_args), **overrides}
    return buildx_build(spec.dockerfile, context, target=spec.target, build_args=args,
                        tags=[tag] if tag else [], what=f"wheels {variant.name} {overrides or ''}".strip())


@pytest.fixture(scope="session", params=VARIANTS, ids=lambda v: v.name)
def built(request, offline_context, standin_base) -> Built:
    """Wheels image, then clean image, for one (arch, CK mode): built once per session."""
    variant: Variant = request.param
    # The planner's content-keyed names, so build-clean later reuses these images. FROM ${WHEELS_IMAGE} needs a
    # name: this BuildKit looks a bare image ID up on Docker Hub.
    plan = offline_plan(offline_context, standin_base, variant)
    wheels_tag, clean_tag = plan.wheels.image, plan.clean.image
    wheels_id = build_wheels(offline_context, standin_base, variant, tag=wheels_tag)
    clean_id = buildx_build(plan.clean.dockerfile, plan.clean.context, target=plan.clean.target,
                            build_args=dict(plan.clean.build_args), tags=[clean_tag], labels=OCI_LABELS,
                            what=f"clean {variant.name}")
    return Built(variant, wheels_id, clean_id, wheels_tag, clean_tag)


class Helpers:
    """What the test modules use, handed out by the `dk` fixture (test modules never import conftest)."""

    BuildError = BuildError
    Variant = Variant
    DOCKER_DIR = DOCKER_DIR
    REPO = REPO
    buildx_build = staticmethod(buildx_build)
    build_wheels = staticmethod(build_wheels)

    @staticmethod
    def run_in(client, image: str, command: list[str], volumes: dict | None = None) -> str:
        return run_in(client, image, command, volumes)

    @staticmethod
    def image_json(client, image: str, path: str) -> dict:
        return image_json(client, image, path)


@pytest.fixture(scope="session")
def dk() -> type[Helpers]:
    return Helpers


def run_in(client, image: str, command: list[str], volumes: dict | None = None) -> str:
    """Run a command in a throw-away container with no network; return its output (raises on non-zero)."""
    out = client.containers.run(image, command, network_mode="none", remove=True, volumes=volumes or {},
                                stdout=True, stderr=True)
    return out.decode()


def image_json(client, image: str, path: str) -> dict:
    return json.loads(run_in(client, image, ["cat", path]))
