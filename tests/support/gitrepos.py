"""Tiny hand-made git repositories for host tests: devsupport.gitrepos, where the benchmarks find them too."""

from __future__ import annotations

from devsupport.gitrepos import IDENT, commit_all, git

__all__ = ["IDENT", "commit_all", "git"]
