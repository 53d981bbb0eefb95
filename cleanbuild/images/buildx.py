"""Builds through the buildx CLI (BuildKit).

Two paths, chosen by what the engine can do (cleanbuild.core.engine.reproducible_builds):
- `--load`: the image ID comes back through --iidfile (Docker 20.10's BuildKit 0.8, the classic image store:
  every build stamps its own times, so the same inputs give another ID);
- reproducible (Docker >= 26 with the containerd image store): SOURCE_DATE_EPOCH and BuildKit's image exporter
  straight into the store (cleanbuild.images.imagestore). Every RUN of the Dockerfiles sets the times of what it
  wrote (docker/scripts/clamp_times.py), so the same inputs give the same manifest digest, here and in a registry
  (`docker push` sends those very bytes).
Their command lines come from cleanbuild.images.buildx_argv; this module runs them and reads what they made.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from cleanbuild.core.errors import BuildFailed, StepFailed, UsageError
from cleanbuild.core.run import quote, run, run_logged
from cleanbuild.core.spec import BuildSpec
from cleanbuild.images import buildx_argv, imagestore
from cleanbuild.images.buildx_argv import cache_flags
from cleanbuild.images.dockerfile import declared_args
from cleanbuild.request.build import Build

Attestations = imagestore.Statements  # image manifest digest -> in-toto statements about it


def build(spec: BuildSpec, options: Build, *, labels: tuple[tuple[str, str], ...] = (),
          build_args: tuple[tuple[str, str], ...] | None = None, show: bool = True, reproducible: bool = False,
          containerd_store: bool = False, attestations: Attestations | None = None) -> str:
    """Build one spec; returns the image ID. build_args replaces the plan's (the patch step builds FROM an ID).
    reproducible: the engine can give the same digest for the same inputs (see the module's docstring);
    containerd_store: the engine's BuildKit can export every stage's cache to the registry (buildx_argv.cache_flags);
    attestations: on the reproducible path, the in-toto statements about the image manifest digest it is given,
    attached to the image (cleanbuild.images.attest); the image ID is then the index's digest."""
    if build_args is not None:
        spec = replace(spec, build_args=build_args)
    check_build_args(spec)
    run_dir = options.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    cache = cache_flags(spec, options, containerd_store=containerd_store) if spec.step in ("wheels", "clean") else ()
    if reproducible:
        return _build_reproducible(spec, options, labels, cache, show, attestations)
    iid = run_dir / f"{spec.step}.iid"
    iid.unlink(missing_ok=True)
    argv = buildx_argv.argv(spec, options, buildx_argv.load(iid), labels=labels, cache=cache)
    _run_build(spec.step, argv, run_dir / f"{spec.step}.log", show)
    return iid.read_text().strip()


def check_build_args(spec: BuildSpec) -> None:
    """A build argument the Dockerfile does not declare is a typo or a stale pin: refuse it."""
    unknown = sorted(k for k, _ in spec.build_args if k not in declared_args(spec.dockerfile))
    if unknown:
        raise UsageError(f"{spec.dockerfile.name} does not consume build argument(s) {', '.join(unknown)}. "
                         "To fix, remove them from the profile or declare them with ARG in the Dockerfile.")


def _build_reproducible(spec: BuildSpec, options: Build, labels: tuple[tuple[str, str], ...],
                        cache: tuple[str, ...], show: bool, attestations: Attestations | None) -> str:
    """Build into the image store, attach the attestations when given, and return the manifest digest (or, with
    attestations, the index digest): the ID the containerd store gives it.
    The image is named after it is stored (`docker tag` of the exporter's dangling image, or the attestations'
    `docker load`): a name the exporter gives is dated SOURCE_DATE_EPOCH, and the engine's LastTagTime, which
    says which build of a unit was here last (engine.last_inputs), is its names' newest date."""
    metadata = options.run_dir / f"{spec.step}.metadata.json"
    metadata.unlink(missing_ok=True)
    argv = buildx_argv.argv(spec, options, buildx_argv.image_store(metadata), labels=labels, cache=cache,
                            tagged=attestations is not None)
    _run_build(spec.step, argv, options.run_dir / f"{spec.step}.log", show)
    exp = imagestore.exported(metadata)
    digest = str(exp.image["digest"])
    if attestations is not None:
        digest = imagestore.attach(exp, attestations, options.run_dir / f"{spec.step}.load.log")
    else:
        run(["docker", "tag", digest, spec.image], capture=True, echo=False)
    return _stored_as(spec.image, digest)


def _stored_as(image: str, digest: str) -> str:
    """digest, once the engine says image is stored as that manifest (the containerd store's image ID)."""
    stored = run(["docker", "image", "inspect", "--format", "{{.Id}}", image], capture=True, echo=False).stdout.strip()
    if stored != digest:
        raise BuildFailed(f"{image} is stored as {stored}, not as its exported manifest {digest}. To fix, "
                          "enable the containerd image store (features.containerd-snapshotter in daemon.json).")
    return digest


def build_here(dockerfile: Path, context: Path, image: str, labels: tuple[tuple[str, str], ...], log: Path, *,
               reproducible: bool) -> str:
    """An image that reads only its context, built on the engine's own BuildKit (buildx_argv.own_engine) and named
    image; returns its ID. reproducible: as build's, straight into the containerd store with SOURCE_DATE_EPOCH (the
    same context gives the same ID), else --load."""
    log.parent.mkdir(parents=True, exist_ok=True)
    if not reproducible:
        iid = log.with_name(f"{log.stem}.iid")
        iid.unlink(missing_ok=True)
        argv = buildx_argv.own_engine(dockerfile, context, (*buildx_argv.load(iid), "-t", image), labels=labels)
        _run_build(image, argv, log, False)
        return iid.read_text().strip()
    metadata = log.with_name(f"{log.stem}.metadata.json")
    metadata.unlink(missing_ok=True)
    _run_build(image, buildx_argv.own_engine(dockerfile, context, buildx_argv.image_store(metadata), labels=labels),
               log, False)
    digest = str(imagestore.exported(metadata).image["digest"])
    run(["docker", "tag", digest, image], capture=True, echo=False)
    return _stored_as(image, digest)


def _run_build(what: str, argv: list[str], log: Path, show: bool) -> None:
    code = run_logged(argv, log, show=show)
    if code != 0:
        raise BuildFailed(f"the {what} build failed (exit {code}): {last_error(log)}. Full log: {log}")


def last_error(log: Path) -> str:
    """The most telling line of a failed BuildKit log: its last own error line, else the last non-empty one."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    ours = [line for line in lines if ": error:" in line or "To fix" in line]
    errors = [line for line in lines if "ERROR" in line or "error:" in line.lower()]
    pick = (ours or errors or lines or ["no output"])[-1]
    return pick[:400]


def export(spec: BuildSpec, options: Build, dest: Path) -> Path:
    """The wheels and manifest into dest, all or nothing: BuildKit writes a temporary folder next to dest, every
    wheel is checked against the manifest's sha256, then the folder is renamed into place. An interrupted export
    leaves no wheel under its final name."""
    dest = dest.resolve()
    if dest.exists() and any(dest.iterdir()):
        raise UsageError(f"--export {dest} exists and is not empty. To fix, pass a new folder.")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.partial-"))
    try:
        argv = buildx_argv.argv(spec, options, buildx_argv.local(tmp), tagged=False)
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


def describe(spec: BuildSpec, options: Build) -> str:
    return quote(buildx_argv.argv(spec, options, buildx_argv.load()))
