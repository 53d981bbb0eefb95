"""The build report: reports/<tag>/report.json and report.md, and reading them back."""

from __future__ import annotations

import json
import time
from pathlib import Path

from . import engine
from .plan import REPO_ROOT

REPORTS = REPO_ROOT / "reports"


def write(state, *, failed: bool = False) -> Path:
    """Collect everything the pipeline learned into one JSON document and its Markdown rendering.

    A failed build gets one too, under <run-id>-failed, so what went wrong is on disk next to the good ones.
    """
    plan, cli = state.plan, state.cli
    # One folder per repository (arch, CK mode) and tag: the tag convention itself carries no arch.
    name = f"{plan.options.run_id}-failed" if failed else state.tag.value if state.tag else plan.options.run_id
    folder = REPORTS / plan.release_repo.rsplit("/", 1)[-1] / name
    folder.mkdir(parents=True, exist_ok=True)
    candidate = state.ids.get("candidate")
    inspect = engine.inspect(cli, candidate) if candidate else {}
    data = {
        "status": "failed" if failed else "passed",
        "tag": state.release_ref,
        "tag_value": state.tag.value if state.tag else None,
        "tag_changes": list(state.tag.steps) if state.tag else [],
        "run_id": plan.options.run_id,
        "profile": plan.profile.name,
        "pinned": plan.profile.pinned,
        "arch": plan.options.arch.value,
        "ck_free": plan.options.ck_free,
        "image_id": candidate,
        "image_size_bytes": inspect.get("Size"),
        "largest_layers": engine.largest_layers(cli, candidate) if candidate else [],
        "base_image": plan.base_image,
        "base_image_digest": plan.profile.base.get("digest") or None,
        "images": {k: v for k, v in state.ids.items()},
        "components": {c.name: dict(c.fields) for c in plan.profile.components},
        "versions": state.facts.get("versions"),
        "wheels_manifest_digest": state.facts.get("manifest_digest"),
        "wheels": (state.facts.get("manifest") or {}).get("wheels", []),
        "patches": state.facts.get("patches"),
        "validation": state.facts.get("validation"),
        "smoke": state.facts.get("smoke"),
        "steps": [{"name": r.name, "status": r.status, "seconds": round(r.seconds, 2), "detail": r.detail}
                  for r in state.log.records],
        "total_seconds": round(time.monotonic() - state.started, 1),
        "labels": (inspect.get("Config") or {}).get("Labels") or {},
    }
    (folder / "report.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    (folder / "report.md").write_text(markdown(data))
    state.facts["report_dir"] = str(folder)
    return folder


def load(ref: str) -> dict | None:
    """A report by 'registry/atom-gfx942:TAG', 'atom-gfx942:TAG' or a bare TAG (when only one arch has it)."""
    repo, _, tag = ref.rpartition(":")
    if repo:
        file = REPORTS / repo.rsplit("/", 1)[-1] / tag / "report.json"
        return json.loads(file.read_text()) if file.is_file() else None
    found = sorted(REPORTS.glob(f"*/{ref}/report.json"))
    return json.loads(found[-1].read_text()) if found else None


def markdown(data: dict) -> str:
    lines = [f"# Build report: {data.get('tag') or data.get('tag_value') or data.get('run_id')}", ""]
    size = data.get("image_size_bytes")
    lines += [
        f"- profile: {data['profile']} (pinned {data['pinned']}), arch {data['arch']}, "
        f"{'CK-free' if data['ck_free'] else 'full CK'}",
        f"- image: {data.get('image_id')}, size {size / 2**30:.2f} GiB" if size else "- image: none",
        f"- total build time: {data['total_seconds']} s",
        f"- base: {data['base_image']}",
        f"- wheels manifest: {data.get('wheels_manifest_digest')}",
        "", "## Steps", "", "| step | status | seconds | detail |", "| --- | --- | --- | --- |",
    ]
    lines += [f"| {s['name']} | {s['status']} | {s['seconds']} | {s['detail']} |" for s in data["steps"]]
    lines += ["", "## Versions", ""] + [f"- {k}: {v}" for k, v in (data.get("versions") or {}).items()]
    lines += ["", "## Patches", ""] + [f"- {p['name']}: {p['outcome']}" for p in (data.get("patches") or {}).get("patches", [])]
    lines += ["", "## Validation", "", "| check | status | reason |", "| --- | --- | --- |"]
    lines += [f"| {c['name']} | {c['status']} | {c.get('reason', '')} |" for c in (data.get("validation") or {}).get("checks", [])]
    smoke = data.get("smoke") or {}
    lines += ["", "## Smoke test", "", f"- status: {smoke.get('status')}", f"- model: {smoke.get('model')}",
              f"- command: {' '.join(smoke.get('command', []))}", f"- result: {smoke.get('result') or smoke.get('reason')}"]
    lines += ["", "## Largest layers", ""] + [f"- {layer['size'] / 2**20:.1f} MiB: {layer['created_by']}" for layer in data.get("largest_layers", [])]
    return "\n".join(lines) + "\n"
