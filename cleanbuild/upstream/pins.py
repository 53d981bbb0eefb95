"""`invoke pins`: is every pin a fact? And `invoke pins --bump`: move a git pin, only when every patch still holds.

For each git component: the ref is a commit of its repository, reachable from the default branch (or: only on
which ref), and how many commits and days it is behind the branch head. Pair rules: aiter's FLYDSL_VERSION at
the aiter pin is the flydsl the profile gets (the lock's, or a typed pin), and every non-optional aiter import of
ATOM at its pin resolves in aiter at its pin (cleanbuild.upstream.imports). PyPI pins: the version exists with a wheel
for the profile's Python. A PyTorch index pin is checked when the index answers, and said unchecked otherwise.
Exit: 0 all good, 1 a pin is wrong, 3 a git repository cannot be reached.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import json
import re
import tempfile
import tomllib
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cleanbuild.core.atomic import replace_all
from cleanbuild.core.errors import CleanBuildError, StepFailed, UsageError
from cleanbuild.core.refs import SHA, git_ref
from cleanbuild.core.run import run
from cleanbuild.core.spec import REPO_ROOT, patches_argv
from cleanbuild.upstream import lock, mirror
from cleanbuild.upstream.gitrepo import Repo
from cleanbuild.upstream.imports import Tree, unresolved
from cleanbuild.upstream.profiles import PROFILE_DIR, Profile, chain, load

PATCH_TARGETS = ("aiter/tuned_gemm.py", "aiter/jit/core.py", "atom/model_ops/linear.py", "atom/utils/envs.py")
FLYDSL = re.compile(r"""^FLYDSL_VERSION\s*=\s*["']flydsl==([^"']+)["']""", re.MULTILINE)


@dataclass
class Row:
    component: str
    pin: str
    status: str  # ok | WRONG | unchecked
    detail: str
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    rows: list[Row]

    @property
    def problems(self) -> list[Row]:
        return [r for r in self.rows if r.status == "WRONG"]

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0

    def to_json(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "pins": [r.__dict__ for r in self.rows]}


def check(profile: Profile) -> Report:
    rows, repos = [], {}
    for comp in profile.components:
        if comp.source == "git":
            repo = Repo(profile.read_from(comp.name))
            repos[comp.name] = repo
            rows.append(git_pin(comp.name, repo, comp.ref, comp.branch))
        elif comp.source == "pypi" and comp.version:
            rows.append(pypi_pin(comp.name, comp.distribution, comp.version, profile.python))
        elif comp.source == "index" or (comp.source == "local" and comp.index_url):
            rows.append(index_pin(comp.name, comp.index_url, comp.version, profile.python))
    ok = {r.component for r in rows if r.status == "ok"}
    if {"aiter", "atom"} <= ok:
        rows.append(pair(repos["aiter"], profile.component("aiter").ref, repos["atom"], profile.component("atom").ref))
    if "aiter" in ok:
        rows.append(flydsl(profile, repos["aiter"]))
    return Report(rows)


def git_pin(name: str, repo: Repo, ref: str, branch: object) -> Row:
    if not SHA.match(ref):
        return Row(name, ref, "WRONG", f"{ref!r} is not a full commit SHA. To fix, pin the 40-hex commit.")
    heads = repo.heads()  # EnvironmentProblem (exit 3) when unreachable
    branch = str(branch or _default_branch(heads))
    head_sha = heads.get(f"refs/heads/{branch}")
    if head_sha is None:
        return Row(name, ref, "WRONG", f"{repo.url} has no branch {branch!r}. To fix, set components.{name}.branch.")
    with contextlib.suppress(CleanBuildError):  # a fetch of an unknown SHA fails; resolve() says so below
        repo.fetch(branch, ref)
    if repo.resolve(ref) is None:
        return Row(name, ref, "WRONG", f"{ref[:12]} is not a commit of {repo.url}. To fix, pin a commit of that repository (`invoke pins --bump {name}`).")
    pinned, head = repo.commit(ref), repo.commit(head_sha)
    facts: dict[str, object] = {"date": pinned.date, "subject": pinned.subject, "branch": branch, "head": head.sha, "head_date": head.date,
             "describe": repo.describe(ref)}
    if not repo.is_ancestor(ref, head.sha):
        others = sorted(n for n, sha in heads.items() if sha == ref)
        where = f"only on {', '.join(others)}" if others else f"not on {branch}"
        return Row(name, ref, "WRONG", f"{ref[:12]} is {where}. To fix, pin the commit that landed on {branch} (`invoke pins --bump {name} --to SHA`).", facts)
    behind = repo.count(ref, head.sha)
    days = (dt.datetime.fromisoformat(head.date) - dt.datetime.fromisoformat(pinned.date)).days
    facts.update(behind=behind, days_behind=days)
    return Row(name, ref, "ok", f"on {branch}, {pinned.date[:10]} ({facts['describe'] or '-'}); {behind} commits / {days} days behind {head.sha[:8]}", facts)


def _default_branch(heads: dict[str, str]) -> str:
    head = heads.get("HEAD")
    for name, sha in heads.items():
        if name.startswith("refs/heads/") and sha == head:
            return name.removeprefix("refs/heads/")
    return "main"


def pair(aiter: Repo, aiter_ref: str, atom: Repo, atom_ref: str) -> Row:
    result = unresolved(_tree(atom, atom_ref), _tree(aiter, aiter_ref))
    pin = f"atom {atom_ref[:8]} / aiter {aiter_ref[:8]}"
    facts = {"imports_checked": result.checked, "missing": [str(m) for m in result.missing],
             "undecided": [str(m) for m in result.undecided]}
    if result.missing:
        shown = ", ".join(str(m) for m in result.missing[:5])
        return Row("aiter/atom", pin, "WRONG", f"ATOM imports {len(result.missing)} names aiter lacks: {shown}. To fix, choose the pins as a pair.", facts)
    return Row("aiter/atom", pin, "ok", f"all {result.checked} aiter imports of ATOM resolve ({len(result.undecided)} only through aiter's import hooks)", facts)


def _tree(repo: Repo, ref: str) -> Tree:
    files = repo.python_files(ref)  # the Tree reads only *.py files
    return Tree(list(files), files.get)


def flydsl(profile: Profile, aiter: Repo) -> Row:
    ref = profile.component("aiter").ref
    setup = aiter.show(ref, "setup.py") or b""
    m = FLYDSL.search(setup.decode(errors="replace"))
    want = m.group(1) if m else None
    comp = profile.component("flydsl")
    if comp.source == "pypi":
        have: str | None = comp.version
        where = "components.flydsl.version"
    else:
        runtime, _ = lock.lock_paths(profile)
        have, where = (lock.packages(runtime).get("flydsl") if runtime.is_file() else None), runtime.name
    if want is None:
        return Row("flydsl", str(have), "unchecked", f"aiter {ref[:8]} setup.py names no FLYDSL_VERSION")
    status = "ok" if have == want else "WRONG"
    fix = "" if status == "ok" else " To fix, run `invoke lock` (or set components.flydsl.version to aiter's)."
    return Row("flydsl", str(have), status, f"aiter {ref[:8]} pins flydsl=={want}; {where} has {have}.{fix}")


def pypi_pin(name: str, package: str, version: str, python: str) -> Row:
    data = _json(f"https://pypi.org/pypi/{package}/json")
    if data is None:
        return Row(name, f"{package}=={version}", "unchecked", "PyPI did not answer")
    files = data.get("releases", {}).get(version)
    if files is None:
        return Row(name, f"{package}=={version}", "WRONG", f"PyPI has no {package} {version}. To fix, pin a released version.")
    wheels = [f["filename"] for f in files if installable(f["filename"], python)]
    if not wheels:
        return Row(name, f"{package}=={version}", "WRONG", f"{package} {version} has no wheel for Python {python}. To fix, pin one that has.")
    return Row(name, f"{package}=={version}", "ok", f"on PyPI: {wheels[0]}")


def installable(filename: str, python: str) -> bool:
    """A wheel a glibc x86_64 base with this CPython takes: cpXY, an abi3 wheel for an earlier CPython, or py3 pure;
    manylinux or linux_x86_64 (never musllinux), or any."""
    if not filename.endswith(".whl"):
        return False
    parts = filename[:-4].split("-")
    py, abi, plat = parts[-3], parts[-2], parts[-1]
    want = int(python.split(".")[1])
    pythons = {p for p in py.split(".")}
    ok_py = f"cp3{want}" in pythons or "py3" in pythons or (
        abi == "abi3" and any(p.startswith("cp3") and p[3:].isdigit() and int(p[3:]) <= want for p in pythons))
    ok_plat = plat == "any" or (("manylinux" in plat or plat.startswith("linux_")) and "x86_64" in plat)
    return ok_py and ok_plat


def index_pin(name: str, url: str, version: str, python: str) -> Row:
    page = _text(f"{url.rstrip('/')}/{name}/")
    pin = f"{name}=={version} @ {url}"
    if page is None:
        return Row(name, pin, "unchecked", f"{url} did not answer from this machine")
    tag = "cp" + python.replace(".", "")
    found = f"{name}-{version.replace('+', '%2B')}-{tag}" in page or f"{name}-{version}-{tag}" in page
    return Row(name, pin, "ok" if found else "WRONG",
               f"{'listed' if found else 'NOT listed'} for {tag} on {url}" + ("" if found else ". To fix, pin a version the index has."))


def _text(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=20) as response:  # noqa: S310 - https URLs from the profile
            text: str = response.read().decode(errors="replace")  # urlopen's response is untyped
            return text
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _json(url: str) -> dict[str, Any] | None:
    text = _text(url)
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


# ---- bump -----------------------------------------------------------------------------------------------------

@dataclass
class Bump:
    component: str
    old: str
    new: str
    describe: str | None
    date: str
    outcomes: dict[str, str]
    drift: list[str]
    diff: str
    written: bool


def bump(profile: Profile, component: str, to: str | None, *, dry_run: bool,
         relock: Mapping[str, object] | None = None) -> Bump:
    """Move one git pin when every patch still holds on the candidate. relock: the overrides (--set, invoke.yaml)
    the affected profiles are loaded with to remake their locks (None leaves the locks alone). The profile file
    and every lock it feeds are written as one change (cleanbuild.core.atomic), or nothing is."""
    comp = profile.component(component)
    if comp.source != "git":
        raise UsageError(f"--bump {component!r}: components.{component} is not a git pin. To fix, bump one of: "
                         f"{', '.join(c.name for c in profile.components if c.source == 'git')}.")
    if to is not None:
        git_ref(to, "--to")
    repo = Repo(profile.read_from(component))
    heads = repo.heads()
    branch = comp.branch or _default_branch(heads)
    target = to or heads.get(f"refs/heads/{branch}")
    if target is None:
        raise UsageError(f"{repo.url} has no branch {branch}. To fix, pass --to SHA.")
    repo.fetch(branch, *([target] if SHA.match(target) else []))
    new = repo.commit(target)
    landed = git_pin(component, repo, new.sha, branch)  # the rule `invoke pins` checks, word for word
    if landed.status != "ok":
        raise UsageError(f"pins --bump {component} refused: {landed.detail}")
    outcomes, drift = patch_check(repo, new.sha)
    file = _target_file(profile, component)
    text = file.read_text()
    note = (f"pins --bump {dt.date.today().isoformat()}: {new.sha[:12]} ({repo.describe(new.sha) or '-'}, "
            f"{new.date[:10]}) on {branch}; patches: {', '.join(f'{k}={v}' for k, v in outcomes.items())}")
    old = comp.ref
    updated = rewrite_ref(text, component, old, new.sha, note) if file == _defining_file(profile, component) \
        else add_ref(text, component, new.sha, note)
    diff = "".join(difflib.unified_diff(text.splitlines(True), updated.splitlines(True), str(file), str(file)))
    result = Bump(component, old, new.sha, repo.describe(new.sha), new.date, outcomes, drift, diff, False)
    if drift or dry_run or updated == text:
        return result
    files: dict[Path, str] = {file: updated}
    if relock is not None:
        for path in affected(file, profile.file, component):
            pinned = {**relock, f"components.{component}.ref": new.sha}
            files.update(lock.render(mirror.attach(load(path.stem, pinned, path), profile.mirror)))
    replace_all(files)
    result.written = True
    return result


def patch_check(repo: Repo, sha: str) -> tuple[dict[str, str], list[str]]:
    """Every patch's `check` on the candidate's own files (python -m patches check --json)."""
    with tempfile.TemporaryDirectory() as tmp:
        present = repo.export(sha, list(PATCH_TARGETS), Path(tmp))
        if not present:
            return {}, []
        proc = run(patches_argv("check", tmp, "--json"), cwd=REPO_ROOT, capture=True, check=False, echo=False)
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            raise StepFailed(f"patches check gave no report: {proc.stderr.strip()[-300:]}") from None
    outcomes = {p["name"]: p["outcome"] for p in data["patches"] if p["outcome"] != "not-present"}
    drift = [p["detail"] for p in data["patches"] if p["outcome"] == "drifted"]
    return outcomes, drift


def _defining_file(profile: Profile, component: str) -> Path:
    """The profile file (of the inheritance chain) whose [components.<name>] table sets `ref`."""
    for file in chain(profile.file):
        if _sets_ref(file.read_text(), component):
            return file
    raise UsageError(f"no profile file in {profile.file}'s chain pins components.{component}.ref. To fix, add "
                     f"ref = \"SHA\" under [components.{component}].")


def _target_file(profile: Profile, component: str) -> Path:
    """Where the new ref is written: the defining file, unless that is a built-in profile and the profile given is
    a file elsewhere; then the given file gets its own ref (a user's profile never edits the repository's)."""
    file = _defining_file(profile, component)
    if _builtin(file) and not _builtin(profile.file):
        return profile.file
    return file


def _builtin(file: Path) -> bool:
    return file.resolve().parent == PROFILE_DIR.resolve()


def _sets_ref(text: str, component: str) -> bool:
    # The table's lines up to the next table header (a '[' inside a comment or a value is not one).
    return bool(re.search(rf"^\[components\.{component}\]\n(?:(?!^\[).)*?^ref\s*=", text, re.MULTILINE | re.DOTALL))


def affected(file: Path, given: Path, component: str) -> list[Path]:
    """The profiles whose pin moves when `file`'s ref does: file itself, the profile given, and every profile
    beside either that inherits file and does not set the ref itself."""
    candidates = dict.fromkeys(p.resolve() for p in [file, given, *sorted(file.parent.glob("*.toml")),
                                                     *sorted(given.parent.glob("*.toml"))])
    out = []
    for path in candidates:
        try:
            files = [f.resolve() for f in chain(path)]
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue  # not a profile this bump can read: it cannot inherit the file either
        if file.resolve() not in files:
            continue
        below = files[: files.index(file.resolve())]
        if not any(_sets_ref(f.read_text(), component) for f in below):
            out.append(path)
    return out


def add_ref(text: str, component: str, new: str, note: str) -> str:
    """A `ref = "new"` line (with its note) in the component's table, the table appended when the file lacks it."""
    header = f"[components.{component}]\n"
    line = f'# {note}\nref = "{new}"\n'
    if header in text:
        return text.replace(header, header + line, 1)
    return text + ("" if text.endswith("\n") or not text else "\n") + "\n" + header + line


def rewrite_ref(text: str, component: str, old: str, new: str, note: str) -> str:
    """The table's `ref = "old"` line becomes new, with a `# pins --bump ...` line above it (replacing an older one)."""
    section = re.search(rf"^\[components\.{component}\]\n(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
    if section is None:
        raise UsageError(f"[components.{component}] not found.")
    body = section.group(1)
    body = re.sub(r"^# pins --bump .*\n", "", body, flags=re.MULTILINE)
    if f'ref = "{old}"' not in body:
        raise UsageError(f"components.{component}.ref is not written as ref = \"{old}\"; edit it by hand.")
    body = body.replace(f'ref = "{old}"', f'# {note}\nref = "{new}"', 1)
    return text[: section.start(1)] + body + text[section.end(1):]
