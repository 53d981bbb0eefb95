"""The executor: carries out a Plan step by step against the engine, and tags only what passed.

Order: preflight, wheels (reused when its content key matches), clean, patch, validate, smoke, tag, report.
Everything after the patch build runs against the candidate's image ID. A failure or Ctrl-C leaves no release
tag: the candidate gets a `-failed` tag, its temporary name is removed, and so are our containers.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import buildx, engine, report
from .console import StepLog, console
from .errors import CleanBuildError, Interrupted, StepFailed
from .plan import Plan
from .tag import Tag, TagParts, make_tag
from .versions import ImageVersions

IN_IMAGE = "/opt/atom-build"


@dataclass
class State:
    plan: Plan
    cli: object
    log: StepLog = field(default_factory=StepLog)
    ids: dict[str, str] = field(default_factory=dict)
    facts: dict[str, object] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    tag: Tag | None = None
    release_ref: str | None = None


def build_clean(plan: Plan, cli, *, need_gib: float) -> State:
    state = State(plan, cli)
    try:
        _steps(state, need_gib)
    except KeyboardInterrupt:
        _cleanup(state, failed=True)
        raise Interrupted("interrupted: builds stopped, temporary containers and names removed; no release tag.") from None
    except CleanBuildError:
        _cleanup(state, failed=True)
        raise
    _cleanup(state, failed=False)
    return state


def _steps(state: State, need_gib: float) -> None:
    plan, log = state.plan, state.log
    with log.step("preflight") as rec:
        facts = engine.preflight(state.cli, need_gib)
        state.facts["engine"] = facts.__dict__
        rec.detail = f"engine {facts.version}, {facts.free_gib} GiB free, arch {plan.options.arch.value}"
    with log.step("wheels") as rec:
        wheels(state, rec)
    with log.step("clean") as rec:
        state.ids["clean"] = buildx.build(plan.clean, plan.options, extra_labels=labels(state))
        rec.detail = plan.clean.image
    with log.step("patch") as rec:
        state.ids["candidate"] = buildx.build(plan.patch, plan.options)
        state.facts["patches"] = engine.read_json(state.cli, state.ids["candidate"], f"{IN_IMAGE}/patches.json")
        rec.detail = _patch_summary(state.facts["patches"])
    with log.step("validate") as rec:
        validate(state, rec)
    with log.step("smoke") as rec:
        smoke(state, rec)
    with log.step("tag") as rec:
        tag_release(state, rec)
    with log.step("report") as rec:
        rec.detail = str(report.write(state))


def wheels(state: State, rec) -> None:
    plan = state.plan
    existing = engine.image_id(state.cli, plan.wheels.image)
    if existing:
        rec.status, rec.detail = "reused", f"{plan.wheels.image} (content key matches)"
        state.ids["wheels"] = existing
    else:
        state.ids["wheels"] = buildx.build(plan.wheels, plan.options)
        rec.detail = plan.wheels.image
    raw = engine.read_file(state.cli, state.ids["wheels"], "/wheels/manifest.json")
    if raw is None:
        raise StepFailed(f"{plan.wheels.image} has no /wheels/manifest.json. To fix, rebuild it: invoke wheels --arch {plan.options.arch.value} --rebuild.")
    state.facts["manifest"] = json.loads(raw)
    state.facts["manifest_digest"] = digest(raw)


def digest(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def labels(state: State) -> tuple[tuple[str, str], ...]:
    """OCI labels for the clean image: every pin, the arch, CK mode and the wheels manifest digest."""
    plan = state.plan
    out = {
        "org.opencontainers.image.title": "atom-clean",
        "org.opencontainers.image.base.name": plan.base_image,
        "io.atom-build.profile": plan.profile.name,
        "io.atom-build.pinned": plan.profile.pinned,
        "io.atom-build.arch": plan.options.arch.value,
        "io.atom-build.ck": "0" if plan.options.ck_free else "1",
        "io.atom-build.wheels-image": plan.wheels.image,
        "io.atom-build.wheels-manifest-digest": str(state.facts.get("manifest_digest", "")),
    }
    for comp in plan.profile.components:
        out[f"io.atom-build.source.{comp.name}"] = comp.ref()
    for wheel in _wheels(state):
        out[f"io.atom-build.version.{wheel['name']}"] = str(wheel.get("version", ""))
    return tuple(sorted(out.items()))


def _wheels(state: State) -> list[dict]:
    manifest = state.facts.get("manifest") or {}
    wheels = manifest.get("wheels", manifest if isinstance(manifest, list) else [])
    return [w for w in wheels if w.get("source") not in ("deps", "pypi-deps")][:40]


def validate(state: State, rec) -> None:
    spec = state.plan.validate
    result = engine.run_container(state.cli, state.ids["candidate"], spec)
    out = Path(state.plan.options.run_dir) / "validation.json"
    state.facts["validation_logs"] = result.logs[-20000:]
    data = json.loads(out.read_text()) if out.is_file() else None
    state.facts["validation"] = data
    if data is None:
        raise StepFailed(f"validation wrote no report (exit {result.exit_code}): {tail(result.logs)}")
    counts = {s: sum(c["status"] == s for c in data["checks"]) for s in ("passed", "failed", "skipped")}
    rec.detail = f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    if result.exit_code != 0 or counts["failed"]:
        failed = ", ".join(c["name"] + (f" ({c['reason']})" if c.get("reason") else "") for c in data["checks"] if c["status"] == "failed")
        raise StepFailed(f"validation failed inside the image: {failed or tail(result.logs)}. Log: {out}")


def smoke(state: State, rec) -> None:
    plan = state.plan
    if plan.smoke is None:
        rec.status, rec.detail = "skipped", plan.smoke_skip_reason or "skipped"
        state.facts["smoke"] = {"status": "skipped", "reason": rec.detail}
        return
    result = engine.run_container(state.cli, state.ids["candidate"], plan.smoke)
    parsed = smoke_result(result.logs)
    state.facts["smoke"] = {"status": "passed" if result.exit_code == 0 else "failed", "exit_code": result.exit_code,
                            "command": list(plan.smoke.command), "model": str(plan.options.model),
                            "result": parsed, "output": result.logs[-8000:]}
    if result.exit_code != 0 or parsed is None:
        raise StepFailed(f"the smoke test failed (exit {result.exit_code}): {tail(result.logs)}")
    rec.detail = f"{parsed.get('new_tokens')} new tokens ({parsed.get('counted_by')})"


def smoke_result(logs: str) -> dict | None:
    for line in reversed(logs.splitlines()):
        if line.startswith("SMOKE_RESULT "):
            try:
                return json.loads(line.removeprefix("SMOKE_RESULT "))
            except ValueError:
                return None
    return None


def tag_release(state: State, rec) -> None:
    plan, cli = state.plan, state.cli
    data = engine.read_json(cli, state.ids["candidate"], f"{IN_IMAGE}/versions.json") or {}
    versions = ImageVersions.from_json(data)
    state.facts["versions"] = data
    state.tag = make_tag(TagParts(plan.options.user, plan.options.date, versions.rocm, versions.aiter, versions.atom))
    if plan.smoke is None and not plan.options.allow_no_smoke:
        rec.status = "skipped"
        rec.detail = f"no smoke test, so no release tag (pass --allow-no-smoke to tag anyway); candidate {plan.patch.image}"
        return
    state.release_ref = engine.tag(cli, state.ids["candidate"], plan.release_repo, state.tag.value)
    rec.detail = state.release_ref


def _patch_summary(data: dict | None) -> str:
    if not data:
        return "no patch report"
    return ", ".join(f"{p['name']}={p['outcome']}" for p in data.get("patches", []))


def tail(text: str, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[:400] or "no output"


def _cleanup(state: State, *, failed: bool) -> None:
    """Remove our containers and the candidate's temporary name; a failed candidate keeps only a -failed tag."""
    cli, plan = state.cli, state.plan
    try:
        engine.remove_stray(cli, f"atom-validate-{plan.options.run_id}")
        engine.remove_stray(cli, f"atom-smoke-{plan.options.run_id}")
        candidate = state.ids.get("candidate")
        if failed and candidate:
            ref = engine.tag(cli, candidate, plan.release_repo, f"{plan.options.run_id}-failed")
            state.facts["failed_ref"] = ref
            console.print(f"candidate kept as {ref} for debugging; logs in {plan.options.run_dir}")
        if candidate:
            engine.untag(cli, plan.patch.image)
        if failed:
            console.print(f"report of the failed build: {report.write(state, failed=True)}")
    except Exception as exc:  # noqa: BLE001 - cleanup must not hide the real error
        console.print(f"[yellow]cleanup incomplete: {exc}[/yellow]")
