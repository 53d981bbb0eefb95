"""A mirror: a folder of local copies of the pinned git repositories, read instead of the network.

A mirror is WHERE a repository's commits are read, never WHAT they are: the profile keeps naming the public URL
(reports, image labels, the SBOM, every image key and the lock), and a pin is the same SHA in either place. Set by
`--mirror`, the environment variable ATOM_BUILD_MIRROR or invoke.yaml `cleanbuild.mirror` (in that order), for
any profile. The copy of a repository is named by the last segment of its URL, lower-cased, ending in .git:
https://github.com/ROCm/ATOM.git -> atom.git, https://github.com/ROCm/aiter -> aiter.git. A copy may be bare
(`git clone --mirror URL`) or a clone with a work tree, and must hold the pinned commits and their tags (the
wheels' versions come from `git describe`). A set mirror holds a copy of every git component the profile reads
from a URL, or the run stops (exit 2); a repo the profile names by a local path is read in place.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType

from cleanbuild.core.errors import EnvironmentProblem, UsageError
from cleanbuild.upstream.gitrepo import Repo, is_url
from cleanbuild.upstream.profiles import Profile

ENV = "ATOM_BUILD_MIRROR"
FIX = f"To fix, set {ENV} to a folder with aiter.git and atom.git (copies of the pinned repositories)"


def copy_name(repo: str) -> str:
    """The mirror's name for a repository: its URL's last path segment, lower-cased, with .git."""
    last = repo.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].lower()  # git@host:aiter.git: after the ':'
    return last if last.endswith(".git") else f"{last}.git"


def folder(value: object, where: str = ENV) -> Path | None:
    """The mirror a setting names (where: the flag, variable or key it came from), checked: None when unset."""
    if value is None or str(value) == "":
        return None
    path = Path(str(value)).expanduser().resolve()
    if not path.is_dir():
        raise UsageError(f"{where} {value} is not a folder. {FIX}, or unset it.")
    return path


def attach(profile: Profile, mirror: Path | None, where: str = ENV) -> Profile:
    """The profile with its URL git components read from the mirror's copies (unchanged without a mirror)."""
    if mirror is None:
        return profile
    reads = {}
    for comp in profile.components:
        repo = comp.repo
        if comp.source != "git" or not is_url(repo):
            continue
        copy = mirror / copy_name(repo)
        if not (copy / "HEAD").is_file() and not (copy / ".git").exists():
            raise UsageError(f"{where} {mirror} has no {copy.name}, the copy of {repo}. To fix, put one there "
                             f"(git clone --mirror {repo} {copy}) or unset {where}.")
        reads[comp.name] = str(copy)
    return dataclasses.replace(profile, mirror=mirror, reads=MappingProxyType(reads))


def require_reachable(profile: Profile) -> None:
    """An offline profile (made for a host without GitHub) reads every git component from a URL only when that
    URL answers: else one line now (exit 3), before anything is planned or built."""
    if not profile.offline:
        return
    for comp in profile.components:
        source = profile.read_from(comp.name)
        if comp.source != "git" or not is_url(source):
            continue
        try:
            Repo(source).heads()
        except EnvironmentProblem as exc:
            why = str(exc).split(". To fix", 1)[0]
            raise EnvironmentProblem(f"the {profile.name} profile failed because it {why}. {FIX}.") from None
