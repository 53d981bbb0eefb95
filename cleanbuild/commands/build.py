"""What each invoke task (and `nox -s validate`) does: take the resolved request (cleanbuild.cli.settings.Request), make
plans, then run steps through the one executor (cleanbuild.images.pipeline). Nothing here parses argv, reads invoke.yaml
or builds or runs a container itself.
"""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cleanbuild.cli import settings
from cleanbuild.cli.settings import Request
from cleanbuild.core import engine, metadata
from cleanbuild.core.console import console, key_values, steps_table, units_table
from cleanbuild.core.errors import (
    CleanBuildError,
    EnvironmentProblem,
    StepFailed,
    UsageError,
)
from cleanbuild.core.outputs import output_folder
from cleanbuild.core.refs import image_ref, parse_image, split_image
from cleanbuild.core.run import labelled, quote, run
from cleanbuild.core.spec import REPO_ROOT, patches_argv
from cleanbuild.gpuhost.arch import Arch, host_runner, resolve
from cleanbuild.images import buildx, pipeline, report, reuse, srcplan, steps
from cleanbuild.images.plan import Plan, build_spec, commands, make_plan
from cleanbuild.images.record import BuildRecord
from cleanbuild.request import checkout
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


def print_rows(title: str, rows: Mapping[str, object]) -> None:
    console.print(key_values(title, list(rows.items())))


def check_sources(request: Request) -> None:
    """What a build reads from git, checked before its first effect: every git pin's repository exists (or
    answers) and holds its ref (cleanbuild.upstream.gitrepo.check_ref)."""
    from cleanbuild.upstream.gitrepo import check_ref

    profile = request.profile
    for comp in profile.components:
        if comp.source == "git":  # where the build reads it: the mirror's copy when one is set
            check_ref(profile.read_from(comp.name), str(comp.get("ref")), f"components.{comp.name}.ref")


def plans(request: Request) -> list[Plan]:
    """One plan per arch (detected on the host when none was given); preparation is a step, after preflight.

    The one resolution path of `plan`, every --dry-run and the build: the mirror (already attached to the profile
    by the request), the repositories and the refs they read are checked here, so what the build would refuse,
    plan and the dry run refuse with the same line and exit code."""
    profile = request.profile
    mirror.require_reachable(profile)
    check_sources(request)
    archs = request.arch or (resolve(None, host_runner).arch,)
    src = checkout.resolve_all(request.src, {n: str(profile.component(n).get("ref")) for n in checkout.COMPONENTS})
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
        cli = engine.client()
    except CleanBuildError as exc:
        return [{"state": "unknown", "why": f"no engine: {exc}", "changed": []} for _ in plan.units]
    return [{"state": d.action.value, "why": d.reason, "changed": list(d.changed)}
            for d in reuse.preview(cli, plan)]


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
    cli = engine.client()
    for plan in todo:
        pipeline.run(plan, cli, BUILD_STEPS, rebuild=rebuild, failed_report=False)
        if export:
            folder = buildx.export(plan.wheels, plan.options, export if len(todo) == 1 else export / plan.stem)
            console.print(f"[green]✓[/green] wheels and manifest.json exported to {folder} (sha256 checked)")


def clean(request: Request, *, dry_run: bool) -> None:
    todo = plans(request)
    if dry_run and _dry_run(todo, "clean"):
        return
    cli = engine.client()
    for plan in todo:
        rec = pipeline.run(plan, cli, (*BUILD_STEPS, "clean", *(("dev",) if "dev" in plan.steps else ())),
                           failed_report=False)
        console.print(f"[green]✓[/green] {rec.candidate_ref or plan.clean.image} ({rec.candidate()[:19]})")


def build_clean(request: Request, *, dry_run: bool) -> list[BuildRecord]:
    if dry_run:  # the plan, through the same plans() the build resolves its inputs with
        show_plan(request, as_json=False)
        return []
    todo = plans(request)
    cli = engine.client()
    if len(todo) > 1:
        build_matrix(cli, todo)
    done = []
    for plan in todo:
        rec = pipeline.run(plan, cli, plan.steps)
        console.print(steps_table(f"build-clean {plan.stem}", rec.steps))
        result = rec.release_ref or rec.dev_ref or f"{rec.candidate_ref} (no release tag: {rec.steps[-2].detail})"
        console.print(f"[bold green]done[/bold green]: {result}; report {rec.steps[-1].detail}")
        done.append(rec)
    return done


