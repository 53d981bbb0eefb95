"""Check every patch against upstream's newest code, fetching only the target files.

`python -m patches upstream` is what a maintainer (or a nightly job) runs on a
connected host: tomorrow's upstream change that breaks a patch becomes a red
line before anybody builds. Each repository is fetched shallow (depth 1, one
ref, no tags, no submodules) and, where the server allows it, without blobs:
only the few target files are then read, so the whole check costs a few
kilobytes and seconds, not a clone of aiter.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from patches import engine
from patches.catalog import PATCHES

DEFAULT_SOURCES = {
    "aiter": "https://github.com/ROCm/aiter.git",
    "atom": "https://github.com/ROCm/ATOM.git",
}
DEFAULT_REF = "HEAD"  # what the server calls its default branch
# A folder of local copies read instead of the URLs above (the host's cleanbuild/upstream/mirror.py, whose naming
# rule this repeats: patches/ cannot import cleanbuild): the URL's last segment, lower-cased, with .git.
MIRROR_ENV = "ATOM_BUILD_MIRROR"
GIT_TIMEOUT_S = 300


class Unreachable(Exception):
    """A repository (or git itself) could not be reached: exit 3."""


class NotFound(Exception):
    """The repository answered and has no such ref, or a ref/URL is malformed: bad input, exit 2."""


# The host's cleanbuild/core/refs.py rules, kept here in stdlib form (patches/ cannot import cleanbuild): a full SHA or
# a ref name git accepts, never starting with '-' (`--upload-pack=CMD` would run CMD); a source that is a URL of a
# network or file scheme, user@host:path or a path, never an option or a `transport::` form such as ext::.
_SHA = re.compile(r"^[0-9a-f]{40}$")
_REF_BAD = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|(^|/)\.|\.lock(/|$)|[/.]$|^/|^-|^@$|^$")
_SCHEMES = ("https://", "http://", "ssh://", "git://", "file://")


def check_ref(ref: str, what: str) -> str:
    if _SHA.match(ref) or not _REF_BAD.search(ref):
        return ref
    raise NotFound(f"{what} {ref!r} is not a commit SHA or a git ref name (to fix, pass a branch, tag or "
                   "40-hex commit; no leading '-')")


def check_source(source: str, what: str) -> str:
    bad = not source or source.startswith("-") or "::" in source.split("/", 1)[0] or (
        "://" in source and not source.startswith(_SCHEMES)) or any(ord(c) < 0x20 for c in source)
    if bad:
        raise NotFound(f"{what} {source!r} is not a repository URL or path (to fix, pass an https://, ssh://, "
                       "git:// or file:// URL, or a folder)")
    return source


@dataclass(frozen=True)
class Fetched:
    repo: str  # "aiter" or "atom": the folder its targets live under
    source: str
    ref: str
    commit: str
    date: str  # committer date, ISO 8601

    def to_json(self) -> dict[str, str]:
        return {
            "repo": self.repo,
            "source": self.source,
            "ref": self.ref,
            "commit": self.commit,
            "date": self.date,
        }


@dataclass
class UpstreamReport:
    fetched: list[Fetched]
    report: engine.Report

    @property
    def exit_code(self) -> int:
        return 1 if self.report.drifted else 0

    def fetched_for(self, target: str) -> Fetched:
        """The snapshot a target file came from (every patch targets a file of a fetched repository)."""
        repo = target.split("/", 1)[0]
        found = next((f for f in self.fetched if f.repo == repo), None)
        if found is None:
            raise KeyError(f"no upstream snapshot of {repo!r} for {target}")
        return found

    def to_json(self) -> dict[str, object]:
        patches = []
        for result in self.report.results:
            entry = result.to_json()
            fetched = self.fetched_for(result.target)
            entry.update(repo=fetched.repo, commit=fetched.commit, date=fetched.date)
            patches.append(entry)
        return {
            "mode": "upstream",
            "exit_code": self.exit_code,
            "repos": [f.to_json() for f in self.fetched],
            "patches": patches,
        }


def targets_by_repo() -> dict[str, list[str]]:
    """Every file a patch reads, grouped by the repository it comes from."""
    found: dict[str, list[str]] = {}
    for patch in PATCHES:
        for target in patch.targets:
            files = found.setdefault(target.split("/", 1)[0], [])
            if target not in files:
                files.append(target)
    return found


def default_source(repo: str) -> str:
    """Where `repo` is read without --aiter/--atom: its copy in $ATOM_BUILD_MIRROR when set, else its URL."""
    url = DEFAULT_SOURCES[repo]
    mirror = os.environ.get(MIRROR_ENV)
    if not mirror:
        return url
    copy = Path(mirror) / url.rsplit("/", 1)[-1].lower()
    if not Path(mirror).is_dir() or not ((copy / "HEAD").is_file() or (copy / ".git").exists()):
        raise NotFound(f"{MIRROR_ENV} {mirror} has no {copy.name}, the copy of {url} (to fix, put one there with "
                       f"`git clone --mirror {url} {copy}`, pass --{repo}, or unset {MIRROR_ENV})")
    return str(copy)


def check(sources: dict[str, tuple[str, str]]) -> UpstreamReport:
    """sources: repo ("aiter"/"atom") -> (URL or path, ref). Fetches each one's
    target files into a temp root and runs every patch's check there."""
    for repo, (source, ref) in sources.items():
        check_source(source, f"--{repo}")
        check_ref(ref, f"--{repo}-ref")
    with tempfile.TemporaryDirectory(prefix="patches-upstream-") as tmp:
        root, work = Path(tmp) / "root", Path(tmp) / "git"
        fetched = [
            fetch(repo, source, ref, targets, root, work / repo)
            for repo, targets in targets_by_repo().items()
            for source, ref in [sources[repo]]
        ]
        report = engine.run(root, PATCHES, "check")
    upstream = UpstreamReport(fetched, report)
    report.results = [_missing_is_drift(upstream, r) for r in report.results]
    return upstream


