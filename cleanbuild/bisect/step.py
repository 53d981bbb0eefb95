"""`python -m cleanbuild.bisect.step PLAN [--commit SHA]`: test one commit, git bisect run's exit-code protocol.

Without --commit it tests BISECT_HEAD of the bisection's repository (git bisect start --no-checkout): its source
tree, or (with an image setup, `bisect --image`) an image built of it (cleanbuild.bisect.imagestep). Exit 0 good,
1 bad, 125 untestable (skip it: the package is absent there, a patch drifts under a validation check), 128 to
abort the bisection (an error of the host, said in the record), 130 interrupted. Each step appends one JSON line
to the plan's record file: the commit, its verdict, its findings and its seconds.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cleanbuild.bisect import probe, tree
from cleanbuild.bisect.checks import IMPORT, Check
from cleanbuild.core.errors import CleanBuildError, Interrupted
from cleanbuild.core.run import run

EXIT = {probe.GOOD: 0, probe.BAD: 1, probe.UNTESTABLE: 125}
ABORT = 128


@dataclass(frozen=True)
class Plan:
    git_dir: str  # the repository the trees are exported from (the cache, or a local repository)
    bisect_dir: str  # the temporary repository git bisect runs in (BISECT_HEAD)
    package: str  # aiter or atom: the folder exported at each commit
    checks: tuple[Check, ...]
    setup: probe.Setup
    record: str  # JSON lines, one per step
    work: str  # where each step's tree is made and removed
    image: str | None = None  # bisect --image: the file holding the imagestep.Setup (each step builds an image)

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path

    @classmethod
    def read(cls, path: Path) -> Plan:
        data = json.loads(path.read_text())
        return cls(**{**data, "checks": tuple(Check(**c) for c in data["checks"]),
                      "setup": probe.Setup(**data["setup"])})


@dataclass(frozen=True)
class Step:
    sha: str
    verdict: str
    seconds: float
    findings: tuple[probe.Finding, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        return cls(data["sha"], data["verdict"], data["seconds"], tuple(probe.Finding(**f) for f in data["findings"]))


def test(plan: Plan, sha: str) -> Step:
    """Check sha (its tree, or its image), record the step."""
    start = time.perf_counter()
    if plan.image:  # imported here: the build pipeline (reports, SBOM, templates) is 0.2 s of a tree step's start
        from cleanbuild.bisect import imagestep

        folder = Path(tempfile.mkdtemp(prefix=f"{sha[:12]}-image-", dir=plan.work))
        try:
            findings = imagestep.probe(imagestep.load(Path(plan.image)), plan.package, plan.checks, sha, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    else:
        findings = _tree_findings(plan, sha)
    step = Step(sha, probe.verdict(findings), round(time.perf_counter() - start, 2), tuple(findings))
    with Path(plan.record).open("a") as record:
        record.write(json.dumps({**asdict(step), "findings": [f.to_json() for f in findings]}) + "\n")
    return step


def _tree_findings(plan: Plan, sha: str) -> list[probe.Finding]:
    """Export sha's package and check it. A commit without the package is untestable."""
    if {c.kind for c in plan.checks} == {IMPORT}:  # nothing to patch or run: the files are read in memory
        try:
            return probe.imports_only(plan.setup, tree.contents(Path(plan.git_dir), sha, plan.package))
        except CleanBuildError as exc:
            return _untestable(plan, exc)
    work = Path(tempfile.mkdtemp(prefix=f"{sha[:12]}-", dir=plan.work))
    try:
        try:
            tree.export(Path(plan.git_dir), sha, plan.package, work / "tree")
        except CleanBuildError as exc:
            if (work / "tree" / plan.package).is_dir():
                raise
            return _untestable(plan, exc)
        return probe.probe(plan.setup, plan.checks, work / "tree")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _untestable(plan: Plan, exc: CleanBuildError) -> list[probe.Finding]:
    """git could not archive the package: untestable where the commit has none, else the error stands."""
    if "did not match any files" not in str(exc):
        raise exc
    return [probe.Finding(c.label, probe.UNTESTABLE, f"{c.label}: untestable: no {plan.package}/ there")
            for c in plan.checks]


def bisect_head(plan: Plan) -> str:
    argv = ["git", "-c", "safe.directory=*", "--git-dir", plan.bisect_dir, "rev-parse", "--verify", "BISECT_HEAD"]
    return run(argv, capture=True, echo=False).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        plan = Plan.read(Path(args[0]))
        sha = args[2] if args[1:2] == ["--commit"] else bisect_head(plan)
        step = test(plan, sha)
    except (KeyboardInterrupt, Interrupted):
        return 130
    except Exception as exc:  # noqa: BLE001 - any error aborts the bisection (exit 1 would call the commit bad)
        print(f"bisect step: error: {exc}", file=sys.stderr)
        return ABORT
    bad = [f.line for f in step.findings if f.state != probe.GOOD]
    print(f"bisect step: {sha[:12]} {step.verdict} ({step.seconds:.1f} s){': ' + bad[0] if bad else ''}",
          file=sys.stderr)
    return EXIT[step.verdict]


if __name__ == "__main__":
    sys.exit(main())
