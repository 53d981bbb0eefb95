"""`invoke audit IMAGE`: every known pitfall checked on an existing image, without rebuilding it.

The probe (validation/audit, standard library only) runs in a throw-away container of the image: no network,
read-only root with a tmpfs /tmp, the repo's validation/ and patches/ mounted read-only, no GPU. The host adds
what only `docker inspect` knows: size, largest layers, environment, labels, build history. With device=True
(a ROCm host) the validation kernels run on the GPU too. Images are never pulled.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from cleanbuild.core import engine
from cleanbuild.core.errors import EnvironmentProblem, StepFailed, UsageError
from cleanbuild.core.outputs import output_folder
from cleanbuild.core.spec import REPO_ROOT, RunSpec, new_run_id
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.images import attest, htmlpage, sbom

if TYPE_CHECKING:
    from docker.client import DockerClient
    from rich.table import Table

    from cleanbuild.gpuhost.gpu import RunOptions

PROBE_ROOT = "/opt/atom-audit"
MODEL_MOUNT = "/opt/atom-audit-model"
OUT = "/out"
PYTHONS = ("python", "python3")  # the image's interpreter: a venv's `python` first, a bare `python3` else
TIMEOUT_S = 600
OK, PRESENT, UNKNOWN = "ok", "PRESENT", "unknown"
WARNING = "warning"  # validation.audit.context.WARNING: act on it (tuned-CSV coverage), exit code unchanged


class Finding(TypedDict):
    """One pitfall checked: the probe's (validation/audit, as JSON) and the host's have the same keys."""

    id: str
    title: str
    status: str  # OK, PRESENT, UNKNOWN, WARNING
    evidence: list[str]
    fix: str


@dataclass(frozen=True)
class Inputs:
    arch: str | None
    model_arg: str | None  # what the probe gets: a preset name or the in-container path
    model_mount: tuple[str, str, str] | None
    tp: tuple[int, ...]


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


def audit(image: str, *, arch: Arch | None, model: str | None, tp: tuple[int | str, ...], report_dir: Path | None,
          device: bool, client: DockerClient | None = None) -> AuditResult:
    """Audit IMAGE as it is: 0 findings PRESENT -> exit_code 0, else 1. Bad input raises before any container."""
    inputs = check_inputs(arch, model, tp)
    if report_dir is not None:
        output_folder(report_dir, "--report")
    start = time.monotonic()
    client = client or engine.client()
    image_ref = engine.image_id(client, image)
    if image_ref is None:
        raise EnvironmentProblem(f"image {image} is not in the local Docker engine (the audit never pulls). "
                                 f"To fix, `docker pull {image}` or build it first.")
    gpu_flags = gpu_kwargs(inputs.arch) if device else {}  # checked before any container starts
    attrs = engine.inspect(client, image)
    run_id = new_run_id()
    with tempfile.TemporaryDirectory(prefix=f"atom-audit-{run_id}-") as tmp:
        out = Path(tmp)
        probe, python = run_probe(client, image, inputs, attrs, out, run_id, want_csv=report_dir is not None)
        dev = {}
        if device:
            spec = device_spec(inputs.arch or probe.get("image_arch"), attrs, out / "device", run_id, python)
            dev = run_device(client, image, spec, gpu_flags, out / "device")
        result = _result(client, image, image_ref, inputs, attrs, probe, python, dev, time.monotonic() - start)
        if report_dir is not None:
            result = write_report(result, report_dir, out / "untuned-gemm.csv")
    return result


def check_inputs(arch: Arch | None, model: str | None, tp: tuple[int | str, ...]) -> Inputs:
    """UsageError (exit 2) for anything wrong with the flags, before the engine is touched (--arch is parsed by
    the task, cleanbuild.request.load.parse_arch)."""
    name = arch.value if arch else None
    try:
        sizes = tuple(int(n) for n in tp)  # invoke hands repeated flags over as strings
    except (TypeError, ValueError):
        sizes = ()
    if not sizes or any(n < 1 for n in sizes):
        raise UsageError(f"--tp must be one or more sizes >= 1, got {sizes or 'none'}. To fix, pass e.g. --tp 1 --tp 8.")
    if model is None:
        return Inputs(name, None, None, sizes)
    path = Path(model).expanduser()
    if path.exists():
        path = path.resolve()
        config = path / "config.json" if path.is_dir() else path
        if not config.is_file():
            raise UsageError(f"--model {model} has no config.json. To fix, pass a Hugging Face model folder or its config.json.")
        # Under its own name: the probe names the model after its folder when config.json has no _name_or_path.
        inside = f"{MODEL_MOUNT}/{path.name}" if path.is_dir() else f"{MODEL_MOUNT}/{path.parent.name}/config.json"
        return Inputs(name, inside, (str(path), inside, "ro"), sizes)
    presets = _presets()
    if model in presets:
        return Inputs(name, model, None, sizes)
    raise UsageError(f"--model {model} is neither an existing path nor a preset. To fix, pass a model folder "
                     f"or one of: {', '.join(presets)}.")


def _presets() -> tuple[str, ...]:
    """validation/models.py's preset names, read with ast (the host does not install or import validation/)."""
    tree = ast.parse((REPO_ROOT / "validation" / "models.py").read_text())
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            continue
        target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
        if isinstance(target, ast.Name) and target.id == "PRESETS" and isinstance(node.value, ast.Dict):
            return tuple(k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return ()


def gpu_kwargs(arch: str | None) -> RunOptions:
    """Device access by number (cleanbuild.gpuhost.gpu): EnvironmentProblem on a host without a usable ROCm GPU."""
    from cleanbuild.gpuhost import gpu

    access = gpu.device_access(arch=arch)
    gpu.check_permissions(access)
    return gpu.run_flags(access)


def probe_spec(inputs: Inputs, attrs: dict[str, Any], out: Path, run_id: str, python: str, want_csv: bool) -> RunSpec:
    """The probe's container: read-only mounts of validation/ and patches/, the output folder, the model."""
    command = [python, "-m", "validation.audit", "--arch", inputs.arch or "auto", "--json-file", f"{OUT}/audit.json"]
    if inputs.model_arg:
        command += ["--model", inputs.model_arg, "--tp", *map(str, inputs.tp)]
        command += ["--untuned-csv", f"{OUT}/untuned-gemm.csv"] if want_csv else []
    mounts = [(str(REPO_ROOT / "validation"), f"{PROBE_ROOT}/validation", "ro"),
              (str(REPO_ROOT / "patches"), f"{PROBE_ROOT}/patches", "ro"), (str(out), OUT, "rw")]
    mounts += [inputs.model_mount] if inputs.model_mount else []
    # The image's own PYTHONPATH stays behind ours: a develop-mode aiter may be found only through it.
    image_path = image_env(attrs).get("PYTHONPATH")
    env = {"PYTHONPATH": f"{PROBE_ROOT}:{image_path}" if image_path else PROBE_ROOT, "PYTHONDONTWRITEBYTECODE": "1"}
    return RunSpec(step="audit", name=f"atom-audit-{run_id}-{python}", command=tuple(command), mounts=tuple(mounts),
                   env=tuple(sorted(env.items())), network="none", workdir=PROBE_ROOT)


def image_env(attrs: dict[str, Any]) -> dict[str, str]:
    pairs = ((attrs.get("Config") or {}).get("Env") or [])
    return dict(p.split("=", 1) if "=" in p else (p, "") for p in pairs)


def run_probe(client: DockerClient, image: str, inputs: Inputs, attrs: dict[str, Any], out: Path, run_id: str, *,
              want_csv: bool) -> tuple[dict[str, Any], str]:
    """Run the probe with the image's `python` (else `python3`) and return its JSON report."""
    for python in PYTHONS:
        spec = probe_spec(inputs, attrs, out, run_id, python, want_csv)
        result = run_sealed(client, image, spec)
        if result is None:
            continue  # no such interpreter in the image: try the next name
        report = out / "audit.json"
        if report.is_file():
            return json.loads(report.read_text()), python
        last = (result.logs.strip().splitlines() or ["no output"])[-1][:200]
        raise StepFailed(f"the audit probe wrote no report in {image} (exit {result.exit_code}): {last}. "
                         "To fix, rerun with --debug and read the probe's output above.")
    raise StepFailed(f"{image} has neither `python` nor `python3` on its PATH. To fix, audit an image with Python 3.10+.")


def run_sealed(client: DockerClient, image: str, spec: RunSpec, timeout_s: float = TIMEOUT_S) -> engine.RunResult | None:
    """engine.run_container, sealed (read-only root, tmpfs /tmp, no entrypoint, no new privileges); None when the
    command's executable is not in the image. The container is removed in any case, Ctrl-C too."""
    try:
        return engine.run_container(client, image, spec, timeout_s=timeout_s, sealed=True)
    except engine.MissingExecutable:
        return None


def device_spec(arch: str | None, attrs: dict[str, Any], out: Path, run_id: str, python: str) -> RunSpec:
    """`python -m validation --device cuda` in the image, validation/ read-only, its report in out."""
    image_path = image_env(attrs).get("PYTHONPATH")
    env = {"PYTHONPATH": f"{PROBE_ROOT}:{image_path}" if image_path else PROBE_ROOT}
    return RunSpec(step="audit-device", name=f"atom-audit-{run_id}-device",
                   command=(python, "-m", "validation", "--arch", arch or "auto", "--device", "cuda",
                            "--json-file", f"{OUT}/validation.json"),
                   mounts=((str(REPO_ROOT / "validation"), f"{PROBE_ROOT}/validation", "ro"), (str(out), OUT, "rw")),
                   env=tuple(env.items()), gpu=True, network="none", workdir=PROBE_ROOT)


def run_device(client: DockerClient, image: str, spec: RunSpec, gpu_flags: RunOptions, out: Path) -> dict[str, Any]:
    """The validation kernels on the GPU; their verdict becomes one finding."""
    result = engine.run_container(client, image, spec, gpu_flags, timeout_s=TIMEOUT_S)
    report = out / "validation.json"
    data = json.loads(report.read_text()) if report.is_file() else {}
    return {"exit_code": result.exit_code, "report": data, "log_tail": result.logs[-2000:]}


def _result(client: DockerClient, image: str, image_ref: str, inputs: Inputs, attrs: dict[str, Any], probe: dict[str, Any],
            python: str, dev: dict[str, Any], seconds: float) -> AuditResult:
    history, largest = engine.history(client, image), engine.largest_layers(client, image)
    findings = [*probe.get("findings", []), *host_findings(attrs, history, inputs.arch, largest),
                supply_chain_finding(image_ref, REPO_ROOT / "reports", pushed_attestations(attrs))]
    if dev:
        findings.append(device_finding(dev))
    return AuditResult(
        image=image, image_id=image_ref, arch=inputs.arch, image_arch=probe.get("image_arch"),
        arch_source=probe.get("arch_source", ""), findings=tuple(findings), versions=probe.get("versions") or {},
        size_bytes=attrs.get("Size"), largest_layers=tuple(largest),
        labels=(attrs.get("Config") or {}).get("Labels") or {}, packages=probe.get("packages") or {},
        seconds=round(seconds, 1), probe_python=python, device={k: v for k, v in dev.items() if k != "log_tail"},
        env={k: "(not shown)" if secret_like(k) else v for k, v in image_env(attrs).items()},
    )


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


def render(result: AuditResult, *, as_json: bool) -> None:
    """The task's output: the whole result as JSON on stdout, or the table for people."""
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
        return
    from cleanbuild.core.console import console

    console.print(table(result, width=console.width))
