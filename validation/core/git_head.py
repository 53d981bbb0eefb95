"""The commit a git checkout has checked out, read from its files (no git binary, which images lack)."""

from __future__ import annotations

import re
from pathlib import Path

_SHA = re.compile(r"^[0-9a-f]{40}$")


def git_dir(start: Path, levels: int = 1) -> Path | None:
    """The .git folder at start or up to `levels` parents above it (aiter/ and its checkout: 1). Not further:
    a copy of aiter/ inside another repository must not report that repository's HEAD."""
    for folder in [start, *start.parents][: levels + 1]:
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return dot_git
        if dot_git.is_file():  # a worktree or submodule: "gitdir: PATH"
            text = dot_git.read_text().strip()
            if text.startswith("gitdir:"):
                target = Path(text.removeprefix("gitdir:").strip())
                return target if target.is_absolute() else (folder / target).resolve()
    return None


def head_commit(dot_git: Path) -> str | None:
    """HEAD's full SHA: detached, a loose ref, or a packed ref; None when it cannot be read."""
    try:
        head = (dot_git / "HEAD").read_text().strip()
    except OSError:
        return None
    if _SHA.match(head):
        return head
    if not head.startswith("ref:"):
        return None
    ref = head.removeprefix("ref:").strip()
    common = _common_dir(dot_git)
    for base in (dot_git, common):
        loose = base / ref
        if loose.is_file():
            sha = loose.read_text().strip()
            return sha if _SHA.match(sha) else None
    return _packed(common / "packed-refs", ref)


def _common_dir(dot_git: Path) -> Path:
    """A linked worktree keeps its refs in the main repository's folder (named in its commondir file)."""
    pointer = dot_git / "commondir"
    if pointer.is_file():
        return (dot_git / pointer.read_text().strip()).resolve()
    return dot_git


def _packed(packed_refs: Path, ref: str) -> str | None:
    if not packed_refs.is_file():
        return None
    for line in packed_refs.read_text().splitlines():
        sha, _, name = line.partition(" ")
        if name == ref and _SHA.match(sha):
            return sha
    return None
