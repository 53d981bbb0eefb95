"""Builds through the buildx CLI (BuildKit); the image ID comes back through --iidfile."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from .errors import BuildFailed, StepFailed, UsageError
from .plan import BuildSpec, Options, cache_flags, check_build_args
from .run import quote, run_logged


def build(spec: BuildSpec, options: Options, *, labels: tuple[tuple[str, str], ...] = (),
          build_args: tuple[tuple[str, str], ...] | None = None, show: bool = True) -> str:
    """Build one spec; returns the image ID. build_args replaces the plan's (the patch step builds FROM an ID)."""
    if build_args is not None:
        spec = replace(spec, build_args=build_args)
    check_build_args(spec)
    run_dir = options.run_dir
    iid = run_dir / f"{spec.step}.iid"
    iid.parent.mkdir(parents=True, exist_ok=True)
    iid.unlink(missing_ok=True)
    argv = spec.argv(builder=options.builder, progress=options.progress, ca_bundle=options.ca_bundle, iidfile=iid,
                     labels=labels, cache=cache_flags(spec, options) if spec.step in ("wheels", "clean") else ())
    log = run_dir / f"{spec.step}.log"
    code = run_logged(argv, log, show=show)
    if code != 0:
        raise BuildFailed(f"the {spec.step} build failed (exit {code}): {last_error(log)}. Full log: {log}")
    return iid.read_text().strip()


def last_error(log: Path) -> str:
    """The most telling line of a failed BuildKit log: its last own error line, else the last non-empty one."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    ours = [line for line in lines if ": error:" in line or "To fix" in line]
    errors = [line for line in lines if "ERROR" in line or "error:" in line.lower()]
    pick = (ours or errors or lines or ["no output"])[-1]
    return pick[:400]


def export(spec: BuildSpec, options: Options, dest: Path) -> Path:
    """The wheels and manifest into dest, all or nothing: BuildKit writes a temporary folder next to dest, every
    wheel is checked against the manifest's sha256, then the folder is renamed into place. An interrupted export
    leaves no wheel under its final name."""
    dest = dest.resolve()
    if dest.exists() and any(dest.iterdir()):
        raise UsageError(f"--export {dest} exists and is not empty. To fix, pass a new folder.")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.partial-"))
    try:
        argv = spec.argv(builder=options.builder, progress=options.progress, ca_bundle=options.ca_bundle, load=False)
        at = argv.index("-t")
        argv = [*argv[:at], "--output", f"type=local,dest={tmp}", argv[-1]]
        code = run_logged(argv, options.run_dir / "export.log")
        if code != 0:
            raise BuildFailed(f"the export build failed (exit {code}); log {options.run_dir / 'export.log'}")
        verify_export(tmp / "wheels")
        if dest.exists():
            dest.rmdir()
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def verify_export(folder: Path) -> int:
    manifest = json.loads((folder / "manifest.json").read_text())
    for wheel in manifest["wheels"]:
        path = folder / wheel.get("layer", "common") / wheel["filename"]
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != wheel["sha256"]:
            raise StepFailed(f"exported {path.name} is missing or does not match the manifest's sha256.")
    return len(manifest["wheels"])


def describe(spec: BuildSpec, options: Options) -> str:
    return quote(spec.argv(builder=options.builder, progress=options.progress, ca_bundle=options.ca_bundle))
