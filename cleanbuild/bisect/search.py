"""The search: git's own bisect (start --no-checkout [--first-parent], run) in a temporary bare repository that
borrows the cache's objects (objects/info/alternates), so neither the cache nor a shared read-only repository is
written, and nothing (no worktree, no bisect state) is left behind, also on Ctrl-C.

--good is tested first (its patch outcomes and missing imports become the baseline; a check already failing there
is bad input), then --bad (every commit good when it passes), then git bisect run over what lies between:
at most log2(N) + 2 check runs for N commits.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from cleanbuild.bisect import imagestep, probe, step, tree, warm
from cleanbuild.bisect.checks import IMPORT, VALIDATION, Check
from cleanbuild.core.errors import StepFailed, UsageError
from cleanbuild.core.interrupts import held
from cleanbuild.core.run import run, run_logged
from cleanbuild.core.spec import REPO_ROOT
from cleanbuild.upstream.gitrepo import Commit, Repo
from cleanbuild.upstream.profiles import Profile

PR = re.compile(r"\(#(\d+)\)")


@dataclass(frozen=True)
class Range:
    component: str
    good: Commit
    bad: Commit
    commits: int  # in good..bad (first-parent or all), bad included
    first_parent: bool


@dataclass
class Outcome:
    range: Range
    checks: tuple[Check, ...]
    exit_code: int  # 0 found, 1 none bad / none to test / undecided
    summary: str
    first_bad: Commit | None = None
    pull_request: int | None = None
    at_first_bad: list[str] = field(default_factory=list)  # the failing lines there
    at_parent: list[str] = field(default_factory=list)  # the same checks' lines at its first parent
    steps: list[step.Step] = field(default_factory=list)
    image: bool = False  # each step built the commit's image (bisect --image)


def bisect(profile: Profile, component: str, good: str, bad: str, checks: tuple[Check, ...], *, arch: str | None,
           device: str | None, first_parent: bool = True, image: imagestep.Setup | None = None) -> Outcome:
    """image: each step builds the commit's image and validates it (bisect --image), else checks its tree."""
    repo = _repo(profile, component)
    span = resolve_range(repo, component, good, bad, first_parent)
    if span.commits == 0:
        return Outcome(span, checks, 1, f"the range {good}..{bad} holds no commit to test", image=image is not None)
    work = Path(tempfile.mkdtemp(prefix="cleanbuild-bisect-"))
    try:
        other = _other_tree(profile, component, work) if any(c.kind == IMPORT for c in checks) else None
        validates = image is None and any(c.kind == VALIDATION for c in checks)
        with warm.started(work) if validates else contextlib.nullcontext() as socket:
            plan = step.Plan(str(repo.git_dir), str(work / "bisect.git"), component, checks,
                             probe.Setup(component, arch, device, other, {}, str(work / "imports-memo.json"), socket),
                             str(work / "steps.jsonl"), str(work),
                             imagestep.save(image, work / "image-setup.pickle") if image else None)
            return _search(repo, plan, span, work)
    finally:
        with held():
            _cleanup(work)


def _repo(profile: Profile, component: str) -> Repo:
    comp = profile.component(component)
    if comp.source != "git":
        raise UsageError(f"bisect {component} failed because the profile {profile.name} does not build it from git. "
                         "To fix, choose a profile that pins it by commit (default, offline).")
    return Repo(profile.read_from(component))  # the mirror's copy when one is set


def resolve_range(repo: Repo, component: str, good: str, bad: str, first_parent: bool) -> Range:
    repo.fetch(good, bad)  # a URL: into the cache (unreachable: exit 3); a local repository is read in place
    for flag, ref in (("--good", good), ("--bad", bad)):
        if repo.resolve(ref) is None:
            raise UsageError(f"{flag} {ref} failed because it is not a commit of {repo.url}. To fix, pass a commit, "
                             "branch or tag of that repository.")
    old, new = repo.commit(good), repo.commit(bad)
    if not repo.is_ancestor(old.sha, new.sha):
        raise UsageError(f"--good {good} failed because it is not an ancestor of --bad {bad}. To fix, pass an older "
                         "--good (or swap them).")
    argv = ["rev-list", "--count", *(["--first-parent"] if first_parent else []), "--end-of-options",
            f"{old.sha}..{new.sha}"]
    return Range(component, old, new, int(repo.git(*argv).strip() or 0), first_parent)


def _other_tree(profile: Profile, component: str, work: Path) -> str:
    """The other component's package at its pin, once: ATOM's imports are checked against it at every step."""
    name = "atom" if component == "aiter" else "aiter"
    pin = profile.component(name)
    if pin.source != "git":
        raise UsageError(f"--check import failed because the profile {profile.name} has no git pin of {name}. To "
                         "fix, choose a profile that pins both (default, offline).")
    repo = Repo(profile.read_from(name))
    ref = pin.ref
    repo.fetch(ref)
    tree.export(repo.git_dir, repo.commit(ref).sha, name, work / "other")
    return str(work / "other")


