"""Builds through the buildx CLI (BuildKit); the image ID comes back through --iidfile."""

from __future__ import annotations

from pathlib import Path

from .errors import BuildFailed
from .plan import BuildSpec, Options, check_build_args
from .run import run_logged


def build(spec: BuildSpec, options: Options, *, extra_labels: tuple[tuple[str, str], ...] = (),
          build_args: tuple[tuple[str, str], ...] | None = None, show: bool = True) -> str:
    """Build one spec; returns the image ID. build_args replaces the plan's (the patch step builds FROM an ID)."""
    if build_args is not None:
        spec = BuildSpec(spec.step, spec.dockerfile, spec.context, spec.target, build_args, spec.image, spec.labels)
    check_build_args(spec)
    run_dir = options.run_dir
    iid = run_dir / f"{spec.step}.iid"
    iid.unlink(missing_ok=True)
    argv = spec.argv(builder=options.builder, progress=options.progress, ca_bundle=options.ca_bundle,
                     iidfile=iid, metadata_file=run_dir / f"{spec.step}.metadata.json", extra_labels=extra_labels)
    log = run_dir / f"{spec.step}.log"
    code = run_logged(argv, log, show=show)
    if code != 0:
        raise BuildFailed(f"the {spec.step} build failed (exit {code}): {_last_error(log)}. Full log: {log}")
    return Path(iid).read_text().strip()


def _last_error(log: Path) -> str:
    """The most telling line of a failed BuildKit log: its ERROR line, else the last non-empty one."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "ERROR" in line or "error:" in line.lower()]
    pick = (errors or lines or ["no output"])[-1]
    return pick[:300]
