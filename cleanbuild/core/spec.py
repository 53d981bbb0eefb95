"""The shared types at the foundation: one `docker buildx build` (BuildSpec), one container run (RunSpec), what the
engine can do (EngineFacts), where this checkout is (REPO_ROOT), a build's run ID (new_run_id) and how the host
starts its patches CLI (patches_argv). What a command is asked for (Request, Build) is one layer up, in
cleanbuild.request.build: it holds a loaded profile.

The planner (cleanbuild.images.plan) makes them; the engine, buildx, the steps and the report take them. This module
imports nothing above it, so the Docker boundary does not depend on the planner.
"""

from __future__ import annotations

import datetime as dt
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

from cleanbuild.core import metadata
from cleanbuild.core.clone import REPO_ROOT as REPO_ROOT

# REPO_ROOT is re-exported: the rest of the package takes it from here, beside what sits in the clone.
DOCKER_DIR = REPO_ROOT / "docker"


def patches_argv(mode: str, root: Path | str, *flags: str) -> list[str]:
    """`python -m patches MODE --root ROOT ...` with this interpreter: the one way the host starts the patches CLI.

    Run it with cwd=REPO_ROOT, so the patches/ package imported is this checkout's, the one the images copy.
    """
    return [sys.executable, "-m", "patches", mode, "--root", str(root), *flags]


def today(now: dt.datetime | None = None) -> str:
    """The date part of a release tag (UTC), read once per build by the request."""
    return (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%d")


def new_run_id(now: dt.datetime | None = None) -> str:
    """Unique per build, so two builds at once never share a container or a temporary name."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%d%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


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
    reproducible: bool = False  # same inputs, same digest: the image store path (cleanbuild.images.buildx)
