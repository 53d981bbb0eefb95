"""What a clean runtime image must not carry: broken requirements, two owners of one file, CUDA packages,
installer caches, secrets. Secrets are reported by path only; their contents are never read out or stored.
"""

from __future__ import annotations

import os
import subprocess

from validation.probes import pyenv, reqs
from validation.probes.image import OK, PRESENT, Finding, Image

SHOW = 6
PIP_TIMEOUT_S = 120


def requirement_problems(ctx: Image) -> tuple[list[str], list[str]]:
    """pip check's two kinds of problems from Requires-Dist alone, plus requirements that could not be read."""
    installed = {key: dists[0] for key, dists in pyenv.by_name(ctx).items()}
    env = reqs.marker_environment()
    problems, unparsed = [], []
    for dist in installed.values():
        for text in dist.requires:
            try:
                problem = _problem(dist, reqs.parse_requirement(text), installed, env)
            except ValueError as exc:
                unparsed.append(f"{dist.label}: {text!r} ({exc})")
                continue
            if problem:
                problems.append(problem)
    return sorted(set(problems)), unparsed


def _problem(dist: pyenv.Dist, req: reqs.Requirement, installed: dict, env: dict) -> str | None:
    if req.marker and not reqs.evaluate_marker(req.marker, env):
        return None
    have = installed.get(pyenv.normalize(req.name))
    if have is None:
        return f"{dist.label} requires {req.name}, which is not installed"
    if not all(reqs.contains(op, value, have.version) for op, value in req.specifiers):
        spec = ",".join(op + value for op, value in req.specifiers)
        return f"{dist.label} has requirement {req.name}{spec}, but you have {have.label}"
    return None


def pip_check(ctx: Image) -> Finding:
    f = Finding("pip-check", "installed requirements are consistent (pip check)", OK,
                fix="install the missing or mismatched requirements from the same wheel set, then rerun pip check")
    problems, unparsed = requirement_problems(ctx)
    f.evidence.append(f"Requires-Dist of {len(pyenv.distributions(ctx))} distributions (markers evaluated, extras off): "
                      f"{len(problems)} problems" + (f", {len(unparsed)} unreadable" if unparsed else ""))
    f.evidence += problems[:SHOW] + unparsed[:2]
    pip = _run_pip_check(ctx)
    f.evidence.append(pip[1])
    if problems or pip[0] is False:
        f.status = PRESENT
    return f


def _run_pip_check(ctx: Image) -> tuple[bool | None, str]:
    """(passed, summary) of `python -m pip check`; (None, why) when pip is absent or not run."""
    if ctx.python is None:
        return None, "python -m pip check: not run (no interpreter for this context)"
    if pyenv.locate(ctx, "pip") is None:
        return None, "python -m pip check: pip is not in this image (metadata check only)"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1", "PIP_NO_INPUT": "1"}
    try:
        proc = subprocess.run([ctx.python, "-m", "pip", "check"], capture_output=True, text=True,  # noqa: S603
                              timeout=PIP_TIMEOUT_S, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"python -m pip check: could not run ({type(exc).__name__})"
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    shown = "; ".join(lines[:SHOW]) or "no output"
    return proc.returncode == 0, f"python -m pip check: exit {proc.returncode}: {shown}"


def duplicate_distributions(ctx: Image) -> Finding:
    f = Finding("duplicate-dists", "no two distributions own one module or file", OK,
                fix="uninstall all but one of them (e.g. keep ROCm's triton), then reinstall that one")
    clashes: dict[tuple[str, ...], list[str]] = {}
    for path, dists in pyenv.owners(ctx).items():
        if len({d.meta_dir for d in dists}) > 1:
            rel = os.path.relpath(path, dists[0].base)
            top = rel.split(os.sep, 1)[0] if not rel.startswith("..") else "/".join(path.split(os.sep)[-2:])
            clashes.setdefault(tuple(sorted(d.label for d in dists)), []).append(top)
    for labels, tops in sorted(clashes.items()):
        names = sorted(set(tops))
        f.evidence.append(f"{' and '.join(labels)} both own {len(tops)} files, under {', '.join(t + '/' if '.' not in t else t for t in names[:3])}")
    for key, dists in sorted(pyenv.by_name(ctx).items()):
        if len(dists) > 1:
            where = "; ".join(f"{d.label} in {ctx.shown(d.base)}" for d in dists)
            f.evidence.append(f"{key} installed {len(dists)} times: {where} (the first is the one imported)")
    f.status = PRESENT if f.evidence else OK
    if not f.evidence:
        f.evidence.append(f"{len(pyenv.distributions(ctx))} distributions, no shared file in their RECORDs")
    return f


def nvidia_packages(ctx: Image) -> Finding:
    f = Finding("nvidia-packages", "no CUDA (nvidia-*) packages or CUDA torch in a ROCm image", OK,
                fix="install torch from the ROCm wheel index, with the wheels manifest as constraints (no nvidia-*)")
    found = [d.label for d in pyenv.distributions(ctx) if d.key.startswith("nvidia-")]
    if found:
        f.status = PRESENT
        f.evidence.append(f"{len(found)} nvidia-* distributions: {', '.join(found[:SHOW])}")
    torch = pyenv.torch_build(ctx)
    if torch.get("cuda") and not torch.get("hip"):
        f.status = PRESENT
        f.evidence.append(f"torch {torch.get('__version__')} is a CUDA {torch['cuda']} build ({torch['path']}/version.py)")
    elif torch:
        f.evidence.append(f"torch {torch.get('__version__')}: hip={torch.get('hip')}, cuda={torch.get('cuda')}")
    if not f.evidence:
        f.evidence.append("none")
    return f
