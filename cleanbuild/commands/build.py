"""What each invoke task (and `nox -s validate`) does: take the resolved request (cleanbuild.cli.settings.Request), make
plans, then run steps through the one executor (cleanbuild.images.pipeline). Nothing here parses argv, reads invoke.yaml
or builds or runs a container itself.
"""

from __future__ import annotations

import concurrent.futures
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cleanbuild.core import engine
from cleanbuild.core.console import console, print_rows, steps_table, units_table
from cleanbuild.core.errors import (
    CleanBuildError,
)
from cleanbuild.core.outputs import output_folder
from cleanbuild.core.run import labelled, quote
from cleanbuild.gpuhost.arch import Arch, host_runner, resolve
from cleanbuild.images import buildx, pipeline, reuse, srcplan
from cleanbuild.images.plan import Plan, build_spec, commands, make_plan
from cleanbuild.images.record import BuildRecord
from cleanbuild.request import checkout
from cleanbuild.request.build import Request
from cleanbuild.upstream import mirror

if TYPE_CHECKING:
    from docker.client import DockerClient

BUILD_STEPS = ("preflight", "prepare", "wheels")


def arch_info(arch: Arch | None) -> dict[str, object]:
    det = resolve(arch, host_runner)
    facts = det.arch.facts
    return {
        "arch": det.arch.value, "source": det.source, "products": facts.products, "fp8_dtype": facts.fp8_dtype,
        "fp8_max": facts.fp8_max, "lds_per_cu_kib": facts.lds_kib,
        "cu_count": det.cu_count or " / ".join(f"{k} {v}" for k, v in facts.cu_counts.items()) + " (typical)",
        "gpu_count": len(det.gpus) if det.gpus else "not probed (--arch given)", "notes": "; ".join(det.notes) or "-",
    }


def check_sources(request: Request) -> None:
    """What a build reads from git, checked before its first effect: every git pin's repository exists (or
    answers) and holds its ref (cleanbuild.upstream.gitrepo.check_ref)."""
    from cleanbuild.upstream.gitrepo import check_ref

    profile = request.profile
    for comp in profile.components:
        if comp.source == "git":  # where the build reads it: the mirror's copy when one is set
            check_ref(profile.read_from(comp.name), comp.ref, f"components.{comp.name}.ref")


def plans(request: Request) -> list[Plan]:
    """One plan per arch (detected on the host when none was given); preparation is a step, after preflight.

    The one resolution path of `plan`, every --dry-run and the build: the mirror (already attached to the profile
    by the request), the repositories and the refs they read are checked here, so what the build would refuse,
    plan and the dry run refuse with the same line and exit code."""
    profile = request.profile
    mirror.require_reachable(profile)
    check_sources(request)
    archs = request.arch or (resolve(None, host_runner).arch,)
    src = checkout.resolve_all(request.src, {n: profile.component(n).ref for n in checkout.COMPONENTS})
    for found in src:
        if found.warning():
            console.print(f"[yellow]{found.warning()}[/yellow]")
    return [make_plan(profile, request.build(a, src)) for a in archs]


def show_plan(request: Request, *, as_json: bool) -> None:
    for plan in plans(request):
        if as_json:
            print(json.dumps(plan_dict(plan), indent=2))
            continue
        print_rows(f"plan: {plan.stem} ({plan.profile.name} profile)", {
            "base image": plan.base_image, "python": plan.profile.python, "build context": plan.prepare.context,
            "wheels image": plan.wheels.image, "clean image": plan.clean.image, "candidate": plan.patch.image,
            "release": f"{plan.release_repo}:<tag>", "smoke": plan.smoke_skip_reason or "yes",
            "git repos read from": plan.profile.mirror or "their URLs", "steps": " -> ".join(plan.steps)})
        for found in plan.options.src:
            print_rows(f"--src {found.component}={found.path}", srcplan.rows(found, plan.options, plan.release_repo))
        console.print(units_table(plan, unit_states(plan)))
        for argv in commands(plan):
            print(quote(argv))


def plan_dict(plan: Plan) -> dict[str, Any]:
    return {
        "profile": plan.profile.name, "arch": plan.options.arch.value, "ck_mode": plan.options.ck_mode,
        "python": plan.profile.python, "base_image": plan.base_image, "wheels_key": plan.wheels_key,
        "context": str(plan.prepare.context), "local_wheels": [list(w) for w in plan.prepare.local_wheels],
        "repos": {name: str(path) for name, path in plan.prepare.repos},
        "images": {"wheels": plan.wheels.image, "clean": plan.clean.image, "candidate": plan.patch.image},
        "release_repo": plan.release_repo, "build_args": {s.step: dict(s.build_args) for s in plan.builds},
        "steps": list(plan.steps), "smoke_skip_reason": plan.smoke_skip_reason,
        "src": [{**srcplan.describe(c), "why": srcplan.why(c)} for c in plan.options.src],
        "commands": [quote(a) for a in commands(plan)],
        "units": [{"name": u.name, "key": u.key, "image": u.image, "inputs": dict(u.inputs), **state}
                  for u, state in zip(plan.units, unit_states(plan), strict=True)],
    }


