"""What each invoke task does, composed from the planner and the executor. Tasks call these; nothing here parses argv."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import buildx, engine, pipeline, report
from .arch import Arch, host_runner, resolve
from .console import console, key_values
from .errors import BuildFailed, StepFailed, UsageError
from .plan import (
    REPO_ROOT,
    Plan,
    check_build_args,
    commands,
    make_plan,
    patch_build,
    smoke_run,
)
from .profiles import Profile
from .run import quote, run
from .settings import Inputs, cache_dir, load_profile, options, user_name
from .tag import TagParts, make_tag, today
from .versions import ImageVersions

__all__ = ["Inputs"]


def arch_info(arch: str | None) -> dict:
    det = resolve(arch, host_runner)
    facts = det.arch.facts
    return {
        "arch": det.arch.value,
        "source": det.source,
        "products": facts.products,
        "fp8_dtype": facts.fp8_dtype,
        "fp8_max": facts.fp8_max,
        "lds_per_cu_kib": facts.lds_kib,
        "cu_count": det.cu_count or " / ".join(f"{k} {v}" for k, v in facts.typical_cus.items()) + " (typical)",
        "gpu_count": len(det.gpus) if det.gpus else "not probed (--arch given)",
        "notes": "; ".join(det.notes) or "-",
    }


def print_rows(title: str, rows: Mapping[str, object]) -> None:
    console.print(key_values(title, list(rows.items())))


def _archs(inputs: Inputs) -> tuple[Arch, ...]:
    if inputs.arch:
        return Arch.parse_list(inputs.arch)
    return (resolve(None, host_runner).arch,)


def plans(inputs: Inputs, config: Mapping[str, object], *, prepare: bool) -> list[Plan]:
    """One plan per arch. prepare=True builds the offline stand-in inputs (needs Docker); False names them only."""
    profile = load_profile(inputs, config)
    base, context = _offline_inputs(profile, config, prepare=prepare) if profile.offline else (None, None)
    if inputs.context:
        context = Path(inputs.context).resolve()
    return [make_plan(profile, options(inputs, config, arch=a, base_image=base, context=context)) for a in _archs(inputs)]


def _offline_inputs(profile: Profile, config: Mapping[str, object], *, prepare: bool) -> tuple[str, Path]:
    from . import offline

    cache = cache_dir(config) / "offline"
    if not prepare:
        return offline.standin_image_name(), offline.sources_dir(cache)
    return offline.ensure_standin_base(cache), offline.prepare_sources(cache)


def show_plan(inputs: Inputs, config: Mapping[str, object], *, as_json: bool) -> None:
    for plan in plans(inputs, config, prepare=False):
        if as_json:
            print(json.dumps(plan_dict(plan), indent=2))
            continue
        print_rows(f"plan: {plan.options.arch.value} {plan.options.ck_label} ({plan.profile.name} profile)", {
            "base image": plan.base_image, "python": plan.python, "wheels image": plan.wheels.image,
            "clean image": plan.clean.image, "candidate": plan.patch.image, "release": f"{plan.release_repo}:<tag>",
            "smoke": plan.smoke_skip_reason or "yes", "steps": " -> ".join(plan.steps),
        })
        for argv in commands(plan):
            print(quote(argv))


def plan_dict(plan: Plan) -> dict:
    return {
        "profile": plan.profile.name, "arch": plan.options.arch.value, "ck_free": plan.options.ck_free,
        "python": plan.python, "base_image": plan.base_image, "wheels_key": plan.wheels_key,
        "images": {"wheels": plan.wheels.image, "clean": plan.clean.image, "candidate": plan.patch.image},
        "build_args": {s.step: dict(s.build_args) for s in plan.builds},
        "steps": list(plan.steps), "smoke_skip_reason": plan.smoke_skip_reason,
        "commands": [quote(a) for a in commands(plan)],
    }


def _need_gib(plan: Plan) -> float:
    return float(plan.profile.data.get("disk_gib", 20))


def wheels(inputs: Inputs, config, *, export: Path | None, rebuild: bool, dry_run: bool) -> None:
    for plan in plans(inputs, config, prepare=not dry_run):
        if dry_run:
            print(quote(plan.wheels.argv(builder=plan.options.builder, progress=plan.options.progress, ca_bundle=plan.options.ca_bundle)))
            continue
        cli = engine.client()
        engine.preflight(cli, _need_gib(plan))
        existing = None if rebuild else engine.image_id(cli, plan.wheels.image)
        if existing:
            console.print(f"reusing {plan.wheels.image}: an image with this content key exists ({existing[:19]})")
        else:
            buildx.build(plan.wheels, plan.options)
            console.print(f"[green]✓[/green] built {plan.wheels.image}")
        if export:
            _export(plan, export)


def _export(plan: Plan, dest: Path) -> None:
    """The wheels and manifest into a folder, straight from BuildKit's cache (a local exporter)."""
    dest.mkdir(parents=True, exist_ok=True)
    o = plan.options
    argv = plan.wheels.argv(builder=o.builder, progress=o.progress, ca_bundle=o.ca_bundle)
    argv = [a for a in argv if a != "--load"]
    at = argv.index("-t")
    argv = [*argv[:at], "--output", f"type=local,dest={dest}", argv[-1]]
    run(argv)
    console.print(f"[green]✓[/green] wheels and manifest.json exported to {dest}")


