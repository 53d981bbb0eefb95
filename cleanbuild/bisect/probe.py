"""Check one commit's package tree: patch it as the image would (`python -m patches apply`), run the validation
checks on it (`python -m validation --aiter-src`), resolve ATOM's aiter imports (cleanbuild.upstream.imports).

Each check ends good, bad or untestable, with one line that says why. A patch is bad when it drifts or its outcome
differs from the one at --good (the baseline); import is bad when an import resolved at --good no longer does;
a validation check is bad when it failed.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cleanbuild.bisect import tree as trees
from cleanbuild.bisect import warm
from cleanbuild.bisect.checks import IMPORT, PATCH, VALIDATION, Check
from cleanbuild.core.errors import EnvironmentProblem
from cleanbuild.core.run import run
from cleanbuild.core.spec import REPO_ROOT, patches_argv
from cleanbuild.upstream.imports import MEMO, Memo, Missing, Tree, unresolved

GOOD, BAD, UNTESTABLE = "good", "bad", "untestable"


@dataclass(frozen=True)
class Finding:
    check: str  # the check's label: patch:<name>, a validation name, import
    state: str  # GOOD, BAD, UNTESTABLE
    line: str  # one line: what the check saw
    value: object = None  # the outcome, status or missing imports: what the baseline keeps

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Setup:
    """What every step of one bisection shares (the plan file the run script reads)."""

    component: str
    arch: str | None
    device: str | None
    other_tree: str | None  # the other component's package tree at its pin (import only)
    baseline: dict[str, Any]  # check label -> value at --good; empty while --good itself is tested
    memo: str | None = None  # the import check's per-file facts, kept from step to step (imports.Memo)
    warm: str | None = None  # the socket of the bisection's warm validation process (cleanbuild.bisect.warm)


def probe(setup: Setup, checks: tuple[Check, ...], root: Path) -> list[Finding]:
    """Every check on the tree under root (which holds aiter/ or atom/); patches are applied in place first."""
    kinds = {c.kind for c in checks}
    patched = _patch(root) if kinds & {PATCH, VALIDATION} else {}
    drift = [d["detail"] for d in patched.values() if d["outcome"] == "drifted"]
    found = [_patch_finding(c, patched, setup.baseline) for c in checks if c.kind == PATCH]
    wanted = [c.name for c in checks if c.kind == VALIDATION]
    if wanted:
        found += _validation(setup, wanted, root, drift)
    if IMPORT in kinds:
        found.append(_imports(setup, lambda memo: _tree(root, memo)))
    order = [c.label for c in checks]
    return sorted(found, key=lambda f: order.index(f.check))


def verdict(findings: list[Finding]) -> str:
    states = {f.state for f in findings}
    return BAD if BAD in states else UNTESTABLE if UNTESTABLE in states else GOOD


def _patch(root: Path) -> dict[str, dict[str, Any]]:
    """`python -m patches apply --root ROOT --json`: every patch, as the image build runs them (all or none)."""
    proc = run(patches_argv("apply", root, "--json"), cwd=REPO_ROOT, capture=True, check=False, echo=False,
               timeout=600)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvironmentProblem(f"python -m patches apply on {root} failed because {tail}. To fix, run it by hand "
                                 "on that folder and read its message.") from None
    return {p["name"]: p for p in report["patches"]}


def _patch_finding(check: Check, patched: dict[str, dict[str, Any]], baseline: dict[str, Any]) -> Finding:
    result = patched[check.name]
    outcome, expected = result["outcome"], baseline.get(check.label)
    line = f"{check.label}: {outcome}: {result['detail']}"
    if outcome == "drifted":
        return Finding(check.label, BAD, line, outcome)
    if expected is not None and outcome != expected:
        return Finding(check.label, BAD, f"{check.label}: {outcome}, not {expected} as at --good: {result['detail']}",
                       outcome)
    return Finding(check.label, GOOD, line, outcome)


def _validation(setup: Setup, names: list[str], root: Path, drift: list[str]) -> list[Finding]:
    if drift:
        why = f"untestable: a patch drifts, so the tree is not what the image would hold ({drift[0]})"
        return [Finding(n, UNTESTABLE, f"{n}: {why}") for n in names]
    out = root.parent / "validation.json"
    argv = ["--arch", setup.arch or "auto", "--aiter-src", str(root), "--json", str(out), "--only", *names]
    argv += ["--device", setup.device] if setup.device else []
    code, stderr = _validate(setup, argv, root.parent)
    if not out.is_file():  # a usage error at this commit (no aiter package there): this commit cannot say
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        return [Finding(n, UNTESTABLE, f"{n}: untestable: python -m validation exited {code}: {tail}")
                for n in names]
    report = {c["name"]: c for c in json.loads(out.read_text())["checks"]}
    return [validation_finding(report[n]) for n in names]


def _validate(setup: Setup, argv: list[str], folder: Path) -> tuple[int, str]:
    """`python -m validation ARGV`: (exit code, stderr), in a child of the warm process when there is one."""
    if setup.warm:
        with contextlib.suppress(OSError):  # gone or never started: a process of our own gives the same answer
            return warm.ask(setup.warm, argv, folder)
    proc = run([sys.executable, "-m", "validation", *argv], cwd=REPO_ROOT, capture=True, check=False, echo=False,
               timeout=600)
    return proc.returncode, proc.stderr


def validation_finding(check: dict[str, Any], where: str = "") -> Finding:
    """One check of validation's JSON report as a finding (where: said after its status, e.g. " in the image")."""
    state = BAD if check["status"] == "failed" else GOOD
    reason = check["reason"].removeprefix(f"{check['status']}: ")  # validation's reason may start with its status
    return Finding(check["name"], state, f"{check['name']}: {check['status']}{where}: {reason}", check["status"])


