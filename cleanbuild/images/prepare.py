"""The prepare step: make what the plan's Prepare names. Runs after preflight, logged like every step.

- The wheels build context: docker/scripts, lock/{build,deps,sdists,aiter-build}.txt (requirement blocks of the
  profile's lock files, never their header: cleanbuild.images.plan.lock_texts), local/<component>/
  (wheels the profile takes from this machine, fetched with pip) and local/repos/<component>.git (copies of local
  repositories: the offline profile's ../shared/upstream). Built in a temporary folder and renamed into place, so
  an interrupted prepare never leaves a half context that a later build would trust.
- The stand-in base image (offline profile): mmdebstrap of the profile's [standin] with a fixed SOURCE_DATE_EPOCH,
  added FROM scratch by BuildKit (cleanbuild.images.standin): the same Debian archive gives the same image ID.
One preparer at a time per cache folder (a file lock): two builds started together wait for each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cleanbuild.core import engine
from cleanbuild.core.errors import StepFailed
from cleanbuild.core.run import CommandFailed, run
from cleanbuild.core.spec import DOCKER_DIR, EngineFacts
from cleanbuild.images import standin
from cleanbuild.images.plan import CLEAN_ONLY_SCRIPTS, Plan, Prepare, standin_image
from cleanbuild.upstream import wheelindex


@contextlib.contextmanager
def _locked(cache_dir: Path) -> Iterator[None]:
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / ".prepare.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare(plan: Plan, image_exists: Callable[[str], bool], facts: EngineFacts | None = None) -> dict[str, Any]:
    """Make the context (and the stand-in base); returns what was made or found, for the record and the report.
    facts: the engine's (preflight's), which says how the stand-in is built."""
    if plan.prepare.lock_problem:
        raise StepFailed(plan.prepare.lock_problem)
    with _locked(plan.options.request.cache_dir):
        made: dict[str, Any] = {"context": str(plan.prepare.context), "context_reused": plan.prepare.context.is_dir()}
        if not made["context_reused"]:
            build_context(plan.prepare, python=plan.profile.python, ca_bundle=plan.options.request.ca_bundle)
        if plan.prepare.standin:
            cache = plan.options.request.cache_dir
            base = ensure_standin(plan.prepare, cache, image_exists, facts)
            made.update(standin=base, standin_archive=standin.record(standin.folder(cache, base)))
        return made


def build_context(prep: Prepare, *, python: str, ca_bundle: Path | None = None) -> None:
    prep.context.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=prep.context.parent, prefix=f".{prep.context.name}."))
    try:
        # Only what the wheel stages run: the builder image holds exactly the scripts its key covers.
        shutil.copytree(DOCKER_DIR / "scripts", tmp / "docker" / "scripts",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", *CLEAN_ONLY_SCRIPTS))
        (tmp / "lock").mkdir()
        for name, text in prep.lock_texts:
            (tmp / "lock" / name).write_text(text)
        (tmp / "local" / "repos").mkdir(parents=True)
        for component, requirement, where in prep.local_wheels:
            _fetch_wheel(requirement, where, tmp / "local" / component, python, ca_bundle)
        for component, repo in prep.repos:
            _copy_repo(repo, tmp / "local" / "repos" / f"{component}.git")
        (tmp / "PREPARED.json").write_text(json.dumps({"key": prep.key}, indent=1) + "\n")
        tmp.rename(prep.context)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _fetch_wheel(requirement: str, where: str, dest: Path, python: str, ca_bundle: Path | None) -> None:
    """One wheel for the base's Python from where (an index URL or a folder) and nowhere else: pip reads none of
    this machine's pip configuration, files or PIP_* variables (a find-links folder there must not be what makes a
    build work; --isolated alone still reads /etc/pip.conf)."""
    dest.mkdir(parents=True)
    argv = [sys.executable, "-m", "pip", "download", "--isolated", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
            "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64",
            *(["--cert", str(ca_bundle)] if ca_bundle else []), *wheelindex.pip_source(where), "-d", str(dest),
            requirement]
    try:
        run(argv, capture=True, env={"PIP_CONFIG_FILE": os.devnull})
    except CommandFailed as exc:
        why = (exc.result.stderr.strip().splitlines() or ["pip found no such wheel"])[-1].removeprefix("ERROR: ")
        raise StepFailed(f"fetching {requirement} for Python {python} from {where} failed because {why}. To fix, set "
                         f"{wheelindex.ENV} to a copy of that index or a folder holding the wheel "
                         f"({requirement.replace('==', '-')}-cp{python.replace('.', '')}-...whl).") from None


def _copy_repo(repo: Path, dest: Path) -> None:
    if not (repo / "HEAD").exists() and not (repo / ".git").exists():
        raise StepFailed(f"{repo} is not a git repository. To fix, point the component's repo at a clone or a URL.")
    shutil.copytree(repo, dest, symlinks=True)
    for folder in (dest, *dest.rglob("*")):
        with contextlib.suppress(OSError):
            folder.chmod(folder.stat().st_mode | 0o200)  # a read-only source must not make the copy unremovable


def ensure_standin(prep: Prepare, cache_dir: Path, image_exists: Callable[[str], bool],
                   facts: EngineFacts | None = None) -> str:
    """The stand-in base, named by its key: found here, or made reproducibly (cleanbuild.images.standin) from the
    tar in the cache, or from a new one. facts: the engine's, from preflight; asked here when not given."""
    spec = prep.standin
    if spec is None:
        raise ValueError("the profile's base is not a stand-in")
    image = standin_image(spec)
    if image_exists(image):
        return image
    where = standin.folder(cache_dir, image)
    made = standin.record(where) or standin.make(spec, where)
    facts = facts or engine.preflight(engine.client(), 0.0)
    # Built on the engine's own BuildKit whatever --builder says (its image is every build's FROM, here).
    standin.build(spec, where, image, made,
                  reproducible=engine.reproducible_builds(facts.version, facts.containerd_store, None))
    return image