def _search(repo: Repo, plan: step.Plan, span: Range, work: Path) -> Outcome:
    first = step.test(plan, span.good.sha)
    if first.verdict != probe.GOOD:
        line = next(f.line for f in first.findings if f.state != probe.GOOD)
        raise UsageError(f"--good {span.good.sha[:12]} failed because it is not good already: {line}. To fix, pass "
                         "an older --good where every check holds (or fewer --check).")
    plan = replace(plan, setup=replace(plan.setup, baseline={f.check: f.value for f in first.findings}))
    step.Plan.write(plan, work / "plan.json")
    last = step.test(plan, span.bad.sha)
    outcome = Outcome(span, plan.checks, 1, "", steps=[first, last], image=plan.image is not None)
    if last.verdict == probe.GOOD:
        outcome.summary = f"every check holds at --bad {span.bad.sha[:12]}: nothing broke between --good and --bad"
        return outcome
    if last.verdict == probe.UNTESTABLE:
        line = next(f.line for f in last.findings if f.state != probe.GOOD)
        raise UsageError(f"--bad {span.bad.sha[:12]} failed because it cannot be tested: {line}. To fix, pass a "
                         "--bad where the checks can run.")
    found = _git_bisect(plan, span, work)
    outcome.steps += _recorded(plan)[2:]
    return _found(repo, plan, outcome, found)


def _git_bisect(plan: step.Plan, span: Range, work: Path) -> list[str]:
    """git bisect start/run; the first bad commit, or the candidates when skipped commits leave it open."""
    bisect_dir = _bisect_repo(Path(plan.git_dir), work, span.bad.sha)
    git = ["git", "-c", "safe.directory=*", "--git-dir", str(bisect_dir), "bisect"]
    run([*git, "start", "--no-checkout", *(["--first-parent"] if span.first_parent else []), span.bad.sha,
         span.good.sha, "--"], capture=True, echo=False)  # full SHAs (resolved), so never read as options
    log = work / "bisect.log"
    code = run_logged([*git, "run", sys.executable, "-m", "cleanbuild.bisect.step", str(work / "plan.json")], log,
                      env={"PYTHONPATH": str(REPO_ROOT)})
    text = log.read_text(errors="replace")
    found = re.search(r"^([0-9a-f]{40}) is the first bad commit", text, re.MULTILINE)
    if found:
        return [found.group(1)]
    if "only 'skip'ped commits left" in text:
        return re.findall(r"^([0-9a-f]{40})$", text.split("could be any of:", 1)[-1], re.MULTILINE)
    tail = [line for line in text.splitlines() if line.strip()][-3:]
    raise StepFailed(f"git bisect run stopped (exit {code}) because {' / '.join(tail) or 'it said nothing'}. To fix, "
                     "read the step's error above; --debug shows where it was raised.")


def _bisect_repo(source: Path, work: Path, head: str) -> Path:
    """A bare repository with no objects of its own: it reads the source's (and keeps its shallow boundary). Its
    HEAD is detached at head: git bisect start needs a HEAD to return to."""
    bisect_dir = work / "bisect.git"
    run(["git", "init", "-q", "--bare", "--", str(bisect_dir)], capture=True, echo=False)
    (bisect_dir / "objects" / "info" / "alternates").write_text(f"{(source / 'objects').resolve()}\n")
    if (source / "shallow").is_file():
        shutil.copyfile(source / "shallow", bisect_dir / "shallow")
    (bisect_dir / "HEAD").write_text(f"{head}\n")
    return bisect_dir


def _recorded(plan: step.Plan) -> list[step.Step]:
    import json

    lines = Path(plan.record).read_text().splitlines() if Path(plan.record).is_file() else []
    return [step.Step.from_json(json.loads(line)) for line in lines]


def _found(repo: Repo, plan: step.Plan, outcome: Outcome, found: list[str]) -> Outcome:
    if len(found) != 1:
        outcome.summary = (f"skipped commits leave it open: the first bad commit is one of "
                           f"{', '.join(s[:12] for s in found)}")
        return outcome
    sha = found[0]
    first = repo.commit(sha)
    parent = repo.git("rev-parse", "--verify", "--end-of-options", f"{sha}^1").strip()
    by_sha = {s.sha: s for s in outcome.steps}
    at_bad = by_sha.get(sha) or step.test(plan, sha)
    at_parent = by_sha.get(parent) or step.test(plan, parent)
    failing = {f.check for f in at_bad.findings if f.state == probe.BAD}
    pr = PR.findall(first.subject)
    outcome.exit_code, outcome.first_bad = 0, first
    outcome.pull_request = int(pr[-1]) if pr else None
    outcome.at_first_bad = [f.line for f in at_bad.findings if f.check in failing]
    outcome.at_parent = [f.line for f in at_parent.findings if f.check in failing]
    outcome.summary = f"{sha} is the first bad commit"
    return outcome


def _cleanup(work: Path) -> None:
    bisect_dir = work / "bisect.git"
    if (bisect_dir / "HEAD").is_file():
        run(["git", "-c", "safe.directory=*", "--git-dir", str(bisect_dir), "bisect", "reset"], check=False,
            capture=True, echo=False)
    shutil.rmtree(work, ignore_errors=True)