def build_matrix(cli: DockerClient, todo: list[Plan]) -> list[BuildRecord]:
    """The images of several archs and CK modes, through the patch step; validation and what follows it then run
    one variant after another and find every image by its key. The variants build at once on the same BuildKit,
    one thread and engine client each, their output lines starting with the variant. A unit they share (the build
    environments, torch, the closure, ATOM, the venv and ATOM layers) is built by the first to need it; the others
    wait for it and find it by key (steps._ensure holds one lock per unit key), while their own units (aiter, the
    wheels, clean and candidate images) go on. A failure in one lets the others finish, then the first failure (in
    todo's order) is raised; Ctrl-C reaches every build through the process group and each thread cleans up after
    its own. Returns each variant's record, in todo's order. A single variant builds on this thread, with cli."""
    if len(todo) == 1:
        return [pipeline.run(todo[0], cli, _build_steps(todo[0]), failed_report=False)]
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

def image_plan(image: str, request: Request, cli: DockerClient) -> tuple[Plan, BuildRecord]:
    """A plan for an image that exists: its arch and CK mode come from its labels unless --arch is given."""
    image_id = engine.image_id(cli, image)
    if image_id is None:
        raise UsageError(f"image {image} not found on this engine. To fix, build it (invoke build-clean) or pass an existing image.")
    label, ck_mode = metadata.image_labels(engine.inspect(cli, image).get("Config", {}).get("Labels"))
    archs = request.arch or settings.parse_arch(label)
    if not archs:
        raise UsageError(f"{image} has no {metadata.label('arch')} label. To fix, pass --arch gfx942|gfx950.")
    request = replace(request, ck_free=request.ck_free or ck_mode == "ckfree")
    plan = make_plan(request.profile, request.build(archs[0]))
    return plan, pipeline.new_record(plan, candidate_id=image_id, candidate_ref=image)


def validate(image: str, request: Request, *, rest: tuple[str, ...], dest: Path | None) -> int:
    """`nox -s validate -- --image TAG`: the validate step of build-clean, on any image; the report copied out."""
    image_ref(image, "--image")  # the request is checked already; the reference too before the engine is asked
    cli = engine.client()
    plan, rec = image_plan(image, request, cli)
    if rest:
        spec = plan.validate
        plan = replace(plan, validate=replace(spec, command=(*spec.command, *rest)))
    try:
        rec = pipeline.run(plan, cli, ("preflight", "validate"), rec, failed_report=False)
        code = 0
    except StepFailed as exc:
        console.print(f"[red]{exc}[/red]")
        code = 1
    src = plan.options.run_dir / "validation.json"
    if src.is_file():
        out = dest or REPO_ROOT / "reports" / f"validate-{plan.options.run_id}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(src.read_bytes())
        console.print(f"report: {out}")
    return code


def smoke(image: str, request: Request) -> None:
    image_ref(image, "--image")
    cli = engine.client()
    plan, rec = image_plan(image, request, cli)
    rec = pipeline.run(plan, cli, ("preflight", "smoke"), rec, failed_report=False)
    result = (rec.smoke or {})["result"]
    console.print(f"[green]✓[/green] {result['new_tokens']} new tokens ({result['counted_by']}): {result.get('completion')!r}")


def tag(image: str, request: Request, *, dry_run: bool) -> None:
    image_ref(image, "--image")
    cli = engine.client()
    plan, rec = image_plan(image, replace(request, allow_no_smoke=True), cli)
    steps.refuse_dirty(cli, rec.candidate(), image)
    if dry_run:
        rec = steps.release_tag(steps.Ctx(plan, cli, steps.Journal()), rec)[0]
    else:
        rec = pipeline.run(plan, cli, ("preflight", "tag"), rec, failed_report=False)
    f, made = rec.tagged()
    print_rows("tag", {"tag": f"{metadata.release_repo(plan.options.request.registry, f.arch, f.ck_mode)}:{made.value}",
                       "rocm": f.rocm_release, "aiter": f.aiter, "atom": f.atom, "length": len(made.value),
                       "changes": "; ".join(made.steps) or "none needed", "applied": rec.release_ref or "no (--dry-run)"})


