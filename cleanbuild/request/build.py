"""What a command is asked for (Request) and one build of it for one arch (Build).

A Request holds a loaded profile, so it sits above the foundation (cleanbuild.core.spec): the planner, the steps and
the commands take it; the engine and the other foundation modules never do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cleanbuild.core.spec import REPO_ROOT, new_run_id, today
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.request.checkout import Checkout
from cleanbuild.upstream.profiles import Profile
from validation.core.archs import CK_MODES


@dataclass(frozen=True)
class Request:
    """What a command is asked for, every value checked and typed: a task's flags, the environment and invoke.yaml,
    resolved once (cleanbuild.cli.settings.resolve, field by field from the table in cleanbuild.cli.options: each field is
    named after its option). Commands take this; nothing deeper reads a flag or the config again."""

    profile: Profile  # loaded with `overrides`, checked (cleanbuild.request.load.checked_profile)
    profile_from: str = "the default profile"  # where its name came from: --profile, the invoke.yaml key, the default
    overrides: Mapping[str, object] = field(default_factory=dict)  # invoke.yaml's overrides, then --set (which wins)
    arch: tuple[Arch, ...] = ()  # empty: detect on the host, or the image's label
    ck_free: bool = False
    builder: str | None = None
    ca_bundle: Path | None = None
    progress: str = "auto"
    model: Path | None = None
    allow_no_smoke: bool = False
    allow_unservable: bool = False  # validation's route check warns instead of failing (ALLOW_UNSERVABLE below)
    user: str = "user"
    gpu: tuple[int, ...] | None = None  # the GPUs GPU steps get; None: every GPU
    user_id: str | None = None  # UID[:GID] GPU containers run as; None: the image's user
    device: str | None = None  # where validation runs (cpu, cuda); None: the profile's
    registry: str = "atom-build"
    cache: str = "auto"  # build cache through the registry: auto (inline when the registry is remote), inline, registry, none
    cache_dir: Path = REPO_ROOT / ".cache"
    src: tuple[str, ...] = ()  # --src COMPONENT=PATH, resolved against the profile by cleanbuild.request.checkout
    mirror: Path | None = None  # local copies of the git repos (cleanbuild.upstream.mirror), attached to profile
    torch_index: str | None = None  # where `local` wheels are fetched (cleanbuild.upstream.wheelindex), attached too

    @property
    def remote(self) -> bool:
        """A registry prefix with a host (registry.example:5000/atom-build): images are pulled and pushed there."""
        first, sep, _ = self.registry.partition("/")
        return bool(sep) and ("." in first or ":" in first or first == "localhost")

    def build(self, arch: Arch, src: tuple[Checkout, ...] = ()) -> Build:
        """One build of this request for arch: today's date and a new run ID."""
        return Build(self, arch, date=today(), run_id=new_run_id(), src=src)


@dataclass(frozen=True)
class Build:
    """One build: the request it serves, plus what is this build's own: the arch, the date, the run ID and the
    local checkouts (--src, resolved by cleanbuild.request.checkout)."""

    request: Request
    arch: Arch
    date: str = "19700101"
    run_id: str = "plan"
    src: tuple[Checkout, ...] = ()

    repo_root = REPO_ROOT

    @property
    def remote(self) -> bool:
        return self.request.remote

    @property
    def run_dir(self) -> Path:
        return self.request.cache_dir / "runs" / self.run_id

    @property
    def ck_mode(self) -> str:
        return CK_MODES[1] if self.request.ck_free else CK_MODES[0]