def _missing_is_drift(upstream: UpstreamReport, result: engine.Result) -> engine.Result:
    # Upstream's newest code without a target file means the patch lost its anchor.
    if result.outcome != engine.NOT_PRESENT:
        return result
    fetched = upstream.fetched_for(result.target)
    detail = (
        f"{result.name}: {result.target}: expected this file in {fetched.repo}@{fetched.commit[:12]} "
        "(moved or removed upstream?)"
    )
    return replace(result, outcome=engine.DRIFTED, detail=detail)


def fetch(repo: str, source: str, ref: str, targets: list[str], root: Path, gitdir: Path) -> Fetched:
    """Fetch ref of source (depth 1, blobs on demand) and write its target files under root."""
    gitdir.mkdir(parents=True)
    git = _Git(gitdir, source)
    git("init", "-q", "--bare", str(gitdir))
    remote, local = _remote(source)
    settings = [
        ("remote.origin.url", remote),
        # A partial clone: trees now, each blob when it is read (what `clone --filter` sets up).
        ("remote.origin.promisor", "true"),
        ("remote.origin.partialclonefilter", "blob:none"),
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "origin"),
    ]
    if local:
        # A path the maintainer named may belong to another user; git refuses
        # such a repository ("dubious ownership") unless told it is trusted.
        # allowFilter: the upload-pack is ours, so it honours --filter=blob:none
        # as GitHub does; without it a local copy sends every blob of the tree
        # (aiter's whole tree: 1.1 s of a run against ATOM_BUILD_MIRROR).
        settings.append(("remote.origin.uploadpack",
                         "git -c safe.directory=* -c uploadpack.allowFilter=true upload-pack"))
    for key, value in settings:
        git("config", key, value)
    try:
        git(
            "fetch",
            "-q",
            "--depth",
            "1",
            "--filter=blob:none",
            "--no-tags",
            "--recurse-submodules=no",
            "--",
            "origin",
            check_ref(ref, f"--{repo}-ref"),
        )
    except Unreachable as failed:
        try:
            git("ls-remote", "--", "origin")
        except Unreachable:
            raise failed from None  # the repository does not answer: exit 3
        raise NotFound(f"{source}: no ref {ref!r} there (to fix, pass a branch, tag or commit of that repository)") from None
    commit, date = git("log", "-1", "--format=%H %cI", "FETCH_HEAD").decode().split()
    for target in targets:
        if git("ls-tree", "--name-only", commit, "--", target).strip():  # trees are local
            (root / target).parent.mkdir(parents=True, exist_ok=True)
            (root / target).write_bytes(git("cat-file", "blob", "--end-of-options", f"{commit}:{target}"))
    return Fetched(repo, source, ref, commit, date)


def _remote(source: str) -> tuple[str, bool]:
    """A URL as it is; a local path made absolute (git resolves it from the temp repo)."""
    if "://" not in source and Path(source).exists():
        return str(Path(source).resolve()), True
    return source, source.startswith("file://")


class _Git:
    """The one place this module runs git: argv only, no prompts, a time limit,
    and a failure becomes one line naming the repository."""

    def __init__(self, gitdir: Path, source: str):
        self.gitdir, self.source = gitdir, source

    def __call__(self, *args: str) -> bytes:
        git = shutil.which("git")
        if git is None:
            raise Unreachable("git is not installed (to fix, install git and rerun)")
        argv = [git, *args] if args[0] == "init" else [git, "--git-dir", str(self.gitdir), *args]
        # GIT_TERMINAL_PROMPT=0: an unknown or private URL fails instead of asking for a password.
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        try:
            proc = subprocess.run(argv, capture_output=True, check=False, timeout=GIT_TIMEOUT_S, env=env)  # noqa: S603
        except subprocess.TimeoutExpired as exc:
            raise Unreachable(f"{self.source}: git {args[0]} timed out after {GIT_TIMEOUT_S} s") from exc
        if proc.returncode != 0:
            why = _first_error(proc.stderr.decode(errors="replace"))
            raise Unreachable(f"{self.source}: git {args[0]} failed: {why}")
        return proc.stdout


def _first_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (fatal or lines or ["no output"])[0]