def patch(*, folder: str | None, image: str | None, only: tuple[str, ...], check: bool, dry_run: bool,
          request: Request) -> None:
    if folder and not image:
        return _patch_folder(Path(folder), only, "check" if check or dry_run else "apply")
    if folder or not image:
        raise UsageError("give exactly one of --folder DIR or --image TAG.")
    image_ref(image, "--image")
    cli = engine.client()
    plan, rec = image_plan(image, request, cli)
    target = f"{image}-patched" if split_image(image)[1] else f"{image}:patched"
    plan = replace(plan, patch=replace(plan.patch, image=target))
    if dry_run:
        print(buildx.describe(plan.patch, plan.options))
        return None
    pipeline.run(plan, cli, ("preflight", "patch"), rec, patch_only=only, failed_report=False)
    console.print(f"[green]✓[/green] patched image {target}")
    return None


def _patch_folder(root: Path, only: tuple[str, ...], mode: str) -> None:
    """`python -m patches` on a folder. Its usage errors are ruled out here first, so its exit 2 means drift (a
    wrong result: exit 1 here) and its exit 3 a write the host could not do (exit 3 here)."""
    from patches import cli as patches_cli

    if not root.is_dir():
        raise UsageError(f"--folder {root} is not a folder. To fix, pass a source checkout or a site-packages folder.")
    try:
        patches_cli.select(list(only), root)  # the patches CLI's own input rules, in-process
    except patches_cli.UsageError as exc:
        raise UsageError(f"patch --folder {root} --only {' '.join(only) or '-'} refused because {exc}. To fix, pass a "
                         "folder holding aiter/ or atom/ and patch names from `python -m patches list`.") from None
    argv = patches_argv(mode, root.resolve(), *[x for n in only for x in ("--only", n)])
    code = run(argv, check=False, cwd=REPO_ROOT).returncode
    if code == 2:
        raise StepFailed(f"patches {mode} failed because a patch drifted under {root} (see above); nothing was "
                         "written. To fix, update the patch or the pin.")
    if code == 3:
        raise EnvironmentProblem(f"patches {mode} failed because it could not write under {root} (see above); "
                                 "nothing was changed. To fix, make the folder writable and give it disk space.")
    if code == 1:
        raise StepFailed(f"patches check: something under {root} would change (see above).")
    if code == 130:
        raise KeyboardInterrupt
    if code:
        raise StepFailed(f"patches {mode} exited {code}.")


def promote(ref: str, request: Request) -> BuildRecord:
    """On a GPU node: pull by digest, validate and smoke-test that image here, then tag and push the release (by
    digest: what was validated is what is tagged) and the report. A node of another arch refuses (exit 2)."""
    image_ref(ref, "promote REF")  # a malformed reference: exit 2 before any pull (the request is checked already)
    cli = engine.client()
    image_id = engine.pull(cli, ref)
    if image_id is None:
        raise UsageError(f"{ref} is not in its registry. To fix, push it (build-clean with a registry) or pass the reference it printed.")
    digest = parse_image(ref).digest or _digest_of(cli, ref)
    image_arch, _ = metadata.image_labels(engine.inspect(cli, image_id).get("Config", {}).get("Labels"))
    node = request.arch[0] if request.arch else resolve(None, host_runner).arch
    if image_arch and node.value != image_arch:
        raise UsageError(f"this node is {node.value} and {ref} is built for {image_arch}. To fix, promote it on a {image_arch} node.")
    plan, rec = image_plan(ref, replace(request, arch=(node,)), cli)
    rec = replace(rec, candidate_id=image_id, candidate_digest=digest)
    rec = pipeline.run(plan, cli, ("preflight", "validate", "smoke", "tag", "report", "push"), rec)
    console.print(steps_table(f"promote {ref}", rec.steps))
    return rec


