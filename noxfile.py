"""Nox sessions: tests (the README's test command), lint, validate (inside an image or on this host)."""

from __future__ import annotations

from pathlib import Path

import nox

nox.needs_version = ">=2025.2.9"
nox.options.sessions = ["lint", "tests"]
nox.options.error_on_missing_interpreters = True
nox.options.reuse_existing_virtualenvs = True

PYPROJECT = nox.project.load_toml("pyproject.toml")


def _install(session: nox.Session, *groups: str) -> None:
    session.install("-e", ".", *nox.project.dependency_groups(PYPROJECT, *groups))


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite (Docker-marked tests need a running engine; with CI=true a missing one fails)."""
    _install(session, "test", "validation")
    session.run("pytest", *(session.posargs or ["tests/"]))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on the Python, hadolint on docker/Dockerfile.*."""
    _install(session, "lint")
    session.run("ruff", "check", ".")
    dockerfiles = sorted(str(p) for p in Path("docker").glob("Dockerfile.*"))
    session.run("hadolint", *dockerfiles)


@nox.session
def validate(session: nox.Session) -> None:
    """Run the validation kernels inside a built image (-- --image TAG) or on this host (-- --host)."""
    args = list(session.posargs)
    if "--host" in args:
        args.remove("--host")
        _install(session, "validation")
        session.run("python", "-m", "validation", *(args or ["--arch", "auto"]))
        return
    if "--image" not in args:
        session.error("Usage: nox -s validate -- --image TAG [--arch gfx942|gfx950] [--device cpu|cuda]  |  -- --host [ARGS]")
    session.install("-e", ".")
    session.run("python", "-m", "cleanbuild.validate_image", *args)
