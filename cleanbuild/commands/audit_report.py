"""What `invoke audit` found and how it is told (cleanbuild.commands.audit_image runs the probe): the findings the
host adds to the probe's (size, secret-like names, labels, SBOM and provenance, the GPU run), the result, its
report folder (report.json, report.md, report.html: build-clean's layout) and the table for people.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from cleanbuild.images import attest, htmlpage, sbom

if TYPE_CHECKING:
    from rich.table import Table

OK, PRESENT, UNKNOWN = "ok", "PRESENT", "unknown"
WARNING = "warning"  # validation.probes.image.WARNING: act on it (tuned-CSV coverage), exit code unchanged


class Finding(TypedDict):
    """One pitfall checked: the probe's (validation/probes, as JSON) and the host's have the same keys."""

    id: str
    title: str
    status: str  # OK, PRESENT, UNKNOWN, WARNING
    evidence: list[str]
    fix: str


@dataclass(frozen=True)
class AuditResult:
    image: str
    image_id: str
    arch: str | None  # asked for (None: the image's own)
    image_arch: str | None  # what the audit checked against, and why
    arch_source: str
    findings: tuple[Finding, ...]
    versions: dict[str, Any]
    size_bytes: int | None
    largest_layers: tuple[dict[str, Any], ...]  # {"size", "created_by"}, largest first
    labels: dict[str, str]
    packages: dict[str, Any]
    seconds: float
    untuned_csv: Path | None = None
    report_dir: Path | None = None
    probe_python: str = ""
    device: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # the image's Config.Env; secret-like values replaced

    @property
    def present(self) -> list[Finding]:
        return [f for f in self.findings if f["status"] == PRESENT]

    @property
    def exit_code(self) -> int:
        return 1 if self.present else 0

    def counts(self) -> dict[str, int]:
        return {s: sum(f["status"] == s for f in self.findings) for s in (PRESENT, WARNING, UNKNOWN, OK)}

    def to_json(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        data.update(findings=list(self.findings), largest_layers=list(self.largest_layers),
                    counts=self.counts(), exit_code=self.exit_code)
        plain: dict[str, Any] = json.loads(json.dumps(data, default=str))
        return plain


def image_env(attrs: dict[str, Any]) -> dict[str, str]:
    pairs = ((attrs.get("Config") or {}).get("Env") or [])
    return dict(p.split("=", 1) if "=" in p else (p, "") for p in pairs)


def _finding(id_: str, title: str, status: str, evidence: list[str], fix: str = "") -> Finding:
    return {"id": id_, "title": title, "status": status, "evidence": evidence, "fix": fix}


# A name is secret-like when one of its _-separated words is one of these (HF_TOKEN, DB_PASSWORD, AWS_SECRET_...).
SECRET_WORDS = {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY", "AUTH"}
SECRET_PAIRS = ("API_KEY", "ACCESS_KEY", "PRIVATE_KEY", "SECRET_KEY")
# `NAME=value` (build args before a RUN, ENV) or a bare `ARG NAME`.
NAME_IN_HISTORY = re.compile(r"(?:^|[\s|;&])(?:(?:ARG|ENV)\s+([A-Za-z_]\w*)|([A-Za-z_]\w*)=)")


def secret_like(name: str) -> bool:
    upper = name.upper()
    return bool(SECRET_WORDS & set(upper.split("_"))) or any(p in upper for p in SECRET_PAIRS)


def host_findings(attrs: dict[str, Any], history: list[dict[str, Any]], arch: str | None,
                  largest: list[dict[str, Any]]) -> list[Finding]:
    return [size_finding(attrs, history, largest), config_secrets(attrs, history), labels_finding(attrs, arch)]


def size_finding(attrs: dict[str, Any], history: list[dict[str, Any]], largest: list[dict[str, Any]]) -> Finding:
    size = attrs.get("Size") or 0
    evidence = [f"{size / 2**30:.2f} GiB in {sum(1 for h in history if h.get('Size'))} non-empty layers"]
    evidence += [f"{layer['size'] / 2**20:.0f} MiB: {layer['created_by'][:90] or '(imported, no command)'}"
                 for layer in largest[:3]]
    return _finding("image-size", "image size and largest layers (information)", OK, evidence,
                    "keep caches, compilers and build inputs out of runtime layers")


def config_secrets(attrs: dict[str, Any], history: list[dict[str, Any]]) -> Finding:
    """Secret-like names in the image's Env and in its build history (build args land there); never values."""
    evidence = [f"Config.Env sets {name} (value not shown)" for name in sorted(image_env(attrs)) if secret_like(name)]
    for index, entry in enumerate(reversed(history)):
        created = entry.get("CreatedBy") or ""
        found = {m.group(1) or m.group(2) for m in NAME_IN_HISTORY.finditer(created)}
        names = sorted(n for n in found if secret_like(n))
        if names:
            verb = (created.split() or ["?"])[0] if not created.startswith("|") else "RUN"
            evidence.append(f"layer {index} ({verb}) names build arg {', '.join(names)} (value not shown)")
    status = PRESENT if evidence else OK
    return _finding("config-secrets", "no secret-like env or build args in the image config and history", status,
                    evidence or ["none in Config.Env or the layers' history"],
                    "pass credentials with `--secret id=...` (RUN --mount=type=secret), never ARG or ENV")


