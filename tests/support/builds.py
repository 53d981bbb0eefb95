"""The offline images the integration tier needs, each built once per session through the pipeline's own steps.

Two variants cover what the tests prove: gfx950 CK-free (the issue's first done-criterion) and gfx942 with CK
(the other arch AND the other CK mode, so the shared venv layer is shown across both at once). Each build is the
same preflight -> prepare -> wheels -> clean -> patch that build-clean runs, on the real aiter and ATOM pins.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from cleanbuild.cli.options import ca_bundle
from cleanbuild.core import engine
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import pipeline, prepare
from cleanbuild.images.plan import Plan, make_plan
from cleanbuild.images.record import BuildRecord
from cleanbuild.request.build import Build, Request
from cleanbuild.upstream import profiles
from tests.support.requests import changed
from tests.support.upstream import mirrored

REPO = Path(__file__).resolve().parents[2]
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


VARIANTS = (Variant("gfx950", True), Variant("gfx942", False))


@dataclass(frozen=True)
class Built:
    variant: Variant
    plan: Plan
    record: BuildRecord

    @property
    def wheels(self) -> str:
        return self.plan.wheels.image

    @property
    def clean(self) -> str:
        return self.plan.clean.image

    @property
    def candidate(self) -> str:
        return self.plan.patch.image


def offline_plan(variant: Variant, run_id: str = SESSION_RUN, *, model: Path | None = None, user: str = "user",
                 overrides: dict | None = None, cache_dir: Path | None = None) -> Plan:
    profile = mirrored(profiles.load("offline", overrides))
    request = Request(profile=profile, ck_free=variant.ck_free, progress="plain", ca_bundle=ca_bundle("auto"),
                      model=model, user=user, **({"cache_dir": cache_dir} if cache_dir else {}))
    options = Build(request, Arch.parse(variant.arch), run_id=f"{run_id}-{variant.name}")
    return make_plan(profile, options)


def build_variant(client, variant: Variant) -> Built:
    plan = offline_plan(variant)
    rec = pipeline.run(plan, client, ("preflight", "prepare", "wheels", "clean", "patch"), failed_report=False)
    return Built(variant, plan, rec)


def standin_base(client) -> str:
    plan = offline_plan(VARIANTS[0])
    return prepare.ensure_standin(plan.prepare, plan.options.request.cache_dir, lambda ref: engine.image_id(client, ref) is not None)


def forget(client, units, keep: frozenset[str] = frozenset()) -> None:
    """Every image of these units gone from this engine: each name of every image that carries a unit's key (an
    image is found by key whatever its name, and a second run on the same engine finds what the first one left),
    but the names in keep (an image that keeps one name keeps its bytes)."""
    for unit in units:
        for image_id, tags in engine.images_by_key(client, unit.name, unit.key):
            for ref in set(tags or (image_id,)) - keep:
                engine.untag(client, ref)
        engine.untag(client, unit.image)


def only_in(plan: Plan, *others: Plan) -> list:
    """The units of plan whose keys none of the others has: what a bump moved."""
    keys = {u.key for other in others for u in other.units}
    return [u for u in plan.units if u.key not in keys]


def with_options(plan: Plan, **changes) -> Plan:
    return replace(plan, options=changed(plan.options, **changes))


def build_with(spec, options: Build, **args: str) -> str:
    """One build of a plan's spec with some build arguments changed (a failure raises cleanbuild's BuildFailed)."""
    from cleanbuild.images import buildx

    return buildx.build(replace(spec, build_args=tuple(sorted({**dict(spec.build_args), **args}.items()))), options,
                        show=False)


# A pin bump of the offline profile, as `invoke pins --bump` makes it: a profile file that inherits offline with one
# pin moved, relocked from offline's lock (uv keeps every version it can: the closure stays what it was).
ATOM_BUMP = "5aa2fb458442b4174c2fbd5a0bd72e4cf979a2b2"  # ROCm/ATOM main, 2026-08-04; the same requirements as the pin
AITER_BUMP = "8a9186d983ed34ece2f68fe039e07f1b0abe147b"  # ROCm/aiter main, 2026-08-03, the commit after the pin


def bumped_profile(folder: Path, component: str, ref: str):
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
