"""The build report: reports/<repository>/<tag or run-id[-failed]>/report.{json,md}, a pure function of the plan
and the build record, written atomically (a temporary folder renamed into place: never an empty report folder).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import tomllib
from pathlib import Path
from typing import Any, TypedDict

from cleanbuild.core import metadata
from cleanbuild.core.refs import name_or_tag, split_image
from cleanbuild.core.spec import REPO_ROOT
from cleanbuild.images import htmlpage, payload, sbom, srcplan, warmcache
from cleanbuild.images.plan import Plan
from cleanbuild.images.record import BuildRecord
from cleanbuild.upstream import profiles

REPORTS = REPO_ROOT / "reports"


def build(plan: Plan, rec: BuildRecord, *, failed: bool, error: str | None = None) -> dict[str, Any]:
    """Everything the run learned, as one JSON document (the engine's view of the image: rec.image)."""
    image, seen = rec.candidate_id, rec.image
    manifest = rec.wheels.manifest if rec.wheels else {}
    return {
        "schema": 2, "status": "failed" if failed else "passed", "error": error,
        "tag": rec.release_ref or rec.dev_ref, "tag_value": rec.tag.value if rec.tag else None,
        "dirty": plan.dirty, "src": [srcplan.describe(c) for c in plan.options.src],
        "tag_changes": list(rec.tag.steps) if rec.tag else [],
        "run_id": rec.run_id, "started_at": rec.started_at, "profile": plan.profile.name,
        "offline_substitutes": list(plan.profile.substitutes), "pinned": plan.profile.pinned,
        "arch": plan.options.arch.value, "ck_mode": plan.options.ck_mode,
        "image_id": image, "image_size_bytes": seen.size_bytes if seen else None,
        "largest_layers": list(seen.largest_layers) if seen else [],
        "layer_sizes": list(seen.layer_sizes) if seen else [],
        "layers": list(seen.layers) if seen else [],
        "payload": payload.section(seen.payload) if seen else None,
        "base_image": plan.base_image, "base_image_digest": plan.profile.base.digest or None,
        "standin": standin(plan, rec),
        "attestations": attached(plan, rec),
        "images": {"wheels": rec.wheels.image if rec.wheels else None, "clean": plan.clean.image,
                   "candidate": rec.candidate_ref},
        "components": {c.name: c.as_given() for c in plan.profile.components},
        "pins": pins(plan, manifest.get("sources") or {}),
        "sources": manifest.get("sources"), "lock_sha256": manifest.get("lock_sha256"),
        "versions": _facts(rec), "wheels_manifest_digest": rec.wheels.manifest_digest if rec.wheels else None,
        "wheels": manifest.get("wheels", []),
        "units": [{"name": u.name, "status": u.status, "how": u.how, "key": u.key, "image": u.image,
                   "changed": list(u.changed), "seconds": round(u.seconds, 2),
                   "start_s": round(u.began - rec.started, 2) if u.began is not None else None} for u in rec.units],
        "patches": rec.patches, "validation": rec.validation,
        "triton_cache": warmcache.section(*_warm(rec), rec.validation),
        "route": route_section(rec.validation),
        "validation_status": validation_status(rec.validation),
        "smoke": rec.smoke, "gpu": list(rec.gpu) if rec.gpu else None,
        "steps": [{"name": s.name, "status": s.status, "seconds": round(s.seconds, 2), "detail": s.detail}
                  for s in rec.steps],
        "total_seconds": round(rec.finished - rec.started, 1) if rec.finished is not None else None,
        "labels": dict(seen.labels) if seen else {},
    }


def route_section(validation: dict[str, Any] | None) -> dict[str, Any] | None:
    """validation's route check as the report shows it: per model, each layer's ATOM op and the kernels it reaches
    (kind:module or kernel), the ones the image lacks marked."""
    check = next((c for c in (validation or {}).get("checks", []) if c.get("name") == "route"), None)
    if check is None:
        return None
    metrics = check.get("metrics") or {}
    models = [{"model": r["model"], "servable": r["servable"], "unresolved": r["unresolved"],
               "layers": [{"layer": lr["layer"] or "-", "op": lr["op"] or "-",
                           "kernels": sorted({_kernel(k) for k in lr["kernels"]})} for lr in r["layers"]]}
              for r in metrics.get("route") or []]
    return {"status": check.get("status"), "reason": check.get("reason"),
            "allowed_unservable": bool(metrics.get("allowed_unservable")), "models": models}


def _kernel(k: dict[str, Any]) -> str:
    return f"{k['kind']}:{k['module'] or k['name'].rsplit('.', 1)[-1]}" + ("" if k["present"] else " MISSING")


def _warm(rec: BuildRecord) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    warm = rec.triton_cache or {}
    return warm.get("manifest"), warm.get("run")


def standin(plan: Plan, rec: BuildRecord) -> dict[str, Any] | None:
    """The stand-in base (offline profile): what its key covers, and what the Debian archive gave it (its Release
    files, every package version, the tar's sha256: cleanbuild.images.standin), which no pin holds. The archive is
    None where this run did not make the base or find its record."""
    if plan.prepare.standin is None:
        return None
    made = (rec.prepared or {}).get("standin_archive")
    return {"image": plan.base_image, "inputs": plan.prepare.standin.inputs(), "archive": made,
            "outside_the_pins": outside_the_pins(made)}


def outside_the_pins(made: dict[str, Any] | None) -> str:
    """One line: the Debian archive's state the stand-in base was made from."""
    head = "the stand-in base's Debian packages are what the archive served the day it was made (not pinned)"
    if not made:
        return f"{head}; not recorded by this run: its label {metadata.STANDIN_DEBS} lists every package version"
    served = ", ".join(" ".join(str(x) for x in (r.get("codename") or r.get("suite"), r.get("version")) if x)
                       + f" of {r.get('date', '?')}" for r in made.get("releases", []))
    return f"{head}: {served}; {len(made.get('packages', {}))} packages, tar {made.get('tar_sha256')}"


def attached(plan: Plan, rec: BuildRecord) -> list[str]:
    """The predicate types attached to the candidate: its SBOM and provenance where this engine built it
    reproducibly (cleanbuild.images.attest), in this run or an earlier one here. [] for none or not known (pulled)."""
    here = any(u.name == "candidate" and (u.status == "built" or u.how.startswith("found here")) for u in rec.units)
    keyed = here and rec.candidate_ref == plan.patch.image
    return [sbom.SBOM, sbom.PROVENANCE] if keyed and rec.engine is not None and rec.engine.reproducible else []


def validation_status(validation: dict[str, Any] | None) -> str:
    """One explicit value for the validation run: failed, warning (e.g. tuned-CSV coverage), passed, or not run."""
    statuses = {c.get("status") for c in (validation or {}).get("checks", [])}
    if not validation:
        return "not run"
    return next((s for s in ("failed", "warning", "passed") if s in statuses), "skipped")


def _facts(rec: BuildRecord) -> dict[str, Any] | None:
    f = rec.facts
    if f is None:
        return None
    return {"arch": f.arch, "ck_mode": f.ck_mode, "python": f.python, "rocm": f.rocm, "torch_hip": f.torch_hip,
            "packages": dict(f.packages), "commits": {n: {"sha": s.sha, "describe": s.describe, "date": s.date}
                                                      for n, s in f.sources.items()}}


def pins(plan: Plan, sources: dict[str, Any]) -> list[dict[str, Any]]:
    """The git pins: where from, the commit the build checked out (sha, describe, date) and a link to it on GitHub.
    A profile that builds from a mirror (offline) links to the GitHub repository the profile it inherits names."""
    out = []
    for comp in plan.profile.components:
        if comp.source != "git":
            continue
        got = sources.get(comp.name) or {}
        sha = got.get("sha") or comp.ref
        web = _github(plan.profile.file, comp.name)
        out.append({"name": comp.name, "repo": comp.repo, "ref": comp.ref, "sha": sha,
                    "describe": got.get("describe"), "date": got.get("date"),
                    "url": f"{web}/commit/{sha}" if web and sha else None})
    return out


def _github(profile_file: Path, name: str) -> str | None:
    """The first https://github.com/OWNER/REPO the profile's chain (child first) names for the component."""
    for file in profiles.chain(profile_file) if profile_file.is_file() else []:
        repo = str(tomllib.loads(file.read_text()).get("components", {}).get(name, {}).get("repo", ""))
        if repo.startswith("https://github.com/"):
            return repo.removesuffix(".git")
    return None


def since_previous(repo_folder: Path, name: str, data: dict[str, Any]) -> dict[str, Any] | None:
    """The bytes of this image's layers that the newest earlier passed report of the same repository (its release)
    did not have: what a node that holds that release pulls. None without such a report or layer sizes."""
    sizes = data.get("layer_sizes") or []
    if not sizes or any(s.get("digest") is None for s in sizes):
        return None
    earlier = []
    for file in repo_folder.glob("*/report.json"):
        try:
            old = json.loads(file.read_text())
        except (OSError, ValueError):
            continue
        if file.parent.name != name and old.get("status") == "passed" and old.get("tag") and old.get("layers"):
            earlier.append((str(old.get("started_at")), old))
    if not earlier:
        return None
    _, old = max(earlier, key=lambda e: e[0])
    have = set(old["layers"])
    new = [s for s in sizes if s["digest"] not in have]
    return {"tag": old["tag"], "started_at": old.get("started_at"), "new_layers": len(new),
            "new_digests": [s["digest"] for s in new],
            "new_bytes": sum(s["size"] for s in new), "shared_bytes": sum(s["size"] for s in sizes) - sum(s["size"] for s in new)}


def folder_for(plan: Plan, rec: BuildRecord, *, failed: bool) -> Path:
    name = f"{rec.run_id}-failed" if failed else rec.tag.value if rec.tag else rec.run_id
    return REPORTS / plan.release_repo.rsplit("/", 1)[-1] / name


def write(plan: Plan, rec: BuildRecord, *, failed: bool, error: str | None = None) -> Path:
    data = build(plan, rec, failed=failed, error=error)
    folder = folder_for(plan, rec, failed=failed)
    data["since_previous"] = since_previous(folder.parent, folder.name, data)
    return write_data(folder, data, supply_chain(plan, rec, data))


class AttestationArgs(TypedDict):
    """sbom.statements' keywords besides the manifest and the subject."""

    name: str
    version: str
    pins: dict[str, str]
    profile: str
    base: str
    base_digest: str | None


def attestation_args(plan: Plan) -> AttestationArgs:
    """What the SBOM and provenance say besides the manifest: the release name, the candidate's content key (the
    SBOM's version), the pins, the profile and the base image; the same in the attestations and the report."""
    return {"name": plan.release_repo.rsplit("/", 1)[-1], "version": plan.unit("candidate").key,
            "pins": {c.name: c.provenance() for c in plan.profile.components}, "profile": plan.profile.name,
            "base": plan.base_image, "base_digest": plan.profile.base.digest or None}


def supply_chain(plan: Plan, rec: BuildRecord, data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """sbom.cdx.json (every wheel in the image, the base image; the very SBOM attached to the image where the engine
    builds reproducibly) and provenance.json (pins, lock digest, about the image ID), when the run got as far as the
    wheels manifest."""
    if rec.wheels is None:
        return {}
    args = attestation_args(plan)
    manifest = rec.wheels.manifest
    bom = sbom.cyclonedx(manifest, image=args["name"], version=args["version"], base=args["base"],
                         base_digest=args["base_digest"])
    return {"sbom.cdx.json": bom,
            "provenance.json": sbom.provenance(manifest, image=rec.candidate_ref or plan.patch.image,
                                               image_id=data.get("image_id"), pins=args["pins"],
                                               profile=args["profile"], base=args["base"],
                                               base_digest=args["base_digest"])}


def write_data(folder: Path, data: dict[str, Any], files: dict[str, dict[str, Any]] | None = None) -> Path:
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        (tmp / "report.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
        (tmp / "report.md").write_text(markdown(data))
        (tmp / "report.html").write_text(htmlpage.build_page(data, (files or {}).get("sbom.cdx.json")))
        for name, doc in (files or {}).items():
            (tmp / name).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def find(ref: str) -> Path | None:
    """A report's report.json by 'registry/atom-gfx942:TAG', 'atom-gfx942:TAG' or a bare TAG (when only one arch
    has it). The name becomes a path under reports/: checked against the reference grammar first (UsageError,
    exit 2)."""
    repo, tag = split_image(name_or_tag(ref, "report REF"))
    if repo and tag:
        file = REPORTS / repo.rsplit("/", 1)[-1] / tag / "report.json"
        return file if file.is_file() else None
    found = sorted(REPORTS.glob(f"*/{ref}/report.json"))
    return found[-1] if found else None


def load(ref: str) -> dict[str, Any] | None:
    file = find(ref)
    return json.loads(file.read_text()) if file else None


def html_page(report_json: Path) -> Path:
    """The report.html beside a report.json; rendered from it (and its sbom.cdx.json) when a report written before
    report.html existed has none."""
    page = report_json.with_name("report.html")
    if not page.is_file():
        bom = report_json.with_name("sbom.cdx.json")
        page.write_text(htmlpage.build_page(json.loads(report_json.read_text()),
                                            json.loads(bom.read_text()) if bom.is_file() else None))
    return page


def markdown(data: dict[str, Any]) -> str:
    size = data.get("image_size_bytes")
    lines = [f"# Build report: {data.get('tag') or data.get('tag_value') or data.get('run_id')}", "",
             f"- status: {data['status']}" + (f" ({data['error']})" if data.get("error") else ""),
             f"- profile: {data['profile']} (pinned {data['pinned']}), arch {data['arch']}, {data['ck_mode']}",
             f"- image: {data.get('image_id')}, size {size / 2**30:.2f} GiB" if size else "- image: none",
             f"- total build time: {data['total_seconds']} s",
             f"- base: {data['base_image']}", f"- lock: {data.get('lock_sha256')}",
             f"- wheels manifest: {data.get('wheels_manifest_digest')}"]
    lines += [f"- offline substitutes: {s}" for s in data.get("offline_substitutes") or []]
    lines += [f"- outside the pins: {data['standin']['outside_the_pins']}"] if data.get("standin") else []
    lines += _src(data.get("src") or [])
    lines += _table("Steps", ("step", "status", "seconds", "detail"),
                    [(s["name"], s["status"], s["seconds"], s["detail"]) for s in data["steps"]])
    lines += _table("Images by key (built or reused)", ("unit", "status", "how", "key", "changed since the last build"),
                    [(u["name"], u["status"], u["how"], u["key"][:16], ", ".join(u["changed"]) or "-")
                     for u in data.get("units") or []])
    lines += ["", "## Sources", ""] + [f"- {n}: {s.get('sha')} ({s.get('describe')}, {s.get('date')})"
                                       for n, s in (data.get("sources") or {}).items() if s]
    lines += ["", "## Versions", ""] + [f"- {k}: {v}" for k, v in ((data.get("versions") or {}).get("packages") or {}).items()]
    lines += ["", "## Patches", ""] + [f"- {p['name']}: {p['outcome']}" for p in (data.get("patches") or {}).get("patches", [])]
    checks = _table("Validation", ("check", "status", "reason"),
                    [(c["name"], c["status"], c.get("reason", "")) for c in (data.get("validation") or {}).get("checks", [])])
    checks[3:3] = [f"- status: {data.get('validation_status') or validation_status(data.get('validation'))}", ""]
    lines += checks
    lines += payload.markdown(data.get("payload"))
    lines += warmcache.markdown(data.get("triton_cache"))
    lines += _route(data.get("route"))
    lines += _smoke(data.get("smoke") or {})
    lines += ["", "## GPU", ""] + [f"- {g}" for g in data.get("gpu") or ["none (CPU steps)"]]
    lines += ["", "## Largest layers", ""] + [f"- {layer['size'] / 2**20:.1f} MiB: {layer['created_by']}"
                                              for layer in data.get("largest_layers", [])]
    return "\n".join(lines) + "\n"


def _route(route: dict[str, Any] | None) -> list[str]:
    if not route:
        return []
    out = ["", "## Route (what a server runs)", "", f"- {route['status']}: {route['reason']}"]
    for m in route["models"]:
        out += _table(f"Route of {m['model']}", ("layer", "ATOM op", "kernels"),
                      [(lr["layer"], lr["op"], ", ".join(lr["kernels"])) for lr in m["layers"]])
    return out


def _src(checkouts: list[dict[str, Any]]) -> list[str]:
    """--src: each checkout, how it was built and every file that differs from the pin."""
    if not checkouts:
        return []
    out = ["", "## Local checkouts (--src): a dev image, labelled dirty, never a release", ""]
    for c in checkouts:
        out.append(f"- {c['component']}: {c['path']} at {c['head'][:12]} (relation to the pin {c['pin'][:12]}: {c['relation']}); "
                   f"route {c['route']}, decided by {', '.join(c['decided_by']) or 'nothing'}; diff {c['diff_hash'][:12]}")
        out += [f"  - {f['status']}: {f['path']}" for f in c["changed"]]
    return out


def _table(title: str, header: tuple[str, ...], rows: list[tuple[object, ...]]) -> list[str]:
    out = ["", f"## {title}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return out + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def _smoke(smoke: dict[str, Any]) -> list[str]:
    result = smoke.get("result") or {}
    out = ["", "## Smoke test", "", f"- status: {smoke.get('status')}", f"- model: {smoke.get('model')}",
           f"- command: {' '.join(smoke.get('command', []))}",
           f"- new tokens: {result.get('new_tokens')} ({result.get('counted_by')})" if result else
           f"- result: {smoke.get('reason')}"]
    out += [f"- proved: {p}" for p in result.get("proved", [])]
    out += [f"- NOT proved: {p}" for p in result.get("not_proved", [])]
    return out