def labels_finding(attrs: dict[str, Any], arch: str | None) -> Finding:
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    ours = {k: v for k, v in labels.items() if k.startswith("io.atom-build.")}
    evidence = [", ".join(f"{k}={v}" for k, v in sorted(ours.items()))] if ours else [
        f"no io.atom-build.* labels: not built by this repo ({len(labels)} other labels)"]
    status = OK
    if arch and ours.get("io.atom-build.arch") not in (None, arch):
        status = PRESENT
        evidence.append(f"label io.atom-build.arch={ours['io.atom-build.arch']} but --arch {arch}")
    return _finding("labels", "image labels agree with the arch", status, evidence,
                    "audit with the arch the image was built for, or rebuild it for this one")


SUPPLY_CHAIN = ("sbom.cdx.json", "provenance.json")
ATTESTED = (sbom.SBOM, sbom.PROVENANCE)


def pushed_attestations(attrs: dict[str, Any]) -> tuple[str, list[str]] | None:
    """(RepoDigest, the predicate types its registry lists) for the first pushed name the registry answers for."""
    for ref in attrs.get("RepoDigests") or []:
        types = attest.in_registry(ref)
        if types is not None:
            return ref, types
    return None


def supply_chain_finding(image_id: str, reports: Path, pushed: tuple[str, list[str]] | None = None) -> Finding:
    """Does the image come with an SBOM and provenance? Read from the registry for a pushed image (the attestation
    manifest in its index, cleanbuild.images.attest), else from the report folder build-clean wrote for this image
    ID: its sbom.cdx.json and provenance.json, and whether the build attached both to the image."""
    title = "SBOM and provenance (information)"
    if pushed is not None and all(t in pushed[1] for t in ATTESTED):
        return _finding("sbom", title, OK, [f"{pushed[0]} carries attestations {', '.join(pushed[1])}"])
    for report in sorted(reports.glob("*/*/report.json")):
        try:
            data = json.loads(report.read_text())
        except (OSError, ValueError):
            continue
        present = [str(report.parent / name) for name in SUPPLY_CHAIN if (report.parent / name).is_file()]
        if data.get("image_id") == image_id and len(present) == len(SUPPLY_CHAIN):
            attached = data.get("attestations") or []
            where = (f"attached to the image: {', '.join(attached)}" if attached else
                     "not attached to the image (its engine builds no reproducible OCI export)")
            return _finding("sbom", title, OK, [*present, where])
    pushed_note = [f"{pushed[0]} carries {', '.join(pushed[1]) or 'no attestation'}"] if pushed else []
    return _finding("sbom", title, UNKNOWN,
                    [*pushed_note, f"no build report under {reports} names {image_id[:19]} with "
                     f"{' and '.join(SUPPLY_CHAIN)}"], "build it with invoke build-clean (its report folder holds both)")


def device_finding(dev: dict[str, Any]) -> Finding:
    checks = (dev.get("report") or {}).get("checks", [])
    failed = [f"{c['name']}: {c.get('reason', '')}"[:120] for c in checks if c.get("status") == "failed"]
    code = dev.get("exit_code")
    status = OK if code == 0 else PRESENT if code == 1 and failed else UNKNOWN
    evidence = failed or [f"python -m validation --device cuda: exit {code}, {len(checks)} checks"]
    return _finding("device-validation", "validation kernels pass on the GPU", status, evidence,
                    "see the validation report; rebuild with invoke build-clean for this arch")