def imports_only(setup: Setup, files: dict[str, bytes]) -> list[Finding]:
    """The import check alone, on the commit's files as read from git: nothing is patched, so nothing is written."""
    return [_imports(setup, lambda memo: Tree(list(files), files.get, memo))]


def _imports(setup: Setup, this_commit: Callable[[Memo], Tree]) -> Finding:
    """ATOM's non-optional aiter imports, with aiter or ATOM at this commit and the other at its pin."""
    # The process's own facts (the bisection's first steps run in the command's process) and the earlier steps'.
    memo = MEMO.merge(Memo.load(Path(setup.memo))) if setup.memo else MEMO
    here = this_commit(memo)
    other = _tree(Path(setup.other_tree or ""), memo)
    atom, aiter = (other, here) if setup.component == "aiter" else (here, other)
    result = unresolved(atom, aiter)
    if setup.memo:  # the next step's process parses only the files this commit changed
        memo.save(Path(setup.memo))
    missing = sorted({_key(m) for m in result.missing})
    before = set(setup.baseline.get(IMPORT, []))
    new = [str(m) for m in result.missing if _key(m) not in before]
    if new:
        shown = ", ".join(new[:3]) + (f" (+{len(new) - 3} more)" if len(new) > 3 else "")
        return Finding(IMPORT, BAD, f"import: ATOM imports {len(new)} name(s) aiter lacks: {shown}", missing)
    return Finding(IMPORT, GOOD, f"import: all {result.checked} aiter imports of ATOM resolve"
                   + (f" but the {len(before)} missing at --good" if before else ""), missing)


def _key(missing: Missing) -> str:
    """What is missing and in which file, not on which line: an edit above the import does not make it new."""
    return f"{missing.module}{'.' + missing.name if missing.name else ''} ({missing.file})"


def _tree(root: Path, memo: Memo) -> Tree:
    def read(path: str) -> bytes | None:
        file = root / path
        return file.read_bytes() if file.is_file() else None

    return Tree(trees.files(root), read, memo)
