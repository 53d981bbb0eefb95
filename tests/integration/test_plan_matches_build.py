"""`invoke plan` and the build it describes agree on the real engine (offline profile): every keyed unit ends where
the plan said, reused (found here or pulled) or built. Both ask one function (cleanbuild.images.reuse.decide).

The engine is shared, so the units the plan is asked about first exist already (the offline variant is built
first, through the same steps): what the plan predicts is then no race with another build of the same keys. Only
the clean image and the candidate get keys of their own (the profile's `pinned`, a clean image label, is this
run's), so the plan has both answers to give.
"""

from __future__ import annotations

import os

import pytest

from cleanbuild.commands import build
from cleanbuild.images import pipeline
from tests.support.builds import VARIANTS, offline_plan

pytestmark = [pytest.mark.docker, pytest.mark.slow]
RUN = os.urandom(3).hex()
STEPS = ("preflight", "prepare", "wheels", "clean", "patch")


def plan_then_build(client, plan) -> tuple[dict[str, str], dict[str, str]]:
    """(unit -> the plan's state, unit -> how the build ended it) for one request."""
    said = {u.name: s["state"] for u, s in zip(plan.units, build.unit_states(plan), strict=True)}
    rec = pipeline.run(plan, client, STEPS, failed_report=False)
    return said, {u.name: u.status for u in rec.units}


def ends(said: dict[str, str]) -> dict[str, str]:
    """What the plan's states mean for the build's record: pulled or found is reused, the rest built."""
    return {name: "built" if state == "build" else "reused" for name, state in said.items()}


def test_every_unit_ends_where_the_plan_said(docker_engine):
    pipeline.run(offline_plan(VARIANTS[0], f"reuse-warm-{RUN}"), docker_engine, STEPS, failed_report=False)
    plan = offline_plan(VARIANTS[0], f"reuse-{RUN}", overrides={"pinned": f"reuse-{RUN}"})

    said, ended = plan_then_build(docker_engine, plan)
    assert {n for n, s in said.items() if s == "build"} == {"clean", "candidate"}
    assert ended == ends(said)

    said, ended = plan_then_build(docker_engine, plan)
    assert set(said.values()) == {"reused"}
    assert ended == ends(said)
