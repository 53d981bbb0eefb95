"""One function per build step. Each takes what it acts on (the engine client and the plan, or the Site a step has
its units at: cleanbuild.images.schedule) and the build record, and returns (new record, status, detail).
build-clean composes them (cleanbuild.images.pipeline.STEPS, the one table of what each step is given); every
single-step task and `nox -s validate` call these same functions. Nothing here re-derives what the plan already knows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cleanbuild.core import engine, metadata
from cleanbuild.core.errors import StepFailed, UsageError
from cleanbuild.gpuhost import gpu
from cleanbuild.images import buildx, devcontext, release, sbom, srcplan, warmcache
from cleanbuild.images import prepare as preparer
from cleanbuild.images import report as reports
from cleanbuild.images.observe import observe
from cleanbuild.images.plan import Plan, patch_build, warm_of
from cleanbuild.images.record import (
    BuildRecord,
    StepFailedWith,
    StepRecord,
    StepStatus,
    Wheels,
    clean_labels,
    digest,
)
from cleanbuild.images.schedule import Site, ensure, ensure_step, summary
from cleanbuild.images.tag import Tag
from cleanbuild.request.build import Build

if TYPE_CHECKING:
    from docker.client import DockerClient

Outcome = tuple[BuildRecord, StepStatus, str]


@dataclass
class Journal:
    """What a run created outside its record, written down BEFORE it is created, so cleanup finds it even when a
    Ctrl-C lands between creating it and the step returning; and the record a failed step left, for cleanup."""

    release: tuple[str, str] | None = None  # (repository, tag) about to be / applied to the candidate
    failed: BuildRecord | None = None  # what the run knew when a step failed, that step's failure included


def preflight(client: DockerClient, plan: Plan, rec: BuildRecord, *, builds: bool) -> Outcome:
    """The engine checked; builds: the run builds images, so ask for the profile's disk (else for 2 GiB)."""
    o = plan.options
    facts = engine.preflight(client, plan.profile.disk_gib if builds else 2.0, o.request.builder)
    return replace(rec, engine=facts), StepStatus.PASSED, f"engine {facts.version}, {facts.free_gib} GiB free, {o.arch.value} {o.ck_mode}"


def prepare(client: DockerClient, plan: Plan, rec: BuildRecord) -> Outcome:
    made = preparer.prepare(plan, lambda ref: engine.image_id(client, ref) is not None, rec.engine)
    src = devcontext.prepare(plan)
    if src:
        made["src_contexts"] = src
    status = StepStatus.REUSED if made["context_reused"] else StepStatus.PASSED
    return replace(rec, prepared=made), status, f"context {Path(made['context']).name}" + (
        f", base {made['standin']}" if made.get("standin") else "") + (f", --src {', '.join(src)}" if src else "")


def wheels(site: Site, rec: BuildRecord) -> Outcome:
    """Every component image and the wheels image (schedule.ensure_step): independent components build at the same
    time, on the containerd store each reading the stages of the components it needs rather than their images (the
    engine client's connection pool serves the threads)."""
    done = tuple(ensure_step(site, site.plan.step_units("wheels"), {}))
    assembly = done[-1]
    raw = engine.read_file(site.client, assembly.image_id, "/wheels/manifest.json", rec.run_id)
    if raw is None:
        raise StepFailed(f"{assembly.image} has no /wheels/manifest.json. To fix, rebuild it: invoke wheels --rebuild.")
    result = Wheels(assembly.image, assembly.image_id, assembly.status == "reused", json.loads(raw), digest(raw))
    rec = replace(rec, wheels=result, units=(*rec.units, *done))
    detail = f"{assembly.image}: {summary(done)}; {len(result.manifest['wheels'])} wheels"
    return rec, StepStatus.REUSED if all(u.status == "reused" for u in done) else StepStatus.PASSED, detail