def write_report(result: AuditResult, folder: Path, untuned: Path) -> AuditResult:
    """report.json, report.md, report.html (build-clean's layout) and, with --model, the untuned-GEMM CSV of the gaps."""
    folder.mkdir(parents=True, exist_ok=True)
    csv = None
    if untuned.is_file():
        csv = folder / "untuned-gemm.csv"
        shutil.copyfile(untuned, csv)
    result = replace(result, report_dir=folder, untuned_csv=csv)
    data = result.to_json()
    (folder / "report.json").write_text(json.dumps(data, indent=2) + "\n")
    (folder / "report.md").write_text(markdown(data))
    (folder / "report.html").write_text(htmlpage.audit_page(data))
    return result


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(data: dict[str, Any]) -> str:
    counts = data["counts"]
    size = data.get("size_bytes")
    lines = [f"# Audit report: {data['image']}", ""]
    lines += [
        f"- image: {data['image_id']}, size {size / 2**30:.2f} GiB" if size else f"- image: {data['image_id']}",
        f"- arch: {data.get('image_arch') or 'unknown'} ({data.get('arch_source')})",
        f"- result: {counts['PRESENT']} PRESENT, {counts.get(WARNING, 0)} warning, {counts['unknown']} unknown, "
        f"{counts['ok']} ok (exit {data['exit_code']})",
        f"- audit time: {data['seconds']} s",
        f"- untuned GEMM CSV: {data.get('untuned_csv')}" if data.get("untuned_csv") else "- untuned GEMM CSV: none",
        "", "## Findings", "", "| pitfall | status | evidence | fix |", "| --- | --- | --- | --- |",
    ]
    for f in data["findings"]:
        fix = f["fix"] if f["status"] != "ok" else ""
        lines.append(f"| {_cell(f['id'])} | {f['status']} | {_cell('; '.join(f['evidence']))} | {_cell(fix)} |")
    lines += ["", "## Versions", ""] + [f"- {k}: {v}" for k, v in (data.get("versions") or {}).items()]
    lines += ["", "## Environment", ""] + [f"- {k}={v}" for k, v in sorted((data.get("env") or {}).items())]
    lines += ["", "## Packages", ""] + [f"- {k}: {v['path']} ({v['dist'] or 'no distribution'}, found by {v['how']})"
                                         if v else f"- {k}: not found" for k, v in (data.get("packages") or {}).items()]
    lines += ["", "## Largest layers", ""] + [f"- {layer['size'] / 2**20:.1f} MiB: {layer['created_by']}"
                                              for layer in data.get("largest_layers", [])]
    return "\n".join(lines) + "\n"


STYLE = {PRESENT: "bold red", WARNING: "magenta", UNKNOWN: "yellow", OK: "green"}


def table(result: AuditResult, width: int = 120) -> Table:
    """One screen of `width` columns: a row per pitfall, its status and the first piece of its evidence."""
    from rich.table import Table

    counts = result.counts()
    title = f"audit of {result.image} ({result.image_id.removeprefix('sha256:')[:12]}), arch {result.image_arch or 'unknown'}"
    caption = (f"{counts[PRESENT]} PRESENT, {counts[WARNING]} warning, {counts[UNKNOWN]} unknown, {counts[OK]} ok "
               f"-> exit {result.exit_code}"
               + (f"; report: {result.report_dir}" if result.report_dir else ""))
    out = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    id_width = max(len(f["id"]) for f in result.findings)
    room = max(20, width - id_width - 7 - 10)  # borders and padding of three columns take 10
    out.add_column("pitfall", no_wrap=True)
    out.add_column("status", no_wrap=True, min_width=7)
    out.add_column("evidence", no_wrap=True)
    for f in result.findings:
        out.add_row(f["id"], f"[{STYLE.get(f['status'], '')}]{f['status']}[/]", _summary(f["evidence"], room))
    return out


def _summary(evidence: list[str], room: int) -> str:
    more = f" (+{len(evidence) - 1})" if len(evidence) > 1 else ""
    first = evidence[0] if evidence else ""
    if len(first) + len(more) > room:
        first = first[: room - len(more) - 1] + "…"
    return first + more
