"""Builds for tests: a Request (cleanbuild.core.spec) with some fields set, for one arch, without flags or invoke.yaml."""

from __future__ import annotations

from dataclasses import fields, replace

from cleanbuild.gpuhost.arch import Arch
from cleanbuild.request.build import Build, Request
from cleanbuild.upstream import profiles
from cleanbuild.upstream.profiles import Profile

BUILD_FIELDS = {f.name for f in fields(Build)} - {"request"}


def build_of(arch: Arch, profile: Profile | None = None, **changes) -> Build:
    """A Build of arch; changes go to the Build (arch, date, run_id, src) or else to its Request."""
    request = Request(profile=profile or profiles.load("offline"))
    return changed(Build(request, arch), **changes)


def changed(build: Build, **changes) -> Build:
    """build with some fields changed, each where it lives: the Build's own, or its Request's."""
    own = {k: v for k, v in changes.items() if k in BUILD_FIELDS}
    asked = {k: v for k, v in changes.items() if k not in BUILD_FIELDS}
    return replace(build, request=replace(build.request, **asked), **own)


def offline_plan(**kw):
    """The offline profile's plan for gfx942, run ID r1: what the report tests write reports of."""
    from cleanbuild.gpuhost.arch import Arch
    from cleanbuild.images import plan
    from cleanbuild.upstream import profiles

    return plan.make_plan(profiles.load("offline"), build_of(Arch.GFX942, run_id="r1", **kw))