def unit_states(plan: Plan) -> list[dict[str, Any]]:
    """Per unit: what the build will do (cleanbuild.images.reuse: reused, pull or build), why, and the inputs that
    changed since the last other build of it here. Asks the engine; without one, says so (the plan stays pure)."""
    try:
        client = engine.client()
    except CleanBuildError as exc:
        return [{"state": "unknown", "why": f"no engine: {exc}", "changed": []} for _ in plan.units]
    return [{"state": d.action.value, "why": d.reason, "changed": list(d.changed)}
            for d in reuse.preview(client, plan)]


# ---- build steps --------------------------------------------------------------------------------------------


def _dry_run(todo: list[Plan], step: str) -> bool:
    """--dry-run: print the builds a step would run (one per image it makes, when none with its key exists), for
    each plan; True when that is all to do."""
    for plan in todo:
        for unit in plan.step_units(step):
            print(buildx.describe(build_spec(unit), plan.options))
    return True


def wheels(request: Request, *, export: Path | None, rebuild: bool, dry_run: bool) -> None:
    if export:
        output_folder(export, "--export", empty=True)  # before the build, not after it
    todo = plans(request)
    if dry_run and _dry_run(todo, "wheels"):
        return
    client = engine.client()
    for plan in todo:
        pipeline.run(plan, client, BUILD_STEPS, rebuild=rebuild, failed_report=False)
        if export:
            folder = buildx.export(plan.wheels, plan.options, export if len(todo) == 1 else export / plan.stem)
            console.print(f"[green]✓[/green] wheels and manifest.json exported to {folder} (sha256 checked)")


def clean(request: Request, *, dry_run: bool) -> None:
    todo = plans(request)
    if dry_run and _dry_run(todo, "clean"):
        return
    client = engine.client()
    for plan in todo:
        rec = pipeline.run(plan, client, (*BUILD_STEPS, "clean", *(("dev",) if "dev" in plan.steps else ())),
                           failed_report=False)
        console.print(f"[green]✓[/green] {rec.candidate_ref or plan.clean.image} ({rec.candidate()[:19]})")


def build_clean(request: Request, *, dry_run: bool) -> list[BuildRecord]:
    if dry_run:  # the plan, through the same plans() the build resolves its inputs with
        show_plan(request, as_json=False)
        return []
    todo = plans(request)
    client = engine.client()
    if len(todo) > 1:
        build_matrix(client, todo)
    done = []
    for plan in todo:
        rec = pipeline.run(plan, client, plan.steps)
        console.print(steps_table(f"build-clean {plan.stem}", rec.steps))
        result = rec.release_ref or rec.dev_ref or f"{rec.candidate_ref} (no release tag: {rec.steps[-2].detail})"
        console.print(f"[bold green]done[/bold green]: {result}; report {rec.steps[-1].detail}")
        done.append(rec)
    return done


def build_matrix(client: DockerClient, todo: list[Plan]) -> list[BuildRecord]:
    """The images of several archs and CK modes, through the patch step; validation and what follows it then run
    one variant after another and find every image by its key. The variants build at once on the same BuildKit,
    one thread and engine client each, their output lines starting with the variant. A unit they share (the build
    environments, torch, the closure, ATOM, the venv and ATOM layers) is built by the first to need it; the others
    wait for it and find it by key (schedule.ensure holds one lock per unit key), while their own units (aiter, the
    wheels, clean and candidate images) go on. A failure in one lets the others finish, then the first failure (in
    todo's order) is raised; Ctrl-C reaches every build through the process group and each thread cleans up after
    its own. Returns each variant's record, in todo's order. A single variant builds on this thread, with client."""
    if len(todo) == 1:
        return [pipeline.run(todo[0], client, _build_steps(todo[0]), failed_report=False)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="matrix") as pool:
        futures = [pool.submit(_build_variant, plan) for plan in todo]
        concurrent.futures.wait(futures)
    return [future.result() for future in futures]


def _build_steps(plan: Plan) -> tuple[str, ...]:
    return tuple(s for s in plan.steps if s in (*BUILD_STEPS, "clean", "dev", "patch"))


def _build_variant(plan: Plan) -> BuildRecord:
    with labelled(plan.stem):
        return pipeline.run(plan, engine.client(), _build_steps(plan), failed_report=False)


# ---- steps on an existing image -----------------------------------------------------------------------------
