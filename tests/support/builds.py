"""The offline images the integration tier needs, each built once per session through the pipeline's own steps.

Two variants cover what the tests prove (devsupport.builds.VARIANTS, where their plans, forget and the pin bumps
live, shared with the benchmarks). Each build is the same preflight -> prepare -> wheels -> clean -> patch that
build-clean runs, on the real aiter and ATOM pins.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from cleanbuild.core import engine
from cleanbuild.images import pipeline, prepare
from cleanbuild.images.plan import Plan
from cleanbuild.images.record import BuildRecord
from cleanbuild.request.build import Build
from devsupport.builds import (
    AITER_BUMP,
    ATOM_BUMP,
    SESSION_RUN,
    VARIANTS,
    Variant,
    bumped_profile,
    forget,
    offline_plan,
)
from tests.support.requests import changed

__all__ = ["AITER_BUMP", "ATOM_BUMP", "REPO", "SESSION_RUN", "VARIANTS", "Built", "Variant", "build_variant",
           "build_with", "bumped_profile", "forget", "offline_plan", "only_in", "standin_base", "with_options"]

REPO = Path(__file__).resolve().parents[2]


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


def build_variant(client, variant: Variant) -> Built:
    plan = offline_plan(variant)
    rec = pipeline.run(plan, client, ("preflight", "prepare", "wheels", "clean", "patch"), failed_report=False)
    return Built(variant, plan, rec)


def standin_base(client) -> str:
    plan = offline_plan(VARIANTS[0])
    return prepare.ensure_standin(plan.prepare, plan.options.request.cache_dir, lambda ref: engine.image_id(client, ref) is not None)


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
