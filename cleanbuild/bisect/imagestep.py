"""`bisect --image`: one step is a real build of the commit through the normal pipeline, then validation inside
the image it made.

The component is pinned at the commit the way `pins --bump` pins it (a profile that inherits the user's, its lock
remade for the commit, in the step's own folder), the build runs preflight..patch (the keys move only for the
component's units: aiter's wheel, the wheels image, clean and the candidate; everything below is found by key),
then the validate step runs the chosen checks in the candidate. A commit that does not build, or whose patches
drift, is untestable (git bisect skips it); a check that fails inside the image makes it bad. The engine gone, or
Ctrl-C, stops the bisection.

The step runs in `git bisect run`'s child process, so the request travels in a file of the bisection's private
work folder: pickled, because it holds the loaded profile (its read-only mappings are saved as plain dicts).
"""

from __future__ import annotations

import copyreg
import io
import json
import pickle
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cleanbuild.bisect.checks import Check
from cleanbuild.bisect.probe import UNTESTABLE, Finding, validation_finding
from cleanbuild.core import engine
from cleanbuild.core.errors import BuildFailed, StepFailed, UsageError
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import pipeline
from cleanbuild.images.plan import Plan, make_plan
from cleanbuild.images.record import BuildRecord, StepFailedWith
from cleanbuild.request.build import Request
from cleanbuild.request.load import load_profile
from cleanbuild.upstream import lock
from cleanbuild.upstream.profiles import PROFILE_DIR, chain

BUILD = ("preflight", "prepare", "wheels", "clean", "patch")
# What a commit can get wrong in its own build (not the host's fault): git bisect skips such a commit.
UNTESTABLE_ERRORS = (BuildFailed, StepFailed, UsageError)


@dataclass(frozen=True)
class Setup:
    request: Request  # as the user asked, before any commit is pinned
    arch: Arch


def _proxy(data: dict[str, Any]) -> MappingProxyType[str, Any]:
    return MappingProxyType(data)


class _Pickler(pickle.Pickler):
    dispatch_table = {**copyreg.dispatch_table, MappingProxyType: lambda m: (_proxy, (dict(m),))}


def save(setup: Setup, path: Path) -> str:
    buffer = io.BytesIO()
    _Pickler(buffer).dump(setup)
    path.write_bytes(buffer.getvalue())
    return str(path)


def load(path: Path) -> Setup:
    loaded = pickle.loads(path.read_bytes())  # noqa: S301 - our own file, in the bisection's mkdtemp folder
    if not isinstance(loaded, Setup):
        raise TypeError(f"{path} does not hold a bisect image setup")
    return loaded


def at_commit(request: Request, component: str, sha: str, folder: Path) -> Request:
    """The request with the component pinned at sha, as `pins --bump` would pin it: a profile file in folder that
    inherits the request's (its own files copied beside it unless built in) under the same name, with its lock
    remade from the request's lock (uv keeps every version it can: the same closure when the requirements hold).
    Called again for the same folder and commit, it finds the lock it made current and remakes nothing."""
    folder.mkdir(parents=True, exist_ok=True)
    base = request.profile.file
    for file in chain(base):
        if file.parent.resolve() != PROFILE_DIR.resolve():
            shutil.copyfile(file, folder / file.name)
    path = folder / "bisect-step.toml"
    path.write_text(f"inherits = {json.dumps(base.stem)}\nname = {json.dumps(request.profile.name)}\n\n"
                    f"[components.{component}]\nref = {json.dumps(sha)}\n")
    overrides = {**request.overrides, f"components.{component}.ref": sha}  # over --set's own ref, if any
    profile = load_profile(str(path), overrides, request.mirror, torch_index=request.torch_index)
    for seed, dest in zip(lock.lock_paths(request.profile), lock.lock_paths(profile), strict=True):
        if seed.is_file() and not dest.is_file():  # a lock this folder already holds is checked, not replaced
            shutil.copyfile(seed, dest)
    if lock.check(profile):
        lock.write(profile)
    return replace(request, overrides=overrides, profile=profile)


def plan_for(setup: Setup, component: str, sha: str, checks: tuple[Check, ...], folder: Path) -> Plan:
    request = at_commit(setup.request, component, sha, folder)
    plan = make_plan(request.profile, request.build(setup.arch))
    spec = plan.validate
    return replace(plan, validate=replace(spec, command=(*spec.command, "--only", *(c.name for c in checks))))


def probe(setup: Setup, component: str, checks: tuple[Check, ...], sha: str, folder: Path) -> list[Finding]:
    """Build sha's image and validate it: one finding per check. folder: the step's own (its profile and lock)."""
    client = engine.client()
    try:
        plan = plan_for(setup, component, sha, checks, folder)  # a commit the lock cannot be made for: skipped too
        rec = pipeline.run(plan, client, BUILD, failed_report=False)
    except UNTESTABLE_ERRORS as exc:
        why = (str(exc).splitlines() or [type(exc).__name__])[0]
        return [Finding(c.label, UNTESTABLE, f"{c.label}: untestable: the image of {sha[:12]} did not build: {why}")
                for c in checks]
    try:
        rec = pipeline.run(plan, client, ("validate",), rec, failed_report=False)
    except StepFailedWith as exc:
        rec = exc.record
        engine.untag(client, f"{plan.release_repo}:{plan.options.run_id}-failed")  # the candidate keeps its key name
    return [_finding(rec, c, sha) for c in checks]


def _finding(rec: BuildRecord, check: Check, sha: str) -> Finding:
    results = {c["name"]: c for c in (rec.validation or {}).get("checks", [])}
    if check.name not in results:
        return Finding(check.label, UNTESTABLE, f"{check.label}: untestable: validation in the image of {sha[:12]} "
                       "wrote no result for it")
    return validation_finding(results[check.name], " in the image")