def clean(site: Site, rec: BuildRecord) -> Outcome:
    rebuilt = srcplan.on_route(site.plan.options.src, "wheel")  # a wheel from a checkout: the clean image is dirty
    own = clean_labels(site.plan, rec) + (srcplan.labels(rebuilt) if rebuilt else ())
    done = ensure_step(site, site.plan.step_units("clean"), {"clean": own})
    image_id = done[-1].image_id
    status = StepStatus.REUSED if all(u.status == "reused" for u in done) else StepStatus.PASSED
    rec = replace(rec, clean_id=image_id, candidate_id=image_id, units=(*rec.units, *done))
    return rec, status, f"{done[-1].image}: {summary(done)}"


def dev(site: Site, rec: BuildRecord) -> Outcome:
    """--src, overlay route: the changed files as one layer over the clean image (Dockerfile.dev), labelled dirty."""
    src = site.plan.options.src
    done = ensure(site, site.plan.unit("dev"), srcplan.labels(src))
    manifest = srcplan.overlay_manifest(src)
    rec = replace(rec, candidate_id=done.image_id, candidate_ref=done.image, units=(*rec.units, done))
    detail = (f"{done.image} ({done.how}): {len(manifest['files'])} files copied, {len(manifest['deleted'])} deleted "
              f"over {site.plan.clean.image}")
    return rec, StepStatus.REUSED if done.status == "reused" else StepStatus.PASSED, detail


def patch(site: Site, rec: BuildRecord, only: tuple[str, ...]) -> Outcome:
    """The patch layer on the clean image (by name: BuildKit 0.8 looks a bare ID in FROM up on Docker Hub). The
    candidate is content-keyed like the wheels and clean images; `invoke patch --image X` builds X-patched; only:
    the patches --only names (all when empty)."""
    plan, client = site.plan, site.client
    base = rec.candidate_ref or plan.clean.image
    spec = patch_build(base, plan.patch.image, only, warm_of(plan.patch))
    log = plan.options.run_dir / f"{spec.step}.log"
    if spec == plan.patch:
        done = ensure(site, plan.unit("candidate"), attestations=_attestations(site, rec, base))
        rec = replace(rec, units=(*rec.units, done))
        image_id, how, log = done.image_id, done.how, plan.options.run_dir / f"{done.name}.log"
    else:  # an image the user named, or --only: not a keyed unit; it must not carry its parent's key
        adhoc = ((engine.UNIT_LABEL, "patch"), (engine.KEY_LABEL, ""), (engine.INPUTS_LABEL, ""))
        image_id, how = buildx.build(spec, plan.options, labels=adhoc, reproducible=site.reproducible), "built"
    raw = engine.read_json(client, image_id, metadata.PATCHES_PATH, rec.run_id)
    data = raw if isinstance(raw, dict) else {}
    outcomes = ", ".join(f"{p['name']}={p['outcome']}" for p in data.get("patches", [])) or "no patch report"
    warmed = engine.read_json(client, image_id, metadata.TRITON_CACHE_PATH, rec.run_id)
    warm = {"manifest": warmed if isinstance(warmed, dict) else None,
            "run": warmcache.run_facts(log) if how.startswith("built") else None}
    detail = f"{spec.image} ({how}): {outcomes}; {_warm_summary(warm['manifest'])}"
    return (replace(rec, candidate_id=image_id, candidate_ref=spec.image, patches=data, triton_cache=warm),
            StepStatus.PASSED, detail)


def _warm_summary(manifest: dict[str, Any] | None) -> str:
    if not manifest:
        return "no Triton cache"
    return (f"Triton cache {manifest.get('kernels')} kernels for {manifest.get('target')}, "
            f"{((manifest.get('cache') or {}).get('bytes') or 0) / 2**20:.1f} MiB")