def clean(inputs: Inputs, config, *, wheels_image: str | None, dry_run: bool) -> None:
    for plan in plans(inputs, config, prepare=not dry_run):
        spec = plan.clean
        args = tuple((k, wheels_image if k == "WHEELS_IMAGE" and wheels_image else v) for k, v in spec.build_args)
        o = plan.options
        if dry_run:
            print(quote(spec.argv(builder=o.builder, progress=o.progress, ca_bundle=o.ca_bundle)))
            continue
        cli = engine.client()
        wimage = dict(args)["WHEELS_IMAGE"]
        if engine.image_id(cli, wimage) is None:
            raise UsageError(f"wheels image {wimage} does not exist. To fix, run `invoke wheels --arch {o.arch.value}` first.")
        state = pipeline.State(plan, cli)
        state.ids["wheels"] = wimage
        raw = engine.read_file(cli, wimage, "/wheels/manifest.json") or b"{}"
        state.facts["manifest"] = json.loads(raw)
        state.facts["manifest_digest"] = pipeline.digest(raw)
        image_id = buildx.build(spec, o, extra_labels=pipeline.labels(state), build_args=args)
        console.print(f"[green]✓[/green] built {spec.image} ({image_id[:19]})")


def patch(*, src: str | None, image: str | None, only: tuple[str, ...], check: bool, dry_run: bool) -> int:
    if bool(src) == bool(image):
        raise UsageError("give exactly one of --src DIR or --image TAG.")
    mode = "check" if check or dry_run else "apply"
    if src:
        argv = [sys.executable, "-m", "patches", mode, "--root", str(Path(src).resolve())]
        argv += [x for name in only for x in ("--only", name)]
        return run(argv, check=False, cwd=REPO_ROOT).returncode
    target = f"{image}-patched" if ":" in image.rsplit("/", 1)[-1] else f"{image}:patched"
    spec = patch_build(REPO_ROOT, image, target, only)
    check_build_args(spec)
    argv = spec.argv(builder=None, progress="auto", ca_bundle=None)
    if dry_run:
        print(quote(argv))
        return 0
    code = run(argv, check=False).returncode
    if code == 0:
        console.print(f"[green]✓[/green] patched image {target}")
    return code


def smoke(image: str, model: str, inputs: Inputs, config) -> None:
    profile = load_profile(inputs, config)
    o = options(Inputs(model=model), config, arch=Arch.GFX942)  # validates --model; the arch plays no part here
    spec = smoke_run(profile, o.model, o.run_id, o.run_dir)
    cli = engine.client()
    result = engine.run_container(cli, image, spec)
    parsed = pipeline.smoke_result(result.logs)
    if result.exit_code != 0 or parsed is None:
        raise StepFailed(f"the smoke test failed (exit {result.exit_code}): {pipeline.tail(result.logs)}")
    console.print(f"[green]✓[/green] {parsed.get('new_tokens')} new tokens ({parsed.get('counted_by')}): {parsed.get('completion')!r}")


def tag(image: str, *, user_flag: str | None, config, dry_run: bool) -> None:
    cli = engine.client()
    data = engine.read_json(cli, image, f"{pipeline.IN_IMAGE}/versions.json")
    if data is None:
        raise UsageError(f"{image} has no {pipeline.IN_IMAGE}/versions.json. To fix, tag an image built by build-clean.")
    versions = ImageVersions.from_json(data)
    labels = engine.inspect(cli, image).get("Config", {}).get("Labels") or {}
    arch, ck = labels.get("io.atom-build.arch", versions.arch or "unknown"), labels.get("io.atom-build.ck-mode", "ck")
    repo = f"{config.get('registry', 'atom-build')}/atom-{arch}" + ("-ckfree" if ck == "ckfree" else "")
    result = make_tag(TagParts(user_name(user_flag, config), today(), versions.rocm, versions.aiter, versions.atom))
    print_rows("tag", {"tag": f"{repo}:{result.value}", "rocm": versions.rocm, "aiter": versions.aiter,
                       "atom": versions.atom, "length": len(result.value),
                       "changes": "; ".join(result.steps) or "none needed"})
    if not dry_run:
        engine.tag(cli, image, repo, result.value)
        console.print(f"[green]✓[/green] tagged {repo}:{result.value}")


def build_clean(inputs: Inputs, config, *, dry_run: bool) -> None:
    if dry_run:
        show_plan(inputs, config, as_json=False)
        return
    cli = engine.client()
    todo = plans(inputs, config, prepare=True)
    if len(todo) > 1:
        wheels_matrix(cli, todo)
    for plan in todo:
        state = pipeline.build_clean(plan, cli, need_gib=_need_gib(plan))
        console.print(state.log.table(f"build-clean {plan.options.arch.value} {plan.options.ck_label}"))
        done = state.release_ref or f"{plan.patch.image} (untagged: {state.log.records[-2].detail})"
        console.print(f"[bold green]done[/bold green]: {done}; report {state.facts.get('report_dir')}")


def wheels_matrix(cli, todo: list[Plan]) -> None:
    """Build the missing wheels images of several archs at once, on one BuildKit (its scheduler shares the
    common stages). Concurrent `buildx build` runs rather than `buildx bake`: bake before buildx 0.14 cannot set a
    target's network mode, which engines without a default bridge need."""
    missing = [p for p in todo if engine.image_id(cli, p.wheels.image) is None]
    if len(missing) < 2:
        return
    console.print(f"building {len(missing)} wheels images at once: {', '.join(p.wheels.image for p in missing)}")
    with ThreadPoolExecutor(max_workers=len(missing)) as pool:
        futures = {p.options.arch.value: pool.submit(buildx.build, p.wheels, p.options, show=False) for p in missing}
    failed = []
    for arch, future in futures.items():
        try:
            future.result()
        except BuildFailed as exc:
            failed.append(f"{arch}: {exc}")
    if failed:
        raise BuildFailed("the wheels matrix failed: " + "; ".join(failed))


def print_report(tag: str) -> None:
    data = report.load(tag)
    if data is None:
        raise StepFailed(f"no report for {tag}. To fix, pass the release tag build-clean printed (see reports/).")
    print(report.markdown(data), end="")