def verify(ref: str, request: Request, *, as_json: bool) -> None:
    """Rebuild ref from its own labels on this engine; exit 1 (StepFailed) naming the first differing layer and file."""
    from cleanbuild.images import verify as verifying

    cli = engine.client()
    if engine.image_id(cli, ref) is None:
        raise UsageError(f"image {ref} not found on this engine. To fix, pull it first (docker pull {ref}).")
    result = verifying.verify(cli, ref, request)
    if as_json:
        print(json.dumps(result, indent=2))
    elif result["identical"]:
        console.print(f"[green]✓[/green] {verifying.summary(result)}")
    verifying.check(result)


def _digest_of(cli: DockerClient, ref: str) -> str:
    repo = split_image(ref)[0]
    for entry in engine.repo_digests(cli, ref):
        if parse_image(entry).repository == repo:
            return parse_image(entry).digest
    raise StepFailed(f"{ref} has no registry digest after the pull. To fix, promote it by digest (REPO@sha256:...).")


def print_report(ref: str, *, html: bool = False, open_page: bool = False) -> None:
    """The Markdown report; with html, the path of its report.html instead; open_page opens that in a browser."""
    file = report.find(ref)
    if file is None:
        raise UsageError(f"no report for {ref}. To fix, pass the release tag build-clean printed (see reports/).")
    if not (html or open_page):
        print(report.markdown(json.loads(file.read_text())), end="")
        return
    page = report.html_page(file).resolve()
    print(page)
    if open_page:
        import webbrowser

        if not webbrowser.open(page.as_uri()):
            raise EnvironmentProblem(f"no web browser could open {page}. To fix, open that file in a browser by hand.")


# ---- pins and locks -----------------------------------------------------------------------------------------

def pins(request: Request, *, as_json: bool, bump: str | None, to: str | None, dry_run: bool) -> int:
    from cleanbuild.upstream import pins as pinning

    if bump is None and (to is not None or dry_run):
        flag = "--to" if to is not None else "--dry-run"
        raise UsageError(f"{flag} only means something with --bump. To fix, add --bump COMPONENT (or drop {flag}).")
    profile = request.profile
    mirror.require_reachable(profile)
    if bump is not None:  # `--bump ''` is a bump of nothing: refused there, never a plain check
        result = pinning.bump(profile, bump, to, dry_run=dry_run, relock=request.overrides)
        if as_json:
            print(json.dumps(result.__dict__, indent=2))
        else:
            print_rows(f"pins --bump {bump}", {"from": result.old, "to": f"{result.new} ({result.describe}, {result.date[:10]})",
                                                "patches": ", ".join(f"{k}={v}" for k, v in result.outcomes.items()) or "-",
                                                "written": "yes (profile and locks)" if result.written else "no"})
            if result.diff and (dry_run or result.written):
                print(result.diff, end="")
        for line in result.drift:
            console.print(f"[red]drift: {line}[/red]")
        if result.drift:
            console.print("[red]nothing was written: a patch no longer applies to the candidate[/red]")
        return 1 if result.drift else 0
    report_ = pinning.check(profile)
    if as_json:
        print(json.dumps(report_.to_json(), indent=2))
    else:
        from rich.table import Table

        table = Table(title=f"pins of profile {profile.name} ({profile.file.name})")
        for col in ("component", "pin", "status", "detail"):
            table.add_column(col, overflow="fold")
        for row in report_.rows:
            table.add_row(row.component, row.pin[:40], row.status, row.detail)
        console.print(table)
        for row in report_.problems:
            console.print(f"[red]pin wrong: {row.component} {row.pin}: {row.detail}[/red]")
    return report_.exit_code


def lock(request: Request, *, upgrade: tuple[str, ...], check: bool) -> int:
    from cleanbuild.upstream import lock as locking

    if check and upgrade:
        raise UsageError("--check writes nothing, so --upgrade-package has no effect with it. To fix, drop one.")
    profile = request.profile
    mirror.require_reachable(profile)
    if check:
        problems = locking.check(profile)
        for line in problems:
            console.print(f"[red]lock stale: {line}[/red]")
        if not problems:
            console.print(f"[green]✓[/green] {locking.lock_paths(profile)[0].name} matches the pins of {profile.name}")
        return 1 if problems else 0
    runtime, build = locking.write(profile, upgrade=upgrade)
    console.print(f"[green]✓[/green] wrote {runtime} ({len(locking.packages(runtime))} packages) and {build.name}; "
                  f"digest {locking.digest(profile)}")
    return 0
