"""Offline plans for the two variants the tests build (and any other arch and CK mode), images forgotten by key, and
pin bumps of the offline profile: what the integration tier and the build benchmarks both plan and clean up with.

Every plan reads aiter and ATOM from the mirror (upstream.mirrored): the real pins, no network.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from cleanbuild.cli.options import ca_bundle
from cleanbuild.core import engine
from cleanbuild.core.spec import REPO_ROOT
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images.components import Unit
from cleanbuild.images.plan import Plan, make_plan
from cleanbuild.request.build import Build, Request
from cleanbuild.upstream import profiles
from cleanbuild.upstream.profiles import Profile
from devsupport.upstream import mirrored

if TYPE_CHECKING:
    from docker.client import DockerClient

SESSION_RUN = "itest"


@dataclass(frozen=True)
class Variant:
    arch: str
    ck_free: bool

    @property
    def ck_mode(self) -> str:
        return "ckfree" if self.ck_free else "ck"

    @property
    def name(self) -> str:
        return f"{self.arch}-{self.ck_mode}"


# gfx950 CK-free (the first done-criterion) and gfx942 with CK (the other arch AND the other CK mode, so the
# shared venv layer is shown across both at once).
VARIANTS = (Variant("gfx950", True), Variant("gfx942", False))


def offline_plan(variant: Variant, run_id: str = SESSION_RUN, *, model: Path | None = None, user: str = "user",
                 overrides: dict[str, object] | None = None, cache_dir: Path | None = None,
                 allow_unservable: bool = False) -> Plan:
    profile = mirrored(profiles.load("offline", overrides))
    request = Request(profile=profile, ck_free=variant.ck_free, progress="plain", ca_bundle=ca_bundle("auto"),
                      model=model, user=user, allow_unservable=allow_unservable)
    request = replace(request, cache_dir=cache_dir) if cache_dir else request
    options = Build(request, Arch.parse(variant.arch), run_id=f"{run_id}-{variant.name}")
    return make_plan(profile, options)


def ck_free_env() -> dict[str, str]:
    """The CK-free image's environment as docker/Dockerfile.clean sets it (its ck-0 stage's ENV line)."""
    stage = (REPO_ROOT / "docker" / "Dockerfile.clean").read_text().split("FROM runtime AS ck-0\n", 1)[1]
    line = next(ln for ln in stage.splitlines() if ln.startswith("ENV "))
    return dict(pair.split("=", 1) for pair in line.removeprefix("ENV ").split())


def forget(client: DockerClient, units: Iterable[Unit], keep: frozenset[str] = frozenset()) -> None:
    """Every image of these units gone from this engine: each name of every image that carries a unit's key (an
    image is found by key whatever its name, and a second run on the same engine finds what the first one left),
    but the names in keep (an image that keeps one name keeps its bytes)."""
    for unit in units:
        for image_id, tags in engine.images_by_key(client, unit.name, unit.key):
            for ref in set(tags or (image_id,)) - keep:
                engine.untag(client, ref)
        engine.untag(client, unit.image)


# A pin bump of the offline profile, as `invoke pins --bump` makes it: a profile file that inherits offline with one
# pin moved, relocked from offline's lock (uv keeps every version it can: the closure stays what it was).
ATOM_BUMP = "5aa2fb458442b4174c2fbd5a0bd72e4cf979a2b2"  # ROCm/ATOM main, 2026-08-04; the same requirements as the pin
AITER_BUMP = "8a9186d983ed34ece2f68fe039e07f1b0abe147b"  # ROCm/aiter main, 2026-08-03, the commit after the pin


def bumped_profile(folder: Path, component: str, ref: str) -> Profile:
    import shutil

    from cleanbuild.upstream import lock

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"bump-{component}.toml"
    path.write_text(f'inherits = "offline"\nname = "bump-{component}"\n\n[components.{component}]\nref = "{ref}"\n')
    profile = mirrored(profiles.load(path.stem, path=path))
    runtime, build = lock.lock_paths(profile)
    if not runtime.is_file():
        for seed, dest in zip(lock.lock_paths(profiles.load("offline")), (runtime, build), strict=True):
            shutil.copyfile(seed, dest)
    if lock.check(profile):
        lock.write(profile)
    return profile
