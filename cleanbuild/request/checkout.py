"""`--src aiter=PATH`: a developer's local checkout, resolved once at the edge into a typed, immutable value.

The working tree as it is on disk (uncommitted and untracked files included, .gitignore respected) is recorded as
a git tree without touching the checkout: `git add -A` runs on a copy of its index and writes objects to a
temporary object folder that borrows the checkout's (alternates). That tree is compared with the commit the
profile pins, and the changed files decide how the image is made (`route`):
- overlay: only Python, CSV and JSON files of the package changed: copied over the clean image built from the
  pins, one small layer (docker/Dockerfile.dev); no wheel is built.
- wheel: anything compiled or build-affecting changed (csrc/, hsa/, 3rdparty/, setup.py, pyproject.toml, CMake,
  C/C++/HIP sources, requirements, any other file a wheel may carry), or HEAD is unrelated to the pin: that
  component's wheel is built from a snapshot commit of the working tree (its key names the snapshot).
- none: nothing that reaches the image changed (or nothing changed at all).
classify() is pure; resolve() runs git through cleanbuild.core.run and writes only in a temporary folder.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cleanbuild.core.errors import UsageError
from cleanbuild.core.run import git_reason, run

# component -> (package folder, the file that marks its checkout)
COMPONENTS = {"aiter": ("aiter", "setup.py"), "atom": ("atom", "pyproject.toml")}
OVERLAY_SUFFIXES = frozenset({".py", ".csv", ".json"})
# Folders and files of the repository that no wheel carries and no build reads: a change there changes nothing.
NOT_SHIPPED = ("docs/", "op_tests/", "tests/", ".github/")
ROUTES = ("none", "overlay", "wheel")
# A snapshot commit is a function of (tree, HEAD): fixed identity, and HEAD's own date (SOURCE_DATE_EPOCH).
SNAPSHOT_IDENTITY = {"GIT_AUTHOR_NAME": "atom-build", "GIT_AUTHOR_EMAIL": "dev@atom-build.invalid",
                     "GIT_COMMITTER_NAME": "atom-build", "GIT_COMMITTER_EMAIL": "dev@atom-build.invalid"}


@dataclass(frozen=True)
class Change:
    path: str  # relative to the repository root, POSIX
    status: str  # added | modified | deleted
    blob: str  # the new content's git blob SHA ("" for deleted)


@dataclass(frozen=True)
class Checkout:
    component: str
    path: Path  # the work tree's root
    head: str
    pin: str
    relation: str  # same | descendant | ancestor | unrelated
    tree: str  # git tree of the working tree as it was read
    snapshot: str  # commit: that tree over HEAD (what a wheel build fetches)
    changes: tuple[Change, ...]  # pin -> working tree
    diff_hash: str  # sha256 of the binary diff pin -> working tree
    route: str  # none | overlay | wheel
    reasons: tuple[str, ...]  # the files (or the fact) that decided the route

    @property
    def package(self) -> str:
        return COMPONENTS[self.component][0]

    @property
    def overlay_files(self) -> tuple[Change, ...]:
        """What the dev layer copies (or deletes): the package's changed files, paths as in site-packages."""
        return tuple(c for c in self.changes if c.path.startswith(self.package + "/"))

    def warning(self) -> str | None:
        if self.relation != "unrelated":
            return None
        return (f"warning: {self.component} checkout {self.path} at {self.head[:12]} is neither an ancestor nor a "
                f"descendant of the pinned {self.pin[:12]}: building the whole {self.component} wheel from the checkout")


# ---- classification (pure) ------------------------------------------------------------------------------------

def kind(component: str, path: str) -> str:
    """One changed file: overlay (the package's Python/CSV/JSON), ignored (not shipped, not built) or wheel."""
    package = COMPONENTS[component][0]
    pure = PurePosixPath(path)
    if path.startswith(package + "/"):
        return "overlay" if pure.suffix in OVERLAY_SUFFIXES else "wheel"
    if path.startswith(NOT_SHIPPED) or ("/" not in path and pure.suffix == ".md"):
        return "ignored"
    return "wheel"


def classify(component: str, changes: tuple[Change, ...], relation: str) -> tuple[str, tuple[str, ...]]:
    """(route, the files that decided it). A file a wheel build reads wins over every overlay file."""
    if relation == "unrelated":
        return "wheel", ("HEAD is unrelated to the pin",)
    kinds = {c.path: kind(component, c.path) for c in changes}
    for route in ("wheel", "overlay"):
        deciding = tuple(sorted(p for p, k in kinds.items() if k == route))
        if deciding:
            return route, deciding
    return "none", ()


def parse_spec(spec: str) -> tuple[str, Path]:
    """`aiter=PATH` -> ("aiter", PATH); an unknown component or a missing '=' is bad input."""
    name, sep, raw = spec.partition("=")
    if not sep or not raw:
        raise UsageError(f"--src {spec!r} is not COMPONENT=PATH. To fix, pass e.g. --src aiter=../aiter.")
    if name not in COMPONENTS:
        raise UsageError(f"--src names component {name!r}, which cannot be built from a checkout. To fix, use one of: {', '.join(COMPONENTS)}.")
    return name, Path(raw).expanduser()


# ---- resolution (git, at the edge) ----------------------------------------------------------------------------