def _attestations(site: Site, rec: BuildRecord, base: str) -> buildx.Attestations | None:
    """The candidate's SBOM and provenance, attached where the engine builds reproducibly (cleanbuild.images.attest):
    from the wheels manifest the image it starts FROM holds, the pins and the candidate's content key."""
    if not site.reproducible:
        return None
    plan = site.plan

    def statements(subject: str) -> list[dict[str, Any]]:
        manifest = engine.read_json(site.client, base, metadata.MANIFEST_PATH, rec.run_id)
        if not isinstance(manifest, dict):
            raise StepFailed(f"{base} has no {metadata.MANIFEST_PATH}. To fix, rebuild it: invoke clean --rebuild.")
        return sbom.statements(manifest, subject, **reports.attestation_args(plan))

    return statements


def _gpu_kwargs(options: Build, step: str, image_rocm: str | None) -> tuple[gpu.RunOptions, tuple[dict[str, Any], ...]]:
    """Device access by number for this step (chosen render nodes, their GIDs), checked before the container."""
    o = options
    access = gpu.device_access(o.request.gpu, user=o.request.user_id, arch=o.arch.value)
    gpu.check_permissions(access)
    gpu.check_driver(gpu.driver_info(), image_rocm)
    return {**gpu.run_flags(access), **gpu.compute_options(step)}, tuple(gpu.describe(access))


def _image_rocm(client: DockerClient, rec: BuildRecord) -> str | None:
    raw = engine.read_json(client, rec.candidate(), metadata.VERSIONS_PATH, rec.run_id)
    return raw.get("rocm") if isinstance(raw, dict) else None


def validate(client: DockerClient, plan: Plan, rec: BuildRecord) -> Outcome:
    spec = plan.validate
    kwargs, gpus = _gpu_kwargs(plan.options, "validate", _image_rocm(client, rec)) if spec.gpu else ({}, None)
    out = plan.options.run_dir / "validation.json"
    out.unlink(missing_ok=True)
    result = engine.run_container(client, rec.candidate(), spec, kwargs)
    data = json.loads(out.read_text()) if out.is_file() else None
    rec = replace(rec, validation=data, gpu=gpus or rec.gpu)
    if data is None:
        raise StepFailedWith(f"validation wrote no report (exit {result.exit_code}): {_tail(result.logs)}", rec)
    counts = {s: sum(c["status"] == s for c in data["checks"]) for s in ("passed", "warning", "failed", "skipped")}
    if result.exit_code != 0 or counts["failed"]:
        failed = ", ".join(c["name"] + (f" ({c['reason']})" if c.get("reason") else "")
                           for c in data["checks"] if c["status"] == "failed")
        raise StepFailedWith(f"validation failed inside the image: {failed or _tail(result.logs)}. Report: {out}", rec)
    return rec, StepStatus.PASSED, (f"{counts['passed']} passed, {counts['warning']} warning, {counts['failed']} failed, "
                           f"{counts['skipped']} skipped")


def smoke(client: DockerClient, plan: Plan, rec: BuildRecord) -> Outcome:
    if plan.smoke is None:
        return replace(rec, smoke={"status": "skipped", "reason": plan.smoke_skip_reason}), StepStatus.SKIPPED, plan.smoke_skip_reason or ""
    kwargs, gpus = _gpu_kwargs(plan.options, "smoke", _image_rocm(client, rec)) if plan.smoke.gpu else ({}, None)
    result = engine.run_container(client, rec.candidate(), plan.smoke, kwargs)
    parsed = smoke_result(result.logs)
    data = {"status": "passed" if result.exit_code == 0 and parsed else "failed", "exit_code": result.exit_code,
            "command": list(plan.smoke.command), "model": str(plan.options.request.model), "result": parsed,
            "output": result.logs[-8000:]}
    rec = replace(rec, smoke=data, gpu=gpus or rec.gpu)
    if data["status"] != "passed" or parsed is None:
        raise StepFailedWith(f"the smoke test failed (exit {result.exit_code}): {_tail(result.logs)}", rec)
    return rec, StepStatus.PASSED, f"{parsed['new_tokens']} new tokens ({parsed['counted_by']})"


