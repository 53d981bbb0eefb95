"""Read pinned repositories on the host: a URL (GitHub) or a local path (../shared/upstream), through git.

A URL is fetched into a bare cache under .cache/git/ (blobless: commits and trees, file contents on demand);
a local path is read in place (`git --git-dir`), never written. Every call goes through cleanbuild.run.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import EnvironmentProblem, UsageError
from .run import run

SHA = re.compile(r"^[0-9a-f]{40}$")
REPO_ROOT = Path(__file__).resolve().parent.parent


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


class Repo:
    """One repository, read with git. Errors: EnvironmentProblem (unreachable), UsageError (no such commit)."""

    def __init__(self, url: str, cache: Path = REPO_ROOT / ".cache" / "git", root: Path = REPO_ROOT):
        self.url = url
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
            raise _GitError(result.stderr.strip().splitlines()[-1:] or ["no output"])
        return result.stdout

    # ---- remote side ---------------------------------------------------------------------------------------
    def heads(self) -> dict[str, str]:
        """Every ref the remote advertises (branches, tags, pull-request heads): name -> SHA."""
        result = run(["git", "-c", "safe.directory=*", "ls-remote", self.remote], check=False, capture=True,
                     echo=False, timeout=120)
        if result.returncode != 0 or result.timed_out:
            why = (result.stderr.strip().splitlines() or ["no answer"])[-1]
            raise EnvironmentProblem(f"cannot reach the repository {self.url} ({why}). To fix, check the network or the URL.")
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
            run(["git", "init", "-q", "--bare", str(self.git_dir)], capture=True, echo=False)
        specs = [f"+refs/heads/{r}:refs/heads/{r}" if not SHA.match(r) else r for r in refs]
        try:
            self.git("fetch", "-q", "--filter=blob:none", "--tags", self.remote, *specs)
        except _GitError as exc:
            raise EnvironmentProblem(f"cannot fetch {', '.join(refs)} from {self.url} ({exc}). To fix, check the network, the URL and the ref.") from None

    # ---- local reads ---------------------------------------------------------------------------------------
    def resolve(self, ref: str) -> str | None:
        out = self.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False).strip()
        return out or None

    def commit(self, ref: str) -> Commit:
        sha = self.resolve(ref)
        if sha is None:
            raise UsageError(f"{ref} is not a commit of {self.url}. To fix, pin a commit of that repository (`invoke pins`).")
        sha, date, subject = self.git("log", "-1", "--format=%H%x00%cI%x00%s", sha).strip().split("\x00", 2)
        return Commit(sha, date, subject)

    def show(self, ref: str, path: str) -> bytes | None:
        argv = ["git", "-c", "safe.directory=*", "--git-dir", str(self.git_dir), "show", f"{ref}:{path}"]
        result = run(argv, check=False, capture=True, echo=False, timeout=120, binary=True)
        return result.stdout_bytes if result.returncode == 0 else None

    def is_ancestor(self, ref: str, head: str) -> bool:
        argv = ["git", "-c", "safe.directory=*", "--git-dir", str(self.git_dir), "merge-base", "--is-ancestor", ref, head]
        return run(argv, check=False, capture=True, echo=False).returncode == 0

    def count(self, since: str, until: str) -> int:
        return int(self.git("rev-list", "--count", f"{since}..{until}").strip() or 0)

    def describe(self, ref: str) -> str | None:
        out = self.git("describe", "--tags", ref, check=False).strip()
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


class _GitError(Exception):
    def __init__(self, lines: list[str]):
        super().__init__(" ".join(lines))
