"""Tiny hand-made git repositories: git with a fixed identity and date, and commit-everything."""

from __future__ import annotations

import subprocess
from pathlib import Path

IDENT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid", "GIT_COMMITTER_NAME": "t",
         "GIT_COMMITTER_EMAIL": "t@t.invalid", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
         "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "safe.directory=*", "-C", str(repo), *args], check=True, capture_output=True,  # noqa: S603,S607
                          text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(repo), **IDENT}).stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")
