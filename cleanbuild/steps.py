"""One function per build step. Each takes the run's context and the build record and returns
(new record, status, detail). build-clean composes them (cleanbuild.pipeline); every single-step task and
`nox -s validate` call these same functions. Nothing here re-derives what the plan already knows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from . import buildx, engine, gpu, metadata
from . import prepare as preparer
from . import report as reports
from .errors import StepFailed, UsageError
from .plan import BuildSpec, Plan, patch_build
from .record import BuildRecord, StepRecord, Wheels, clean_labels, digest
from .tag import TagParts, make_tag

Outcome = tuple[BuildRecord, str, str]


@dataclass
class Journal:
    """What a run created outside its record, written down BEFORE it is created, so cleanup finds it even when a
    Ctrl-C lands between creating it and the step returning."""

    release: tuple[str, str] | None = None  # (repository, tag) about to be / applied to the candidate


@dataclass(frozen=True)
class Ctx:
    plan: Plan
    cli: object
    journal: Journal
    rebuild: bool = False
    patch_only: tuple[str, ...] = ()
    builds: bool = True  # the run builds images: preflight asks for the profile's disk, else for 2 GiB


def preflight(ctx: Ctx, rec: BuildRecord) -> Outcome:
    o = ctx.plan.options
    facts = engine.preflight(ctx.cli, ctx.plan.profile.disk_gib if ctx.builds else 2.0, o.builder)
    return replace(rec, engine=facts), "passed", f"engine {facts.version}, {facts.free_gib} GiB free, {o.arch.value} {o.ck_mode}"


def prepare(ctx: Ctx, rec: BuildRecord) -> Outcome:
    made = preparer.prepare(ctx.plan, lambda ref: engine.image_id(ctx.cli, ref) is not None)
    status = "reused" if made["context_reused"] else "passed"
    return replace(rec, prepared=made), status, f"context {Path(made['context']).name}" + (
        f", base {made['standin']}" if made.get("standin") else "")


def _reuse_or_build(ctx: Ctx, spec, labels: tuple[tuple[str, str], ...] = ()) -> tuple[str, str]:
    """(image ID, how): an image with this content key, here or in the registry, is reused; else it is built, and
    pushed (with its stem's `-latest` tag, the next build's cache) when the registry is remote."""
    o = ctx.plan.options
    if not ctx.rebuild:
        found = engine.image_id(ctx.cli, spec.image)
        if found:
            return found, "content key matches"
        found = engine.pull(ctx.cli, spec.image) if o.remote else None
        if found:
            return found, "pulled from the registry by content key"
    image_id = buildx.build(spec, o, labels=labels)
    if o.remote:
        repo, _, tag = spec.image.rpartition(":")
        latest = f"{tag.rsplit('-', 1)[0]}-latest"
        engine.tag(ctx.cli, image_id, repo, latest)
        engine.push(ctx.cli, spec.image)
        engine.push(ctx.cli, f"{repo}:{latest}")
        return image_id, "built and pushed"
    return image_id, "built"


def wheels(ctx: Ctx, rec: BuildRecord) -> Outcome:
    spec = ctx.plan.wheels
    image_id, how = _reuse_or_build(ctx, spec)
    raw = engine.read_file(ctx.cli, image_id, "/wheels/manifest.json", rec.run_id)
    if raw is None:
        raise StepFailed(f"{spec.image} has no /wheels/manifest.json. To fix, rebuild it: invoke wheels --rebuild.")
    result = Wheels(spec.image, image_id, not how.startswith("built"), json.loads(raw), digest(raw))
    detail = f"{spec.image} ({how}), {len(result.manifest['wheels'])} wheels"
    return replace(rec, wheels=result), "reused" if result.reused else "passed", detail


def clean(ctx: Ctx, rec: BuildRecord) -> Outcome:
    spec = ctx.plan.clean
    image_id, how = _reuse_or_build(ctx, spec, clean_labels(ctx.plan, rec))
    status = "passed" if how.startswith("built") else "reused"
    return replace(rec, clean_id=image_id, candidate_id=image_id), status, f"{spec.image} ({how})"


def patch(ctx: Ctx, rec: BuildRecord) -> Outcome:
    """The patch layer on the clean image (by name: BuildKit 0.8 looks a bare ID in FROM up on Docker Hub). The
    candidate is content-keyed like the wheels and clean images; `invoke patch --image X` builds X-patched."""
    base = rec.candidate_ref or ctx.plan.clean.image
    spec = patch_build(base, ctx.plan.patch.image, ctx.patch_only)
    if spec == ctx.plan.patch:
        image_id, how = _reuse_or_build(ctx, spec)
    else:
        image_id, how = buildx.build(spec, ctx.plan.options), "built"
    data = engine.read_json(ctx.cli, image_id, metadata.PATCHES_PATH, rec.run_id) or {}
    outcomes = ", ".join(f"{p['name']}={p['outcome']}" for p in data.get("patches", [])) or "no patch report"
    summary = f"{spec.image} ({how}): {outcomes}"
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
        raise _failed(rec, f"validation wrote no report (exit {result.exit_code}): {_tail(result.logs)}")
    counts = {s: sum(c["status"] == s for c in data["checks"]) for s in ("passed", "warning", "failed", "skipped")}
    if result.exit_code != 0 or counts["failed"]:
        failed = ", ".join(c["name"] + (f" ({c['reason']})" if c.get("reason") else "")
                           for c in data["checks"] if c["status"] == "failed")
        raise _failed(rec, f"validation failed inside the image: {failed or _tail(result.logs)}. Report: {out}")
    return rec, "passed", (f"{counts['passed']} passed, {counts['warning']} warning, {counts['failed']} failed, "
                           f"{counts['skipped']} skipped")


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
        raise _failed(rec, f"the smoke test failed (exit {result.exit_code}): {_tail(result.logs)}")
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


def push(ctx: Ctx, rec: BuildRecord) -> Outcome:
    """promote's last act: the release tag and the report to the registry. By digest: the registry must store the
    very manifest that was pulled and validated, or the step fails (and cleanup removes the local release tag)."""
    if not ctx.plan.options.remote:
        raise UsageError(f"registry {ctx.plan.options.registry!r} has no host to push to. To fix, pass --registry HOST[:PORT]/PREFIX.")
    if rec.release_ref is None:
        raise StepFailed("there is no release tag to push: the smoke test did not pass.")
    pushed = engine.push(ctx.cli, rec.release_ref)
    if rec.candidate_digest and pushed != rec.candidate_digest:
        raise StepFailed(f"the registry stored {pushed} for {rec.release_ref}, not the validated {rec.candidate_digest}.")
    report_ref = push_report(ctx, rec)
    return rec, "passed", f"{rec.release_ref}@{pushed}; report {report_ref}"


def push_report(ctx: Ctx, rec: BuildRecord) -> str:
    """The build report as a two-file image (FROM scratch) tagged <release tag>.report beside the release."""
    folder = reports.folder_for(ctx.plan, rec, failed=False)
    (folder / "Dockerfile").write_text("FROM scratch\nCOPY report.json report.md /\n")
    try:
        spec = BuildSpec("report", folder / "Dockerfile", folder, None, (), f"{rec.release_ref}.report")
        buildx.build(spec, ctx.plan.options)
    finally:
        (folder / "Dockerfile").unlink()
    engine.push(ctx.cli, spec.image)
    return spec.image


def report(ctx: Ctx, rec: BuildRecord) -> Outcome:
    """The report lists every step, itself included (written as it runs; its seconds are the writing's)."""
    itself = StepRecord("report", "passed", 0.0, "this report")
    folder = reports.write(ctx.plan, replace(rec, steps=(*rec.steps, itself)), ctx.cli, failed=False)
    return rec, "passed", str(folder)


def _failed(rec: BuildRecord, message: str) -> StepFailed:
    """A StepFailed that carries what the step learned, so the failed report shows it (the validation checks)."""
    exc = StepFailed(message)
    exc.partial = rec  # type: ignore[attr-defined]
    return exc


def _tail(text: str, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[:400] or "no output"


STEPS = {"preflight": preflight, "prepare": prepare, "wheels": wheels, "clean": clean, "patch": patch,
         "validate": validate, "smoke": smoke, "tag": tag, "report": report, "push": push}