def resolve_all(specs: tuple[str, ...], pins: Mapping[str, str]) -> tuple[Checkout, ...]:
    """Every --src, once; one checkout per component. pins: component -> the commit the profile pins."""
    seen: dict[str, Checkout] = {}
    for spec in specs:
        name, path = parse_spec(spec)
        if name in seen:
            raise UsageError(f"--src names {name} twice. To fix, pass one checkout per component.")
        seen[name] = resolve(name, path, pins[name])
    return tuple(seen.values())


def _git(path: Path, *args: str, env: Mapping[str, str] | None = None, check: bool = True) -> str:
    result = run(["git", "-c", "safe.directory=*", "-C", str(path), *args], check=False, capture=True, echo=False,
                 env=env, timeout=600)
    if check and result.returncode != 0:
        why = git_reason(result.stderr) or "no output"
        raise UsageError(f"git {args[0]} failed in {path} because {why}. To fix, check the checkout with `git status`.")
    return result.stdout


def work_tree(component: str, path: Path) -> Path:
    """The root of a git work tree of that component, or a one-line UsageError saying which it is not."""
    if not path.is_dir():
        raise UsageError(f"--src {component}={path}: not a folder. To fix, pass the root of a git checkout of {component}.")
    top = _git(path, "rev-parse", "--show-toplevel", check=False).strip()
    if not top:
        raise UsageError(f"--src {component}={path}: not a git repository (or a bare one). To fix, pass a git checkout of {component} with a work tree.")
    root = Path(top)
    package, marker = COMPONENTS[component]
    if not (root / package).is_dir() or not (root / marker).is_file():
        raise UsageError(f"--src {component}={path}: {root} is not a checkout of {component} (it lacks {package}/ "
                         f"or {marker}). To fix, pass a clone of the {component} repository.")
    return root


def relation(root: Path, head: str, pin: str) -> str:
    if not _has(root, pin):  # a shallow clone without the pin, or another repository
        return "unrelated"
    if head == pin:
        return "same"
    if _is_ancestor(root, pin, head):
        return "descendant"
    return "ancestor" if _is_ancestor(root, head, pin) else "unrelated"


def _succeeds(root: Path, *args: str) -> bool:
    return run(["git", "-c", "safe.directory=*", "-C", str(root), *args], check=False, capture=True,
               echo=False).returncode == 0


def _has(root: Path, sha: str) -> bool:
    return _succeeds(root, "cat-file", "-e", f"{sha}^{{commit}}")


def _is_ancestor(root: Path, a: str, b: str) -> bool:
    return _succeeds(root, "merge-base", "--is-ancestor", a, b)


def snapshot_env(root: Path, objects: Path, index: Path) -> dict[str, str]:
    """git environment that reads the checkout and writes objects (and the index) only under objects/index."""
    git_objects = Path(_git(root, "rev-parse", "--path-format=absolute", "--git-path", "objects").strip())
    source_index = Path(_git(root, "rev-parse", "--path-format=absolute", "--git-path", "index").strip())
    if source_index.is_file():
        # Its stat data, so `git add -A` hashes only what changed; and its mtime (copy2): git trusts an entry whose
        # file is older than the index, so a fresh mtime would hide an edit made in the second of the last commit.
        shutil.copy2(source_index, index)
    return {"GIT_INDEX_FILE": str(index), "GIT_OBJECT_DIRECTORY": str(objects),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(git_objects)}


def snapshot(root: Path, head: str, env: Mapping[str, str]) -> tuple[str, str]:
    """(tree, commit) of the working tree as it is now, objects written where env says."""
    _git(root, "add", "-A", "--ignore-errors", ".", env=env)
    tree = _git(root, "write-tree", env=env).strip()
    date = _git(root, "log", "-1", "--format=%cI", head).strip()
    stamp = {**env, **SNAPSHOT_IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    commit = _git(root, "commit-tree", tree, "-p", head, "-m", f"atom-build: the working tree over {head}",
                  env=stamp).strip()
    return tree, commit


def changes(root: Path, pin: str, tree: str, env: Mapping[str, str]) -> tuple[tuple[Change, ...], str]:
    """(changed files pin -> tree, sha256 of the binary diff)."""
    raw = _git(root, "diff-tree", "-r", "-z", "--no-renames", "--raw", pin, tree, env=env)
    fields = raw.split("\0")
    out = []
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(":"):
            continue
        _, _, _, new, status = meta[1:].split(" ")
        word = {"A": "added", "D": "deleted"}.get(status[0], "modified")
        out.append(Change(path, word, "" if word == "deleted" else new))
    patch = _git(root, "diff-tree", "-r", "-p", "--binary", "--no-renames", pin, tree, env=env)
    return tuple(sorted(out, key=lambda c: c.path)), hashlib.sha256(patch.encode()).hexdigest()


def resolve(component: str, path: Path, pin: str) -> Checkout:
    root = work_tree(component, path.resolve())
    head = _git(root, "rev-parse", "HEAD").strip()
    rel = relation(root, head, pin)
    with tempfile.TemporaryDirectory(prefix="atom-build-src-") as tmp:
        (Path(tmp) / "objects").mkdir()
        env = snapshot_env(root, Path(tmp) / "objects", Path(tmp) / "index")
        tree, commit = snapshot(root, head, env)
        found, diff_hash = changes(root, pin, tree, env) if _has(root, pin) else ((), _digest(tree))
    route, reasons = classify(component, found, rel)
    return Checkout(component, root, head, pin, rel, tree, commit, found, diff_hash, route, reasons)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def blob_sha(data: bytes) -> str:
    """git's blob id of some bytes: how the prepare step proves a file is still what the plan read."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()