def smoke_result(logs: str) -> dict[str, Any] | None:
    for line in reversed(logs.splitlines()):
        if line.startswith("SMOKE_RESULT "):
            try:
                # docker/scripts/smoke.py prints one JSON object after the prefix
                parsed: dict[str, Any] = json.loads(line.removeprefix("SMOKE_RESULT "))
            except ValueError:
                return None
            return parsed
    return None


def tag(client: DockerClient, plan: Plan, rec: BuildRecord, journal: Journal) -> Outcome:
    """The release tag, only for an image that passed smoke (or with --allow-no-smoke). Written in the journal
    before it exists, so an interrupted run removes it."""
    if not plan.dirty:
        release.refuse_dirty(client, rec.candidate(), rec.candidate_ref or str(rec.candidate_id))
    rec, repo = release.release_tag(client, plan.options, rec)
    if plan.dirty:
        return dev_tag(client, plan.options, rec, repo, journal)
    if (rec.smoke or {}).get("status") != "passed" and not plan.options.request.allow_no_smoke:
        return rec, StepStatus.SKIPPED, f"no smoke test passed, so no release tag (--allow-no-smoke tags anyway); candidate {rec.candidate_ref}"
    _, made = rec.tagged()
    journal.release = (repo, made.value)
    ref = engine.tag(client, rec.candidate(), repo, made.value)
    return replace(rec, release_ref=ref), StepStatus.PASSED, ref


def dev_tag(client: DockerClient, options: Build, rec: BuildRecord, repo: str, journal: Journal) -> Outcome:
    """--src: `<repo>:dev-<user>-<diff hash>`, never the release tag (the image is labelled dirty)."""
    o = options
    value = srcplan.dev_tag(o.request.user, o.src)
    journal.release = (repo, value)
    ref = engine.tag(client, rec.candidate(), repo, value)
    note = "dev tag: built from a local checkout (--src), labelled dirty, never a release tag"
    smoke = (rec.smoke or {}).get("status") or "skipped"
    _, made = rec.tagged()
    return replace(rec, tag=Tag(value, made.parts, (note,)), dev_ref=ref), StepStatus.PASSED, f"{ref} (dev tag; smoke {smoke})"


def push(site: Site, rec: BuildRecord) -> Outcome:
    """promote's last act: the release tag and the report (an image built, hence the Site) to the registry. By
    digest: the registry must store the very manifest that was pulled and validated, or the step fails (and cleanup
    removes the local release tag)."""
    plan, client = site.plan, site.client
    if not plan.options.remote:
        raise UsageError(f"registry {plan.options.request.registry!r} has no host to push to. To fix, pass --registry HOST[:PORT]/PREFIX.")
    if rec.release_ref is None:
        raise StepFailed("there is no release tag to push: the smoke test did not pass.")
    pushed = engine.push(client, rec.release_ref)
    if rec.candidate_digest and pushed != rec.candidate_digest:
        raise StepFailed(f"the registry stored {pushed} for {rec.release_ref}, not the validated {rec.candidate_digest}.")
    report_ref = release.push_report(client, plan, rec, reproducible=site.reproducible)
    return rec, StepStatus.PASSED, f"{rec.release_ref}@{pushed}; report {report_ref}"


def report(client: DockerClient, plan: Plan, rec: BuildRecord) -> Outcome:
    """The report lists every step, itself included (written as it runs; its seconds are the writing's)."""
    itself = StepRecord("report", StepStatus.PASSED, 0.0, "this report")
    folder = reports.write(plan, observe(client, replace(rec, steps=(*rec.steps, itself)), plan.base_image),
                           failed=False)
    return rec, StepStatus.PASSED, str(folder)


def _tail(text: str, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[:400] or "no output"
