"""`invoke audit IMAGE`: every known pitfall checked on an existing image, without rebuilding it.

The probe (validation/audit.py and validation/probes, standard library only) runs in a throw-away container of the
image: no network, read-only root with a tmpfs /tmp, the repo's validation/ and patches/ mounted read-only, no GPU.
The host adds what only `docker inspect` knows: size, largest layers, environment, labels, build history. With
device=True (a ROCm host) the validation kernels run on the GPU too. Images are never pulled. What was found, and
how it is written and shown: cleanbuild.commands.audit_report.
"""

from __future__ import annotations

import ast
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cleanbuild.commands.audit_report import (
    AuditResult,
    device_finding,
    host_findings,
    image_env,
    pushed_attestations,
    secret_like,
    supply_chain_finding,
    table,
    write_report,
)
from cleanbuild.core import engine
from cleanbuild.core.errors import EnvironmentProblem, StepFailed, UsageError
from cleanbuild.core.outputs import output_folder
from cleanbuild.core.spec import REPO_ROOT, RunSpec, new_run_id
from cleanbuild.gpuhost.arch import Arch

if TYPE_CHECKING:
    from docker.client import DockerClient

    from cleanbuild.gpuhost.gpu import RunOptions

PROBE_ROOT = "/opt/atom-audit"
MODEL_MOUNT = "/opt/atom-audit-model"
OUT = "/out"
PYTHONS = ("python", "python3")  # the image's interpreter: a venv's `python` first, a bare `python3` else
TIMEOUT_S = 600


@dataclass(frozen=True)
class Inputs:
    arch: str | None
    model_arg: str | None  # what the probe gets: a preset name or the in-container path
    model_mount: tuple[str, str, str] | None
    tp: tuple[int, ...]


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
    """validation/core/models.py's preset names, read with ast (the host does not install or import validation/)."""
    tree = ast.parse((REPO_ROOT / "validation" / "core" / "models.py").read_text())
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


def render(result: AuditResult, *, as_json: bool) -> None:
    """The task's output: the whole result as JSON on stdout, or the table for people."""
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
        return
    from cleanbuild.core.console import console

    console.print(table(result, width=console.width))
