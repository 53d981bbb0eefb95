"""Nox sessions: tests (the everyday tier; tests_serial, the same in one process), integration (real engine, builds),
lint, typecheck, validate, upstream."""

from __future__ import annotations

import locale
import os
import sys
from pathlib import Path

import nox
from packaging.requirements import Requirement

nox.needs_version = ">=2025.2.9"
nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.error_on_missing_interpreters = True
nox.options.reuse_existing_virtualenvs = True

PYPROJECT = nox.project.load_toml("pyproject.toml")


# The CPU torch the validation group pins (torch==X+cpu) lives on PyTorch's CPU index, not on PyPI (whose torch of the
# same number is the CUDA build). One override, for a mirror of that index or a folder holding the wheel; the offline
# profile's prepare step reads the same variable (cleanbuild.upstream.wheelindex).
TORCH_INDEX_ENV = "ATOM_BUILD_TORCH_INDEX"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def _install(session: nox.Session, *groups: str) -> None:
    requirements = nox.project.dependency_groups(PYPROJECT, *groups)
    for requirement in requirements:
        if Requirement(requirement).name == "torch":
            _install_torch(session, requirement)
    session.install("-e", ".", *requirements)


def _utf8_where_the_path_needs_it() -> None:
    """The editable install's .pth holds this checkout's path, and both setuptools (writing it) and site.py (reading
    it at every start) use the locale's own encoding, not UTF-8 mode's: under LC_ALL=C a path with a letter outside
    ASCII breaks every Python the sessions start. Then C.UTF-8 (glibc 2.35+), the C locale with UTF-8 text."""
    try:
        str(Path.cwd()).encode(locale.getencoding())
    except UnicodeEncodeError:
        os.environ["LC_ALL"] = "C.UTF-8"


_utf8_where_the_path_needs_it()


def torch_install_args(requirement: str, where: str) -> list[str]:
    """pip install's arguments for torch alone from where: only that index, or only that folder."""
    source = ["--index-url", where] if "://" in where else ["--no-index", "--find-links", where]
    return ["-qqq", "--no-deps", *source, requirement]


def _install_torch(session: nox.Session, requirement: str) -> None:
    """torch alone, from its own index (or the copy the variable names), before the rest: the install after it finds
    it satisfied and never asks PyPI for it. Alone and quiet (-qqq, --no-deps), a missing wheel is pip's "No matching
    distribution found for torch==X+cpu" and then our line: where it looked and how to point elsewhere."""
    where = os.environ.get(TORCH_INDEX_ENV) or TORCH_INDEX
    try:
        session.install(*torch_install_args(requirement, where), silent=True)
    except nox.command.CommandFailed:
        session.error(f"{requirement} (PyTorch's CPU build) was not found at {where}. To fix, set {TORCH_INDEX_ENV} "
                      f"to a mirror of {TORCH_INDEX} or to a folder holding its wheel for this Python.")


def _pytest(session: nox.Session, marker: str, default: list[str]) -> None:
    _install(session, "test", "validation")
    session.run("pytest", "-m", marker, *(session.posargs or default), env=BYTECODE)


# Bytecode written beside the sources (__pycache__: ignored by git, .dockerignore and every unit key), also where the
# shell sets PYTHONDONTWRITEBYTECODE=1: else every process of a tier (two workers, and each `python -m invoke`,
# `python -m validation` or bisect step a test starts) compiles this checkout again. Not PYTHONPYCACHEPREFIX: a prefix
# hides the venv's own __pycache__, and the first processes compiled torch again (measured slower).
BYTECODE: dict[str, str | None] = {"PYTHONDONTWRITEBYTECODE": None}


# The everyday tier on every core (pytest-xdist), and the 25 slowest tests in the log. worksteal, not loadfile: a
# worker that runs out takes tests from the other's queue, so one long file (test_bisect, ~30 s) no longer sets the
# tier's end while the other worker idles; a module fixture is made at most once per worker. Arguments after `--`
# replace these: `nox -s tests -- tests/cli -x`.
TIER = ["-n", "auto", "--dist", "worksteal", "--durations=25", "tests/"]


@nox.session
def tests(session: nox.Session) -> None:
    """The everyday tier: host logic, patches on every real upstream snapshot, validation on the CPU (no engine)."""
    _pytest(session, "not docker", TIER)


@nox.session
def tests_serial(session: nox.Session) -> None:
    """The everyday tier in one process (-p no:xdist): a test that passes only in some order or beside a worker fails."""
    _pytest(session, "not docker", ["-p", "no:xdist", "--durations=25", "tests/"])


@nox.session
def integration(session: nox.Session) -> None:
    """The second tier: real Docker engine and BuildKit builds of the offline profile, pipeline, audit, registry."""
    _pytest(session, "docker", ["--durations=25", "tests/"])


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on the Python, hadolint on docker/Dockerfile.*."""
    _install(session, "lint")
    session.run("ruff", "check", ".")
    session.run("hadolint", *sorted(str(p) for p in Path("docker").glob("Dockerfile.*")))


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy, strict, over cleanbuild/, devsupport/, tasks.py and noxfile.py (configured in pyproject's [tool.mypy])."""
    _install(session, "typecheck")
    session.run("mypy", *session.posargs)


VALIDATE_USAGE = ("Usage: nox -s validate -- --image TAG [--arch X] [--device cpu|cuda] [--gpu N] "
                  "[-- VALIDATION ARGS]  |  -- --host [ARGS]")


@nox.session
def validate(session: nox.Session) -> None:
    """Run the validation kernels inside a built image (-- --image TAG) or on this host (-- --host ARGS)."""
    args = list(session.posargs)
    if "--host" in args:
        args.remove("--host")
        _install(session, "validation")
        _run_keeping_code(session, "python", "-m", "validation", *(args or ["--arch", "auto"]))
        return
    if "--image" not in args:
        print(f"error: {VALIDATE_USAGE}", file=sys.stderr)
        raise SystemExit(2)  # bad input, README's exit 2 (session.error would make it 1)
    session.install("-e", ".")
    _run_keeping_code(session, "python", "-m", "cleanbuild.cli.validate", *args)


def _run_keeping_code(session: nox.Session, *argv: str) -> None:
    """nox turns every failed command into exit 1; README's codes say what failed (1 a wrong result, 2 bad input,
    3 the host cannot, 4 a build failed, 130 interrupted), so the command's own code leaves nox unchanged."""
    try:
        session.run(*argv)
    except nox.command.CommandFailed as exc:
        if exc.return_code in (2, 3, 4, 130):
            raise SystemExit(exc.return_code) from None
        raise


@nox.session(python=False)
def upstream(session: nox.Session) -> None:
    """Every patch against the newest upstream main (GitHub by default): tomorrow's drift, today, in one command."""
    session.run("python3", "-m", "patches", "upstream", *session.posargs)
