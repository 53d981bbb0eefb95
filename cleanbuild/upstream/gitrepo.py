"""Read pinned repositories on the host: a URL (GitHub) or a local path (a mirror's copy), through git.

A URL is fetched into a bare cache under .cache/git/ (blobless: commits and trees, file contents on demand);
a local path is read in place (`git --git-dir`), never written. Every call goes through cleanbuild.core.run.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import shlex
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cleanbuild.core.errors import EnvironmentProblem, UsageError
from cleanbuild.core.refs import SHA, git_ref, git_remote
from cleanbuild.core.run import git_reason, run
from cleanbuild.core.spec import REPO_ROOT


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

    Every ref reaches git checked (cleanbuild.core.refs) and after --end-of-options, so it is never read as an option."""

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

    def git(self, *args: str, check: bool = True, git_dir: Path | None = None) -> str:
        argv = [*self._git(git_dir), *args]
        result = run(argv, check=False, capture=True, echo=False, timeout=600)
        if check and (result.returncode != 0 or result.timed_out):
            why = git_reason(result.stderr) or ("timed out" if result.timed_out else "no output")
            raise GitError(f"git {args[0]} in {self.url} failed because {why}. To fix, check that {self.git_dir} is a "
                           "readable, intact git repository (git fsck), or point the profile at another copy.")
        return result.stdout

    def _git(self, git_dir: Path | None = None) -> list[str]:
        """git reading git_dir (default: this repository). safe.directory names that one folder: a repository
        another user owns (a shared mirror, a read-only mount) is read as it is, never written."""
        where = str(git_dir or self.git_dir)
        return ["git", "-c", f"safe.directory={where}", "--git-dir", where]

    # ---- remote side ---------------------------------------------------------------------------------------
    def heads(self) -> dict[str, str]:
        """Every ref the remote advertises (branches, tags, pull-request heads): name -> SHA."""
        argv = ["git", "ls-remote"]
        if not is_url(self.url):  # git runs upload-pack for a path without our -c: it gets its own safe.directory
            argv.append(f"--upload-pack=git -c safe.directory={shlex.quote(self.remote)} upload-pack")
        result = run([*argv, "--", self.remote], check=False, capture=True, echo=False, timeout=120)
        if result.returncode != 0 or result.timed_out:
            why = git_reason(result.stderr) or ("timed out" if result.timed_out else "no answer")
            raise EnvironmentProblem(f"cannot reach the repository {self.url} because {why}. To fix, check the "
                                     "network or the URL (a path: that this user can read it).")
        refs = {}
        for line in result.stdout.splitlines():
            sha, _, name = line.partition("\t")
            refs[name] = sha
        return refs

    def fetch(self, *refs: str) -> None:
        """Make refs (commits or branch names) and their history readable; no-op for a local repository."""
        if not is_url(self.url):
            return
        checked = [git_ref(r, "ref") for r in refs]
        specs = [f"+refs/heads/{r}:refs/heads/{r}" if not SHA.match(r) else r for r in checked]
        if (self.git_dir / "HEAD").exists():
            self._fetch_into(self.git_dir, specs, refs)
        else:
            self._fetch_new(specs, refs)

    def _fetch_new(self, specs: list[str], refs: tuple[str, ...]) -> None:
        """A new cache entry: made and fetched in a temporary folder beside it, renamed into place only when the
        fetch succeeded. A failed fetch (offline, a wrong URL) leaves nothing, not even .cache/git."""
        made = _make_folders(self.git_dir.parent)
        tmp = Path(tempfile.mkdtemp(dir=self.git_dir.parent, prefix=f".{self.git_dir.name}.partial-"))
        try:
            init = run(["git", "init", "-q", "--bare", "--", str(tmp)], check=False, capture=True, echo=False)
            if init.returncode != 0:
                raise GitError(f"git init of the cache {self.git_dir} failed because {git_reason(init.stderr) or 'no output'}. "
                               f"To fix, make {self.git_dir.parent} writable (pinned URLs are fetched into the "
                               "checkout's .cache/git).")
            self._fetch_into(tmp, specs, refs)
            if (self.git_dir / "HEAD").exists():  # another run made it meanwhile: fetch there, drop ours
                shutil.rmtree(tmp)
                self._fetch_into(self.git_dir, specs, refs)
            else:
                tmp.rename(self.git_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise

    def _fetch_into(self, git_dir: Path, specs: list[str], refs: tuple[str, ...]) -> None:
        try:
            self.git("fetch", "-q", "--filter=blob:none", "--tags", "--", self.remote, *specs, git_dir=git_dir)
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
        argv = [*self._git(), "show", "--end-of-options", f"{git_ref(ref, 'ref')}:{path}"]
        result = run(argv, check=False, capture=True, echo=False, timeout=120, binary=True)
        return result.stdout_bytes if result.returncode == 0 else None

    def python_files(self, ref: str) -> dict[str, bytes]:
        """Every *.py file at ref, path -> contents, in one `git archive` (one process, not one `show` per file; a
        blobless cache fetches the blobs it lacks). A symbolic link reads as its target, as `show` gives it."""
        argv = [*self._git(), "archive", "--format=tar", "--end-of-options", git_ref(ref, "ref"), "*.py"]
        result = run(argv, check=False, echo=False, binary=True, timeout=600)
        if result.returncode != 0 and "did not match any files" in result.stderr:
            return {}
        if result.returncode != 0 or result.timed_out:
            why = git_reason(result.stderr) or ("timed out" if result.timed_out else "no output")
            raise GitError(f"git archive in {self.url} failed because {why}. To fix, check that {self.git_dir} is a "
                           "readable, intact git repository (git fsck), or point the profile at another copy.")
        files: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(result.stdout_bytes)) as archive:
            for member in archive:
                data = archive.extractfile(member) if member.isfile() else None
                if member.name.endswith(".py") and (data is not None or member.issym()):
                    files[member.name] = data.read() if data is not None else member.linkname.encode()
        return files

    def is_ancestor(self, ref: str, head: str) -> bool:
        argv = [*self._git(), "merge-base", "--is-ancestor", "--end-of-options",
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



def check_ref(url: str, ref: str, what: str) -> None:
    """The ref a build checks out is in its repository, asked before any effect (by the build and its dry run
    alike). A local repository must exist and resolve it; a URL must answer (exit 3), and a branch or tag must be
    one it advertises. A full commit SHA on a URL is taken as pinned: only a fetch (an effect) proves it, which
    `invoke pins` does."""
    repo = Repo(url)  # a path that is no repository: UsageError
    if is_url(url):
        heads = repo.heads()
        if SHA.match(ref) or {ref, f"refs/heads/{ref}", f"refs/tags/{ref}"} & set(heads):
            return
    elif repo.resolve(ref) is not None:
        return
    raise UsageError(f"{what} {ref!r} is not a commit, branch or tag of {url}. To fix, pin a commit of that "
                     "repository (`invoke pins` lists the pins and what is wrong with them).")


def _make_folders(folder: Path) -> list[Path]:
    """mkdir -p folder; the folders it made, outermost first (to remove them again when nothing went in)."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()][::-1]
    folder.mkdir(parents=True, exist_ok=True)
    return missing
