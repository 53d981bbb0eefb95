"""Plan every selected patch against a root, then write only if nothing drifted.

A patch is data: a name, a summary and one or more steps, each a target file
(relative to the root) and a `plan(Source) -> Plan` function. The engine does
the rest: reading, the rewrite, re-parsing, the idempotence check, diffs, and
the writes (all files or none).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from patches.source import Drift, Edit, Source
from patches.writer import Change, write_all

APPLIED = "applied"
ALREADY_APPLIED = "already-applied"
UPSTREAM_FIXED = "upstream-fixed"
NOT_PRESENT = "not-present"
DRIFTED = "drifted"
OUTCOMES = (APPLIED, ALREADY_APPLIED, UPSTREAM_FIXED, NOT_PRESENT, DRIFTED)


@dataclass(frozen=True)
class Plan:
    """What a step found: edits to make (APPLIED), or why none are needed."""

    state: str
    detail: str
    edits: tuple[Edit, ...] = ()

    @classmethod
    def rewrite(cls, detail: str, *edits: Edit) -> Plan:
        return cls(APPLIED, detail, edits)

    @classmethod
    def already(cls, detail: str) -> Plan:
        return cls(ALREADY_APPLIED, detail)

    @classmethod
    def upstream(cls, detail: str) -> Plan:
        return cls(UPSTREAM_FIXED, detail)


@dataclass(frozen=True)
class Step:
    target: str
    plan: Callable[[Source], Plan]


@dataclass(frozen=True)
class Patch:
    name: str
    summary: str
    steps: tuple[Step, ...]

    @property
    def target(self) -> str:
        """The file whose presence decides whether the patch applies at all."""
        return self.steps[0].target

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(step.target for step in self.steps)


@dataclass(frozen=True)
class Result:
    name: str
    target: str
    outcome: str
    detail: str
    diff: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "target": self.target,
            "outcome": self.outcome,
            "detail": self.detail,
            "diff": self.diff,
        }


@dataclass
class Report:
    root: str
    mode: str
    results: list[Result]
    written: list[str] = field(default_factory=list)

    @property
    def drifted(self) -> list[Result]:
        return [r for r in self.results if r.outcome == DRIFTED]

    @property
    def exit_code(self) -> int:
        if self.drifted:
            return 2
        if self.mode == "check" and any(r.outcome == APPLIED for r in self.results):
            return 1
        return 0

    def to_json(self) -> dict[str, object]:
        return {
            "root": self.root,
            "mode": self.mode,
            "exit_code": self.exit_code,
            "patches": [r.to_json() for r in self.results],
        }


class Workspace:
    """The target files under a root: what is on disk, and what the plans made of it."""

    def __init__(self, root: Path):
        self.root = root
        self.original: dict[str, bytes] = {}
        self.current: dict[str, bytes] = {}

    def exists(self, target: str) -> bool:
        return (self.root / target).is_file()

    def read(self, target: str) -> bytes:
        if target not in self.current:
            self.original[target] = self.current[target] = (self.root / target).read_bytes()
        return self.current[target]

    def changed(self) -> list[str]:
        return [t for t, data in self.current.items() if data != self.original[t]]

    def write_changed(self) -> list[str]:
        """Write every changed file or none (writer.WriteError names the one that failed)."""
        changed = self.changed()
        write_all([Change(t, self.root / t, self.current[t], self.original[t]) for t in changed])
        return changed


def run(root: Path, patches: Iterable[Patch], mode: str) -> Report:
    """Plan all patches in order (later ones see earlier rewrites of a shared
    file); in apply mode write the changed files only when none drifted."""
    workspace = Workspace(root)
    report = Report(str(root), mode, [plan_patch(p, workspace) for p in patches])
    if mode == "apply" and not report.drifted:
        report.written = workspace.write_changed()
    elif mode == "apply":
        report.results = [_unwritten(r) for r in report.results]
    return report


def _unwritten(result: Result) -> Result:
    # The outcome stays what the patch would do; the detail says it did not happen.
    if result.outcome != APPLIED:
        return result
    return replace(result, detail=f"not written (another patch drifted): {result.detail}")


def plan_patch(patch: Patch, workspace: Workspace) -> Result:
    if not workspace.exists(patch.target):
        return Result(patch.name, patch.target, NOT_PRESENT, f"{patch.target} is not under the root")
    staged: dict[str, bytes] = {}
    states, details, diffs = [], [], []
    for step in patch.steps:
        try:
            before = staged[step.target] if step.target in staged else _read_step(step, workspace)
            state, detail, after = plan_step(step, before)
        except Drift as drift:
            where = f"{step.target}:{drift.line}" if drift.line else step.target
            message = f"{patch.name}: {where}: expected {drift.expected}"
            return Result(patch.name, patch.target, DRIFTED, message)
        staged[step.target] = after
        states.append(state)
        details.append(f"{step.target}: {detail}" if len(patch.steps) > 1 else detail)
        diffs.append(unified_diff(step.target, before, after))
    workspace.current.update(staged)
    return Result(patch.name, patch.target, _combine(states), "; ".join(details), "".join(diffs))


def _read_step(step: Step, workspace: Workspace) -> bytes:
    if not workspace.exists(step.target):
        raise Drift(0, "this file to exist next to the patch's main target")
    return workspace.read(step.target)


def plan_step(step: Step, before: bytes) -> tuple[str, str, bytes]:
    src = Source(before, step.target)
    plan = step.plan(src)
    if plan.state != APPLIED:
        return plan.state, plan.detail, before
    after = src.apply(list(plan.edits))
    _verify(step, after)
    return APPLIED, plan.detail, after


def _verify(step: Step, after: bytes) -> None:
    """The rewrite must parse, and planning it again must find it applied:
    that is what makes a second run a byte-for-byte no-op."""
    try:
        again = step.plan(Source(after, step.target))
    except Drift as drift:
        raise Drift(drift.line, f"the rewritten file to pass its own check ({drift.expected})") from drift
    if again.state != ALREADY_APPLIED:
        raise Drift(
            0, f"the rewritten file to read as already applied, not {again.state} (a bug in the patch)"
        )


def _combine(states: list[str]) -> str:
    for outcome in (APPLIED, ALREADY_APPLIED):
        if outcome in states:
            return outcome
    return UPSTREAM_FIXED


def unified_diff(target: str, before: bytes, after: bytes) -> str:
    if before == after:
        return ""
    old, new = _lines(before), _lines(after)
    lines = difflib.unified_diff(old, new, f"a/{target}", f"b/{target}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _lines(data: bytes) -> list[str]:
    # Split at "\n" only (str.splitlines also splits at form feeds and the like).
    return re.findall(r"[^\n]*\n|[^\n]+\Z", data.decode("utf-8"))
