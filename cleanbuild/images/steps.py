"""One function per build step. Each takes the run's context and the build record and returns
(new record, status, detail). build-clean composes them (cleanbuild.images.pipeline); every single-step task and
`nox -s validate` call these same functions. Nothing here re-derives what the plan already knows.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cleanbuild.core import engine, metadata
from cleanbuild.core.errors import StepFailed, UsageError
from cleanbuild.core.refs import split_image
from cleanbuild.core.spec import BuildSpec
from cleanbuild.gpuhost import gpu
from cleanbuild.images import (
    atonce,
    buildx,
    devcontext,
    graph,
    reuse,
    sbom,
    srcplan,
    warmcache,
)
from cleanbuild.images import prepare as preparer
from cleanbuild.images import report as reports
from cleanbuild.images.buildx_argv import cache_flags
from cleanbuild.images.components import Unit
from cleanbuild.images.plan import Plan, build_spec, patch_build, warm_of
from cleanbuild.images.record import (
    BuildRecord,
    ImageSummary,
    StepFailedWith,
    StepRecord,
    StepStatus,
    UnitRecord,
    Wheels,
    clean_labels,
    digest,
)
from cleanbuild.images.tag import Tag, TagParts, make_tag

if TYPE_CHECKING:
    from docker.client import DockerClient

Outcome = tuple[BuildRecord, StepStatus, str]


@dataclass
class Journal:
    """What a run created outside its record, written down BEFORE it is created, so cleanup finds it even when a
    Ctrl-C lands between creating it and the step returning; and the record a failed step left, for cleanup."""

    release: tuple[str, str] | None = None  # (repository, tag) about to be / applied to the candidate
    failed: BuildRecord | None = None  # what the run knew when a step failed, that step's failure included


@dataclass(frozen=True)
class Ctx:
    plan: Plan
    client: DockerClient
    journal: Journal
    rebuild: bool = False
    patch_only: tuple[str, ...] = ()
    builds: bool = True  # the run builds images: preflight asks for the profile's disk, else for 2 GiB


def preflight(ctx: Ctx, rec: BuildRecord) -> Outcome:
    o = ctx.plan.options
    facts = engine.preflight(ctx.client, ctx.plan.profile.disk_gib if ctx.builds else 2.0, o.request.builder)
    return replace(rec, engine=facts), StepStatus.PASSED, f"engine {facts.version}, {facts.free_gib} GiB free, {o.arch.value} {o.ck_mode}"


def prepare(ctx: Ctx, rec: BuildRecord) -> Outcome:
    made = preparer.prepare(ctx.plan, lambda ref: engine.image_id(ctx.client, ref) is not None, rec.engine)
    src = devcontext.prepare(ctx.plan)
    if src:
        made["src_contexts"] = src
    status = StepStatus.REUSED if made["context_reused"] else StepStatus.PASSED
    return replace(rec, prepared=made), status, f"context {Path(made['context']).name}" + (
        f", base {made['standin']}" if made.get("standin") else "") + (f", --src {', '.join(src)}" if src else "")


def _reproducible(rec: BuildRecord) -> bool:
    """The engine preflight found gives the same digest for the same inputs (cleanbuild.images.buildx)."""
    return rec.engine is not None and rec.engine.reproducible


def _containerd_store(rec: BuildRecord) -> bool:
    return rec.engine is not None and rec.engine.containerd_store


_KEY_LOCKS: dict[str, threading.Lock] = {}
_KEY_LOCKS_GUARD = threading.Lock()


def _key_lock(key: str) -> threading.Lock:
    """One lock per unit key in this process: variants built at once (commands.build_matrix) share units (the
    builders, torch, the closure, the venv), and the one that comes second waits, then finds the image by key.
    A plain lock, not a re-entrant one: a step that builds at once takes the locks of its units in build order and
    each is released by the thread that built its unit (_Claims)."""
    with _KEY_LOCKS_GUARD:
        return _KEY_LOCKS.setdefault(key, threading.Lock())


def _ensure(ctx: Ctx, rec: BuildRecord, unit: Unit, labels: tuple[tuple[str, str], ...] = (),
            attestations: buildx.Attestations | None = None) -> UnitRecord:
    """The unit's image, as cleanbuild.images.reuse decides: found here by its key (whatever its name; tagged with
    the plan's name), pulled from the registry, or built. The unit below was had first and holds its name. With a
    remote registry, the registry is made to hold it (a manifest check, a push when missing), so another node
    finds every image this build used. One thread at a time per key; the seconds include the wait."""
    start = time.monotonic()
    with _key_lock(unit.key):
        decision, how = _decided(ctx, unit, _layer_below(ctx, unit))
        if decision.action is reuse.Action.REUSE:
            return _reused(ctx, unit, decision, how, start)
        image_id = buildx.build(build_spec(unit), ctx.plan.options, labels=(*labels, *unit_labels(unit)),
                                reproducible=_reproducible(rec), containerd_store=_containerd_store(rec),
                                attestations=attestations)
        return _built(ctx, rec, unit, image_id, decision, start)


def _layer_below(ctx: Ctx, unit: Unit) -> reuse.Below | None:
    below = ctx.plan.below(unit)
    return reuse.Below(below.name, below.image) if below is not None else None


def _decided(ctx: Ctx, unit: Unit, below: reuse.Below | None) -> tuple[reuse.Decision, str]:
    """reuse.decide's answer for unit, a pull it calls for done (then asked again, the registry left out), and
    how a reused image was had."""
    o, client = ctx.plan.options, ctx.client
    ask = functools.partial(reuse.decide, client, unit, variant=ctx.plan.variant(unit), rebuild=ctx.rebuild, below=below)
    decision, how = ask(registry=o.remote), "found here by key"
    if decision.action is reuse.Action.PULL:
        engine.pull(client, unit.image)
        decision, how = ask(registry=False), "pulled from the registry by key"
    return decision, how


def _reused(ctx: Ctx, unit: Unit, decision: reuse.Decision, how: str, start: float) -> UnitRecord:
    o, client = ctx.plan.options, ctx.client
    if unit.image not in decision.tags:
        engine.tag(client, decision.image_id, *split_image(unit.image))
    if o.remote and how.startswith("found") and not engine.registry_has(client, unit.image):
        engine.push(client, unit.image)
        how += ", pushed (the registry lacked it)"
    return UnitRecord(unit.name, unit.key, unit.image, decision.image_id, "reused", how,
                      seconds=time.monotonic() - start, began=start)


def _built(ctx: Ctx, rec: BuildRecord, unit: Unit, image_id: str, decision: reuse.Decision, start: float,
           how: str = "built") -> UnitRecord:
    """The record of a unit just built, pushed first with a remote registry (and its -latest tag, for an inline
    cache)."""
    o, client = ctx.plan.options, ctx.client
    if o.remote:
        engine.push(client, unit.image)
        if "type=inline" in cache_flags(build_spec(unit), o, containerd_store=_containerd_store(rec)):  # its -latest tag
            repo, tag = split_image(unit.image)
            latest = f"{tag.rsplit('-', 1)[0]}-latest"
            engine.tag(client, image_id, repo, latest)
            engine.push(client, f"{repo}:{latest}")
        how += " and pushed"
    return UnitRecord(unit.name, unit.key, unit.image, image_id, "built", how, decision.changed,
                      time.monotonic() - start, began=start)


def _ensure_step(ctx: Ctx, rec: BuildRecord, units: tuple[Unit, ...],
                 labels: dict[str, tuple[tuple[str, str], ...]]) -> list[UnitRecord]:
    """A step's units, each had as cleanbuild.images.reuse decides. Where the engine builds reproducibly (the
    containerd store), every unit is decided first (in build order, its key's lock taken), and the units to build
    are then built at once (cleanbuild.images.atonce): each target builds inline the stages of the units it reads
    where BuildKit's cache allows, so few wait for another's image export. Elsewhere (Docker 20.10's classic store,
    where building at once measured no faster) a unit starts once every unit it needs is had (cleanbuild.images.graph)."""
    if not _reproducible(rec):
        return list(graph.run(units, ctx.plan.needs, lambda unit: _ensure(ctx, rec, unit, labels.get(unit.name, ()))))
    claims = _Claims()
    try:
        had: dict[str, UnitRecord] = {}
        to_build: list[tuple[Unit, reuse.Decision]] = []
        for unit in units:
            start = time.monotonic()
            claims.take(unit.key)
            decision, how = _decided_first(ctx, unit, {u.name for u, _ in to_build})
            if decision.action is reuse.Action.REUSE:
                had[unit.name] = _reused(ctx, unit, decision, how, start)
                claims.release(unit.key)
            else:
                to_build.append((unit, decision))
        had.update(_build_at_once(ctx, rec, to_build, labels, claims))
    finally:
        claims.release_all()
    return [had[u.name] for u in units]


def _decided_first(ctx: Ctx, unit: Unit, building: set[str]) -> tuple[reuse.Decision, str]:
    """_decided, except that a unit whose image below is to be built in this step is built too."""
    below = ctx.plan.below(unit)
    if below is None or below.name not in building:
        return _decided(ctx, unit, _layer_below(ctx, unit))
    return reuse.decide(ctx.client, unit, variant=ctx.plan.variant(unit), rebuild=ctx.rebuild,
                        below=reuse.Below(below.name, None), registry=ctx.plan.options.remote), "built"


class _Claims:
    """The key locks a step took, each released by whichever thread is done with its unit (or at the end)."""

    def __init__(self) -> None:
        self._held: set[str] = set()
        self._guard = threading.Lock()

    def take(self, key: str) -> None:
        _key_lock(key).acquire()
        with self._guard:
            self._held.add(key)

    def release(self, key: str) -> None:
        with self._guard:
            if key not in self._held:
                return
            self._held.discard(key)
        _key_lock(key).release()

    def release_all(self) -> None:
        for key in list(self._held):
            self.release(key)


def _build_at_once(ctx: Ctx, rec: BuildRecord, batch: list[tuple[Unit, reuse.Decision]],
                   labels: dict[str, tuple[tuple[str, str], ...]], claims: _Claims) -> dict[str, UnitRecord]:
    """Every unit of batch built on one BuildKit with the build arguments atonce.batch gives it, each once the
    units it waits for are built; the units that inline the most first, as many at a time as there are CPUs
    (cleanbuild.images.graph.workers), a free thread taking the first ready: the longest chain (aiter's, once the
    build environments are there; the clean layer's) gets the CPU first, and the units below it then find their
    stages built and only export them. All at once on 2 cores, every unit competed
    for them and the wheels step took no less time (89.2 s against 87.0 s one after another, 2026-12-04).
    Each unit's key lock is released when its build is done."""
    units = [u for u, _ in batch]
    decisions = {u.name: d for u, d in batch}
    joined = atonce.batch(units, ctx.plan.needs)
    group = atonce.groups(joined)

    def work(unit: Unit) -> UnitRecord:
        start = time.monotonic()
        try:
            image_id = buildx.build(build_spec(unit), ctx.plan.options, labels=(*labels.get(unit.name, ()), *unit_labels(unit)),
                                    build_args=joined[unit.name].args, reproducible=True,
                                    containerd_store=_containerd_store(rec))
            together = group[unit.name]
            how = f"built at once ({', '.join(together)})" if len(together) > 1 else "built"
            return _built(ctx, rec, unit, image_id, decisions[unit.name], start, how)
        finally:
            claims.release(unit.key)

    first = sorted(units, key=lambda unit: -len(joined[unit.name].inline))  # the longest chains first
    done = graph.run(first, lambda unit: joined[unit.name].waits, work)
    return {u.name: d for u, d in zip(first, done, strict=True)}


def unit_labels(unit: Unit) -> tuple[tuple[str, str], ...]:
    """The labels an image is found by: its unit and key, and the inputs its key is the hash of. Nothing else: an
    image's bytes are a function of its key, so the variant that built it first is not among them (its tags say it)."""
    return ((engine.UNIT_LABEL, unit.name), (engine.KEY_LABEL, unit.key),
            (engine.INPUTS_LABEL, json.dumps(dict(unit.inputs), sort_keys=True, separators=(",", ":"))))


def _summary(done: tuple[UnitRecord, ...]) -> str:
    """The units grouped by how each was had: "built: atom; found here by key: torch, triton, ..."."""
    groups: dict[str, list[str]] = {}
    for unit in done:
        groups.setdefault(unit.how, []).append(unit.name)
    return "; ".join(f"{how}: {', '.join(names)}" for how, names in groups.items())


def wheels(ctx: Ctx, rec: BuildRecord) -> Outcome:
    """Every component image and the wheels image (_ensure_step): independent components build at the same time,
    on the containerd store each reading the stages of the components it needs rather than their images (the
    engine client's connection pool serves the threads)."""
    done = tuple(_ensure_step(ctx, rec, ctx.plan.step_units("wheels"), {}))
    assembly = done[-1]
    raw = engine.read_file(ctx.client, assembly.image_id, "/wheels/manifest.json", rec.run_id)
    if raw is None:
        raise StepFailed(f"{assembly.image} has no /wheels/manifest.json. To fix, rebuild it: invoke wheels --rebuild.")
    result = Wheels(assembly.image, assembly.image_id, assembly.status == "reused", json.loads(raw), digest(raw))
    rec = replace(rec, wheels=result, units=(*rec.units, *done))
    detail = f"{assembly.image}: {_summary(done)}; {len(result.manifest['wheels'])} wheels"
    return rec, StepStatus.REUSED if all(u.status == "reused" for u in done) else StepStatus.PASSED, detail


def clean(ctx: Ctx, rec: BuildRecord) -> Outcome:
    rebuilt = srcplan.on_route(ctx.plan.options.src, "wheel")  # a wheel from a checkout: the clean image is dirty
    own = clean_labels(ctx.plan, rec) + (srcplan.labels(rebuilt) if rebuilt else ())
    done = _ensure_step(ctx, rec, ctx.plan.step_units("clean"), {"clean": own})
    image_id = done[-1].image_id
    status = StepStatus.REUSED if all(u.status == "reused" for u in done) else StepStatus.PASSED
    rec = replace(rec, clean_id=image_id, candidate_id=image_id, units=(*rec.units, *done))
    return rec, status, f"{done[-1].image}: {_summary(tuple(done))}"


def dev(ctx: Ctx, rec: BuildRecord) -> Outcome:
    """--src, overlay route: the changed files as one layer over the clean image (Dockerfile.dev), labelled dirty."""
    src = ctx.plan.options.src
    done = _ensure(ctx, rec, ctx.plan.unit("dev"), srcplan.labels(src))
    manifest = srcplan.overlay_manifest(src)
    rec = replace(rec, candidate_id=done.image_id, candidate_ref=done.image, units=(*rec.units, done))
    detail = (f"{done.image} ({done.how}): {len(manifest['files'])} files copied, {len(manifest['deleted'])} deleted "
              f"over {ctx.plan.clean.image}")
    return rec, StepStatus.REUSED if done.status == "reused" else StepStatus.PASSED, detail


def patch(ctx: Ctx, rec: BuildRecord) -> Outcome:
    """The patch layer on the clean image (by name: BuildKit 0.8 looks a bare ID in FROM up on Docker Hub). The
    candidate is content-keyed like the wheels and clean images; `invoke patch --image X` builds X-patched."""
    base = rec.candidate_ref or ctx.plan.clean.image
    spec = patch_build(base, ctx.plan.patch.image, ctx.patch_only, warm_of(ctx.plan.patch))
    log = ctx.plan.options.run_dir / f"{spec.step}.log"
    if spec == ctx.plan.patch:
        done = _ensure(ctx, rec, ctx.plan.unit("candidate"), attestations=_attestations(ctx, rec, base))
        rec = replace(rec, units=(*rec.units, done))
        image_id, how, log = done.image_id, done.how, ctx.plan.options.run_dir / f"{done.name}.log"
    else:  # an image the user named, or --only: not a keyed unit; it must not carry its parent's key
        adhoc = ((engine.UNIT_LABEL, "patch"), (engine.KEY_LABEL, ""), (engine.INPUTS_LABEL, ""))
        image_id, how = buildx.build(spec, ctx.plan.options, labels=adhoc, reproducible=_reproducible(rec)), "built"
    raw = engine.read_json(ctx.client, image_id, metadata.PATCHES_PATH, rec.run_id)
    data = raw if isinstance(raw, dict) else {}
    outcomes = ", ".join(f"{p['name']}={p['outcome']}" for p in data.get("patches", [])) or "no patch report"
    warmed = engine.read_json(ctx.client, image_id, metadata.TRITON_CACHE_PATH, rec.run_id)
    warm = {"manifest": warmed if isinstance(warmed, dict) else None,
            "run": warmcache.run_facts(log) if how.startswith("built") else None}
    summary = f"{spec.image} ({how}): {outcomes}; {_warm_summary(warm['manifest'])}"
    return (replace(rec, candidate_id=image_id, candidate_ref=spec.image, patches=data, triton_cache=warm),
            StepStatus.PASSED, summary)


def _warm_summary(manifest: dict[str, Any] | None) -> str:
    if not manifest:
        return "no Triton cache"
    return (f"Triton cache {manifest.get('kernels')} kernels for {manifest.get('target')}, "
            f"{((manifest.get('cache') or {}).get('bytes') or 0) / 2**20:.1f} MiB")


def _attestations(ctx: Ctx, rec: BuildRecord, base: str) -> buildx.Attestations | None:
    """The candidate's SBOM and provenance, attached where the engine builds reproducibly (cleanbuild.images.attest):
    from the wheels manifest the image it starts FROM holds, the pins and the candidate's content key."""
    if not _reproducible(rec):
        return None
    plan = ctx.plan

    def statements(subject: str) -> list[dict[str, Any]]:
        manifest = engine.read_json(ctx.client, base, metadata.MANIFEST_PATH, rec.run_id)
        if not isinstance(manifest, dict):
            raise StepFailed(f"{base} has no {metadata.MANIFEST_PATH}. To fix, rebuild it: invoke clean --rebuild.")
        return sbom.statements(manifest, subject, **reports.attestation_args(plan))

    return statements


def _gpu_kwargs(ctx: Ctx, rec: BuildRecord, step: str,
                image_rocm: str | None) -> tuple[gpu.RunOptions, tuple[dict[str, Any], ...]]:
    """Device access by number for this step (chosen render nodes, their GIDs), checked before the container."""
    o = ctx.plan.options
    access = gpu.device_access(o.request.gpu, user=o.request.user_id, arch=o.arch.value)
    gpu.check_permissions(access)
    gpu.check_driver(gpu.driver_info(), image_rocm)
    return {**gpu.run_flags(access), **gpu.compute_options(step)}, tuple(gpu.describe(access))


def _image_rocm(ctx: Ctx, rec: BuildRecord) -> str | None:
    raw = engine.read_json(ctx.client, rec.candidate(), metadata.VERSIONS_PATH, rec.run_id)
    return raw.get("rocm") if isinstance(raw, dict) else None


def validate(ctx: Ctx, rec: BuildRecord) -> Outcome:
    spec = ctx.plan.validate
    kwargs, gpus = _gpu_kwargs(ctx, rec, "validate", _image_rocm(ctx, rec)) if spec.gpu else ({}, None)
    out = ctx.plan.options.run_dir / "validation.json"
    out.unlink(missing_ok=True)
    result = engine.run_container(ctx.client, rec.candidate(), spec, kwargs)
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


def smoke(ctx: Ctx, rec: BuildRecord) -> Outcome:
    plan = ctx.plan
    if plan.smoke is None:
        return replace(rec, smoke={"status": "skipped", "reason": plan.smoke_skip_reason}), StepStatus.SKIPPED, plan.smoke_skip_reason or ""
    kwargs, gpus = _gpu_kwargs(ctx, rec, "smoke", _image_rocm(ctx, rec)) if plan.smoke.gpu else ({}, None)
    result = engine.run_container(ctx.client, rec.candidate(), plan.smoke, kwargs)
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


def release_tag(ctx: Ctx, rec: BuildRecord) -> tuple[BuildRecord, str]:
    """(record with the image's facts and tag, release repository): from the versions the image itself reports."""
    o = ctx.plan.options
    where = rec.candidate_ref or str(rec.candidate_id)
    raw = engine.read_json(ctx.client, rec.candidate(), metadata.VERSIONS_PATH, rec.run_id)
    if raw is None:
        raise UsageError(f"{where} has no {metadata.VERSIONS_PATH}. To fix, tag an image built by build-clean.")
    facts = metadata.read_versions(raw, where)
    result = make_tag(TagParts(o.request.user, o.date, facts.rocm_release, facts.aiter, facts.atom))
    return replace(rec, facts=facts, tag=result), metadata.release_repo(o.request.registry, facts.arch, facts.ck_mode)


def refuse_dirty(client: DockerClient, image: str, where: str) -> None:
    """An image built from a local checkout (--src) never gets a release tag."""
    labels = engine.inspect(client, image).get("Config", {}).get("Labels") or {}
    if labels.get(srcplan.DIRTY_LABEL) == "true":
        raise UsageError(f"{where} is labelled {srcplan.DIRTY_LABEL}=true (built from a local checkout with --src), "
                         "so it gets no release tag. To fix, commit the change, move the pin and build from the pins.")


def tag(ctx: Ctx, rec: BuildRecord) -> Outcome:
    """The release tag, only for an image that passed smoke (or with --allow-no-smoke). Written in the journal
    before it exists, so an interrupted run removes it."""
    if not ctx.plan.dirty:
        refuse_dirty(ctx.client, rec.candidate(), rec.candidate_ref or str(rec.candidate_id))
    rec, repo = release_tag(ctx, rec)
    if ctx.plan.dirty:
        return dev_tag(ctx, rec, repo)
    if (rec.smoke or {}).get("status") != "passed" and not ctx.plan.options.request.allow_no_smoke:
        return rec, StepStatus.SKIPPED, f"no smoke test passed, so no release tag (--allow-no-smoke tags anyway); candidate {rec.candidate_ref}"
    _, made = rec.tagged()
    ctx.journal.release = (repo, made.value)
    ref = engine.tag(ctx.client, rec.candidate(), repo, made.value)
    return replace(rec, release_ref=ref), StepStatus.PASSED, ref


def dev_tag(ctx: Ctx, rec: BuildRecord, repo: str) -> Outcome:
    """--src: `<repo>:dev-<user>-<diff hash>`, never the release tag (the image is labelled dirty)."""
    o = ctx.plan.options
    value = srcplan.dev_tag(o.request.user, o.src)
    ctx.journal.release = (repo, value)
    ref = engine.tag(ctx.client, rec.candidate(), repo, value)
    note = "dev tag: built from a local checkout (--src), labelled dirty, never a release tag"
    smoke = (rec.smoke or {}).get("status") or "skipped"
    _, made = rec.tagged()
    return replace(rec, tag=Tag(value, made.parts, (note,)), dev_ref=ref), StepStatus.PASSED, f"{ref} (dev tag; smoke {smoke})"


def push(ctx: Ctx, rec: BuildRecord) -> Outcome:
    """promote's last act: the release tag and the report to the registry. By digest: the registry must store the
    very manifest that was pulled and validated, or the step fails (and cleanup removes the local release tag)."""
    if not ctx.plan.options.remote:
        raise UsageError(f"registry {ctx.plan.options.request.registry!r} has no host to push to. To fix, pass --registry HOST[:PORT]/PREFIX.")
    if rec.release_ref is None:
        raise StepFailed("there is no release tag to push: the smoke test did not pass.")
    pushed = engine.push(ctx.client, rec.release_ref)
    if rec.candidate_digest and pushed != rec.candidate_digest:
        raise StepFailed(f"the registry stored {pushed} for {rec.release_ref}, not the validated {rec.candidate_digest}.")
    report_ref = push_report(ctx, rec)
    return rec, StepStatus.PASSED, f"{rec.release_ref}@{pushed}; report {report_ref}"


def push_report(ctx: Ctx, rec: BuildRecord) -> str:
    """The build report as a three-file image (FROM scratch) tagged <release tag>.report beside the release."""
    folder = reports.folder_for(ctx.plan, rec, failed=False)
    (folder / "Dockerfile").write_text("FROM scratch\nCOPY report.json report.md report.html /\n")
    try:
        spec = BuildSpec("report", folder / "Dockerfile", folder, None, (), f"{rec.release_ref}.report")
        buildx.build(spec, ctx.plan.options, reproducible=_reproducible(rec))
    finally:
        (folder / "Dockerfile").unlink()
    engine.push(ctx.client, spec.image)
    return spec.image


def report(ctx: Ctx, rec: BuildRecord) -> Outcome:
    """The report lists every step, itself included (written as it runs; its seconds are the writing's)."""
    itself = StepRecord("report", StepStatus.PASSED, 0.0, "this report")
    folder = reports.write(ctx.plan, observe(ctx.client, replace(rec, steps=(*rec.steps, itself)), ctx.plan.base_image),
                           failed=False)
    return rec, StepStatus.PASSED, str(folder)


def observe(client: DockerClient | None, rec: BuildRecord, base: str | None = None) -> BuildRecord:
    """What the report says that only the engine and the clock know, into the record: the candidate's size,
    layers and labels (when there is a candidate and an engine), and the time the run ended."""
    image = None
    if rec.candidate_id and client is not None:
        inspected = engine.inspect(client, rec.candidate_id)
        layers = tuple((inspected.get("RootFS") or {}).get("Layers", []))
        largest = tuple(engine.largest_layers(client, rec.candidate_id))
        sizes = engine.layer_sizes(engine.history(client, rec.candidate_id), list(layers))
        image = ImageSummary(inspected.get("Size"), layers, dict((inspected.get("Config") or {}).get("Labels") or {}),
                             largest, tuple(_owned(client, rec, sizes, base)), _payload(client, rec))
    return replace(rec, image=image, finished=time.monotonic())


def _payload(client: DockerClient, rec: BuildRecord) -> dict[str, Any] | None:
    """The image's own payload manifest and what its clean step left out (None for an image built without them)."""
    image = rec.candidate()
    manifest = engine.read_json(client, image, metadata.PAYLOAD_PATH, rec.run_id)
    left_out = engine.read_json(client, image, metadata.PAYLOAD_LEFT_OUT_PATH, rec.run_id)
    if not isinstance(manifest, dict):
        return None
    return {"manifest": manifest, "left_out": left_out if isinstance(left_out, dict) else None}


def _owned(client: DockerClient, rec: BuildRecord, sizes: list[dict[str, Any]], base: str | None) -> list[dict[str, Any]]:
    """Each layer named by the image that first holds it: the base image, or the unit (venv, atom-layer, clean,
    candidate) whose layers the candidate's start with. Bottom first, so the layer at index i belongs to the
    smallest of those images that has more than i layers."""
    counts = [("base", len(engine.layers(client, base)) if base and engine.image_id(client, base) else 0)]
    candidate = [s["digest"] for s in sizes]
    for unit in rec.units:
        own = engine.layers(client, unit.image_id)
        if own and own == candidate[:len(own)]:
            counts.append((unit.name, len(own)))
    counts.sort(key=lambda c: c[1])
    return [{**s, "unit": next((n for n, k in counts if k > i), "candidate")} for i, s in enumerate(sizes)]


def _tail(text: str, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[:400] or "no output"


STEPS = {"preflight": preflight, "prepare": prepare, "wheels": wheels, "clean": clean, "dev": dev, "patch": patch,
         "validate": validate, "smoke": smoke, "tag": tag, "report": report, "push": push}
