"""One function per build step. Each takes the run's context and the build record and returns
(new record, status, detail). build-clean composes them (cleanbuild.pipeline); every single-step task and
`nox -s validate` call these same functions. Nothing here re-derives what the plan already knows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import buildx, engine, gpu, metadata
from . import prepare as preparer
from . import report as reports
from .errors import StepFailed, UsageError
from .plan import Plan, patch_build
from .record import BuildRecord, Wheels, clean_labels, digest
from .tag import TagParts, make_tag

Outcome = tuple[BuildRecord, str, str]


@dataclass
class Journal:
    """What a run created outside its record, written down BEFORE it is created, so cleanup finds it even when a
    Ctrl-C lands between creating it and the step returning."""

    temporary_refs: list[str] = field(default_factory=list)  # names removed at the end, pass or fail
    release: tuple[str, str] | None = None  # (repository, tag) about to be / applied to the candidate


@dataclass(frozen=True)
class Ctx:
    plan: Plan
    cli: object
    journal: Journal
    rebuild: bool = False
    patch_only: tuple[str, ...] = ()
    temporary_candidate: bool = True  # build-clean's candidate name goes at the end; `invoke patch`'s stays


def preflight(ctx: Ctx, rec: BuildRecord) -> Outcome:
    o = ctx.plan.options
    facts = engine.preflight(ctx.cli, ctx.plan.profile.disk_gib, o.builder)
    return replace(rec, engine=facts), "passed", f"engine {facts.version}, {facts.free_gib} GiB free, {o.arch.value} {o.ck_mode}"


def prepare(ctx: Ctx, rec: BuildRecord) -> Outcome:
    made = preparer.prepare(ctx.plan, lambda ref: engine.image_id(ctx.cli, ref) is not None)
    status = "reused" if made["context_reused"] else "passed"
    return replace(rec, prepared=made), status, f"context {Path(made['context']).name}" + (
        f", base {made['standin']}" if made.get("standin") else "")


def wheels(ctx: Ctx, rec: BuildRecord) -> Outcome:
    spec = ctx.plan.wheels
    existing = None if ctx.rebuild else engine.image_id(ctx.cli, spec.image)
    image_id = existing or buildx.build(spec, ctx.plan.options)
    raw = engine.read_file(ctx.cli, image_id, "/wheels/manifest.json", rec.run_id)
    if raw is None:
        raise StepFailed(f"{spec.image} has no /wheels/manifest.json. To fix, rebuild it: invoke wheels --rebuild.")
    result = Wheels(spec.image, image_id, bool(existing), json.loads(raw), digest(raw))
    detail = f"{spec.image} ({'content key matches' if existing else 'built'}), {len(result.manifest['wheels'])} wheels"
    return replace(rec, wheels=result), "reused" if existing else "passed", detail


def clean(ctx: Ctx, rec: BuildRecord) -> Outcome:
    spec = ctx.plan.clean
    image_id = buildx.build(spec, ctx.plan.options, labels=clean_labels(ctx.plan, rec))
    return replace(rec, clean_id=image_id, candidate_id=image_id), "passed", spec.image


def patch(ctx: Ctx, rec: BuildRecord) -> Outcome:
    """The patch layer on the clean image (by name: BuildKit 0.8 looks a bare ID in FROM up on Docker Hub)."""
    base = rec.candidate_ref or ctx.plan.clean.image
    spec = patch_build(base, ctx.plan.patch.image, ctx.patch_only)
    if ctx.temporary_candidate:
        ctx.journal.temporary_refs.append(spec.image)
    image_id = buildx.build(spec, ctx.plan.options)
    data = engine.read_json(ctx.cli, image_id, metadata.PATCHES_PATH, rec.run_id) or {}
    summary = ", ".join(f"{p['name']}={p['outcome']}" for p in data.get("patches", [])) or "no patch report"
    return replace(rec, candidate_id=image_id, candidate_ref=spec.image, patches=data), "passed", summary


def _gpu_kwargs(ctx: Ctx, rec: BuildRecord, step: str, image_rocm: str | None) -> tuple[dict, tuple[dict, ...]]:
    """Device access by number for this step (chosen render nodes, their GIDs), checked before the container."""
    o = ctx.plan.options
    access = gpu.device_access(o.gpus, user=o.container_user, arch=o.arch.value)
    gpu.check_permissions(access)
    gpu.check_driver(gpu.driver_info(), image_rocm)
    return {**gpu.run_flags(access), **gpu.compute_options(step)}, tuple(gpu.describe(access))


def _image_rocm(ctx: Ctx, rec: BuildRecord) -> str | None:
    raw = engine.read_json(ctx.cli, rec.candidate_id, metadata.VERSIONS_PATH, rec.run_id)
    return raw.get("rocm") if isinstance(raw, dict) else None


def validate(ctx: Ctx, rec: BuildRecord) -> Outcome:
    spec = ctx.plan.validate
    kwargs, gpus = _gpu_kwargs(ctx, rec, "validate", _image_rocm(ctx, rec)) if spec.gpu else ({}, None)
    out = ctx.plan.options.run_dir / "validation.json"
    out.unlink(missing_ok=True)
    result = engine.run_container(ctx.cli, rec.candidate_id, spec, kwargs)
    data = json.loads(out.read_text()) if out.is_file() else None
    rec = replace(rec, validation=data, gpu=gpus or rec.gpu)
    if data is None:
        raise StepFailed(f"validation wrote no report (exit {result.exit_code}): {_tail(result.logs)}")
    counts = {s: sum(c["status"] == s for c in data["checks"]) for s in ("passed", "failed", "skipped")}
    if result.exit_code != 0 or counts["failed"]:
        failed = ", ".join(c["name"] + (f" ({c['reason']})" if c.get("reason") else "")
                           for c in data["checks"] if c["status"] == "failed")
        raise StepFailed(f"validation failed inside the image: {failed or _tail(result.logs)}. Report: {out}")
    return rec, "passed", f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"


def smoke(ctx: Ctx, rec: BuildRecord) -> Outcome:
    plan = ctx.plan
    if plan.smoke is None:
        return replace(rec, smoke={"status": "skipped", "reason": plan.smoke_skip_reason}), "skipped", plan.smoke_skip_reason or ""
    kwargs, gpus = _gpu_kwargs(ctx, rec, "smoke", _image_rocm(ctx, rec)) if plan.smoke.gpu else ({}, None)
    result = engine.run_container(ctx.cli, rec.candidate_id, plan.smoke, kwargs)
    parsed = smoke_result(result.logs)
    data = {"status": "passed" if result.exit_code == 0 and parsed else "failed", "exit_code": result.exit_code,
            "command": list(plan.smoke.command), "model": str(plan.options.model), "result": parsed,
            "output": result.logs[-8000:]}
    rec = replace(rec, smoke=data, gpu=gpus or rec.gpu)
    if data["status"] != "passed":
        raise StepFailed(f"the smoke test failed (exit {result.exit_code}): {_tail(result.logs)}")
    return rec, "passed", f"{parsed['new_tokens']} new tokens ({parsed['counted_by']})"


def smoke_result(logs: str) -> dict | None:
    for line in reversed(logs.splitlines()):
        if line.startswith("SMOKE_RESULT "):
            try:
                return json.loads(line.removeprefix("SMOKE_RESULT "))
            except ValueError:
                return None
    return None


def release_tag(ctx: Ctx, rec: BuildRecord) -> tuple[BuildRecord, str]:
    """(record with the image's facts and tag, release repository): from the versions the image itself reports."""
    o = ctx.plan.options
    where = rec.candidate_ref or str(rec.candidate_id)
    raw = engine.read_json(ctx.cli, rec.candidate_id, metadata.VERSIONS_PATH, rec.run_id)
    if raw is None:
        raise UsageError(f"{where} has no {metadata.VERSIONS_PATH}. To fix, tag an image built by build-clean.")
    facts = metadata.read_versions(raw, where)
    result = make_tag(TagParts(o.user, o.date, facts.rocm_release, facts.aiter, facts.atom))
    return replace(rec, facts=facts, tag=result), metadata.release_repo(o.registry, facts.arch, facts.ck_mode)


def tag(ctx: Ctx, rec: BuildRecord) -> Outcome:
    """The release tag, only for an image that passed smoke (or with --allow-no-smoke). Written in the journal
    before it exists, so an interrupted run removes it."""
    rec, repo = release_tag(ctx, rec)
    if (rec.smoke or {}).get("status") != "passed" and not ctx.plan.options.allow_no_smoke:
        return rec, "skipped", f"no smoke test passed, so no release tag (--allow-no-smoke tags anyway); candidate {rec.candidate_ref}"
    ctx.journal.release = (repo, rec.tag.value)
    ref = engine.tag(ctx.cli, rec.candidate_id, repo, rec.tag.value)
    return replace(rec, release_ref=ref), "passed", ref


def report(ctx: Ctx, rec: BuildRecord) -> Outcome:
    folder = reports.write(ctx.plan, rec, ctx.cli, failed=False)
    return rec, "passed", str(folder)


def _tail(text: str, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[:400] or "no output"


STEPS = {"preflight": preflight, "prepare": prepare, "wheels": wheels, "clean": clean, "patch": patch,
         "validate": validate, "smoke": smoke, "tag": tag, "report": report}
