"""The shared types at the foundation: what a build is asked for (Options), one build (BuildSpec), one container
run (RunSpec), what the engine can do (EngineFacts), where this checkout is (REPO_ROOT) and how the host starts
its patches CLI (patches_argv).

The planner (cleanbuild.images.plan) makes them; the engine, buildx, the steps and the report take them. This module
imports nothing above it, so the Docker boundary does not depend on the planner.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from validation.archs import CK_MODES

from . import metadata
from .checkout import Checkout
from .gpuhost.arch import Arch

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKER_DIR = REPO_ROOT / "docker"


def patches_argv(mode: str, root: Path | str, *flags: str) -> list[str]:
    """`python -m patches MODE --root ROOT ...` with this interpreter: the one way the host starts the patches CLI.

    Run it with cwd=REPO_ROOT, so the patches/ package imported is this checkout's, the one the images copy.
    """
    return [sys.executable, "-m", "patches", mode, "--root", str(root), *flags]


@dataclass(frozen=True)
class Options:
    arch: Arch
    ck_free: bool = False
    builder: str | None = None
    progress: str = "auto"
    ca_bundle: Path | None = None
    model: Path | None = None
    allow_no_smoke: bool = False
    user: str = "user"
    date: str = "19700101"
    registry: str = "atom-build"
    run_id: str = "plan"
    repo_root: Path = REPO_ROOT
    cache_dir: Path = REPO_ROOT / ".cache"
    validation_device: str | None = None  # `nox -s validate --device`: overrides the profile's
    gpus: tuple[int, ...] | None = None  # --gpu: the GPUs GPU steps get (None: all)
    container_user: str | None = None  # --user for GPU containers (None: the image's user)
    cache: str = "auto"  # build cache through the registry: auto (inline when the registry is remote), inline, registry, none
    src: tuple[Checkout, ...] = ()  # --src: local checkouts, resolved (cleanbuild.checkout)

    @property
    def remote(self) -> bool:
        """A registry prefix with a host (registry.example:5000/atom-build): images are pulled and pushed there."""
        first, sep, _ = self.registry.partition("/")
        return bool(sep) and ("." in first or ":" in first or first == "localhost")

    @property
    def run_dir(self) -> Path:
        return self.cache_dir / "runs" / self.run_id

    @property
    def ck_mode(self) -> str:
        return CK_MODES[1] if self.ck_free else CK_MODES[0]


@dataclass(frozen=True)
class BuildSpec:
    """One `docker buildx build`, as data (cleanbuild.images.buildx_argv makes its argv). `image` is the name
    it is loaded under."""

    step: str
    dockerfile: Path
    context: Path
    target: str | None
    build_args: tuple[tuple[str, str], ...]
    image: str


@dataclass(frozen=True)
class RunSpec:
    """One container run, as data: the engine hands it to the docker SDK; argv() is for people."""

    step: str
    name: str
    command: tuple[str, ...]
    mounts: tuple[tuple[str, str, str], ...] = ()  # (host path, container path, "ro"|"rw")
    env: tuple[tuple[str, str], ...] = ()
    gpu: bool = False
    network: str = "none"
    workdir: str = metadata.IN_IMAGE
    run_id: str = ""

    def argv(self, image: str = "IMAGE", gpu_flags: tuple[str, ...] = ()) -> list[str]:
        argv = ["docker", "run", "--rm", "--name", self.name, "--network", self.network]
        if self.run_id:
            argv += ["--label", f"{metadata.RUN_LABEL}={self.run_id}"]
        argv += list(gpu_flags) if self.gpu else []
        for host, inside, mode in self.mounts:
            argv += ["--mount", f"type=bind,source={host},target={inside}" + (",readonly" if mode == "ro" else "")]
        for key, value in self.env:
            argv += ["-e", f"{key}={value}"]
        return [*argv, "-w", self.workdir, image, *self.command]


@dataclass(frozen=True)
class EngineFacts:
    version: str
    buildx: str
    root_dir: str
    free_gib: float
    containerd_store: bool = False  # the containerd image store: an image's ID is its manifest digest
    reproducible: bool = False  # same inputs, same digest: rewrite-timestamp builds (cleanbuild.images.buildx)
