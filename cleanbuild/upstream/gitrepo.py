"""Read pinned repositories on the host: a URL (GitHub) or a local path (a mirror's copy), through git.

A URL is fetched into a bare cache under .cache/git/ (blobless: commits and trees, file contents on demand);
a local path is read in place (`git --git-dir`), never written. Every call goes through cleanbuild.run.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import EnvironmentProblem, UsageError
from ..refs import SHA, git_ref, git_remote
from ..run import run
from ..spec import REPO_ROOT


def is_url(repo: str) -> bool:
    return "://" in repo and not repo.startswith("file://")


def local_path(repo: str, root: Path = REPO_ROOT) -> Path:
    """A local repository's path: absolute, or relative to the repository root (as profiles write it)."""
    raw = repo.removeprefix("file://")
    path = Path(raw)
    return path if path.is_absolute() else (root / path).resolve()


@dataclass(frozen=True)
class Commit:
    sha: str
    date: str  # ISO 8601 committer date
    subject: str


class GitError(EnvironmentProblem):
    """git could not read the repository (a corrupt object, a folder this user cannot read): exit 3."""


class Repo:
    """One repository, read with git. Errors: EnvironmentProblem (unreachable), UsageError (no such commit).

    Every ref reaches git checked (cleanbuild.refs) and after --end-of-options, so it is never read as an option."""

    def __init__(self, url: str, cache: Path = REPO_ROOT / ".cache" / "git", root: Path = REPO_ROOT):
        self.url = git_remote(url, "repository")
        if is_url(url):
            slug = re.sub(r"[^A-Za-z0-9]+", "-", url.rsplit("/", 1)[-1]).strip("-")
            self.git_dir = cache / f"{slug}-{hashlib.sha256(url.encode()).hexdigest()[:10]}.git"
            self.remote = url
        else:
            self.git_dir = local_path(url, root)
            self.remote = str(self.git_dir)
            if not (self.git_dir / "HEAD").exists() and not (self.git_dir / ".git").exists():
                raise UsageError(f"repository {url} ({self.git_dir}) is not a git repository. To fix, point the profile's repo at a clone or a URL.")
            if (self.git_dir / ".git").exists():
                self.git_dir = self.git_dir / ".git"

    def git(self, *args: str, check: bool = True) -> str:
        argv = ["git", "-c", "safe.directory=*", "--git-dir", str(self.git_dir), *args]
        result = run(argv, check=False, capture=True, echo=False, timeout=600)
        if check and (result.returncode != 0 or result.timed_out):
            why = " ".join(result.stderr.strip().splitlines()[-1:]) or ("timed out" if result.timed_out else "no output")
            raise GitError(f"git {args[0]} in {self.url} failed because {why}. To fix, check that {self.git_dir} is a "
                           "readable, intact git repository (git fsck), or point the profile at another copy.")
        return result.stdout

    # ---- remote side ---------------------------------------------------------------------------------------
    def heads(self) -> dict[str, str]:
        """Every ref the remote advertises (branches, tags, pull-request heads): name -> SHA."""
        result = run(["git", "-c", "safe.directory=*", "ls-remote", "--", self.remote], check=False, capture=True,
                     echo=False, timeout=120)
        if result.returncode != 0 or result.timed_out:
            why = (result.stderr.strip().splitlines() or ["no answer"])[-1]
            raise EnvironmentProblem(f"cannot reach the repository {self.url} ({why}). To fix, check the network or "
                                     "the URL, or set ATOM_BUILD_MIRROR to a folder holding a copy of it.")
        refs = {}
        for line in result.stdout.splitlines():
            sha, _, name = line.partition("\t")
            refs[name] = sha
        return refs

    def fetch(self, *refs: str) -> None:
        """Make refs (commits or branch names) and their history readable; no-op for a local repository."""
        if not is_url(self.url):
            return
        if not (self.git_dir / "HEAD").exists():
            self.git_dir.parent.mkdir(parents=True, exist_ok=True)
            made = run(["git", "init", "-q", "--bare", "--", str(self.git_dir)], check=False, capture=True, echo=False)
            if made.returncode != 0:
                raise GitError(f"git init of the cache {self.git_dir} failed because "
                               f"{(made.stderr.strip().splitlines() or ['no output'])[-1]}. To fix, make "
                               f"{self.git_dir.parent} writable (pinned URLs are fetched into the checkout's .cache/git).")
        checked = [git_ref(r, "ref") for r in refs]
        specs = [f"+refs/heads/{r}:refs/heads/{r}" if not SHA.match(r) else r for r in checked]
        try:
            self.git("fetch", "-q", "--filter=blob:none", "--tags", "--", self.remote, *specs)
        except GitError:
            self.heads()  # unreachable: EnvironmentProblem (exit 3); reachable: the ref is not there
            raise UsageError(f"{', '.join(refs)} not found in {self.url}. To fix, pass a commit or branch of that "
                             "repository (`invoke pins` lists what it has).") from None

    # ---- local reads ---------------------------------------------------------------------------------------
    def resolve(self, ref: str) -> str | None:
        out = self.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{git_ref(ref, 'ref')}^{{commit}}",
                       check=False).strip()
        return out or None

    def commit(self, ref: str) -> Commit:
        sha = self.resolve(ref)
        if sha is None:
            raise UsageError(f"{ref} is not a commit of {self.url}. To fix, pin a commit of that repository (`invoke pins`).")
        sha, date, subject = self.git("log", "-1", "--format=%H%x00%cI%x00%s", "--end-of-options", sha).strip().split("\x00", 2)
        return Commit(sha, date, subject)

    def show(self, ref: str, path: str) -> bytes | None:
        argv = ["git", "-c", "safe.directory=*", "--git-dir", str(self.git_dir), "show", "--end-of-options", f"{git_ref(ref, 'ref')}:{path}"]
        result = run(argv, check=False, capture=True, echo=False, timeout=120, binary=True)
        return result.stdout_bytes if result.returncode == 0 else None

    def is_ancestor(self, ref: str, head: str) -> bool:
        argv = ["git", "-c", "safe.directory=*", "--git-dir", str(self.git_dir), "merge-base", "--is-ancestor", "--end-of-options",
                git_ref(ref, "ref"), git_ref(head, "ref")]
        return run(argv, check=False, capture=True, echo=False).returncode == 0

    def count(self, since: str, until: str) -> int:
        return int(self.git("rev-list", "--count", "--end-of-options",
                                 f"{git_ref(since, 'ref')}..{git_ref(until, 'ref')}").strip() or 0)

    def describe(self, ref: str) -> str | None:
        out = self.git("describe", "--tags", "--end-of-options", git_ref(ref, "ref"), check=False).strip()
        return out or None

    def export(self, ref: str, paths: list[str], dest: Path) -> list[str]:
        """Write the files at ref under dest (for patch checks on a candidate); returns the paths present."""
        found = []
        for path in paths:
            data = self.show(ref, path)
            if data is None:
                continue
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            (dest / path).write_bytes(data)
            found.append(path)
        return found

