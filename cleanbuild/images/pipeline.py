"""The executor: runs a sequence of steps (cleanbuild.images.steps) against a plan, then cleans up, pass or fail.

build-clean runs every step; a single-step task runs the steps it needs. A failure or Ctrl-C leaves no release
tag: the candidate gets a `<run-id>-failed` tag, every container carrying the run's label is removed, a release tag
already applied is removed, and a failed report is written. Cleanup runs with SIGINT held back, so a second Ctrl-C cannot stop
it half-way, and it reports what it actually did.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from cleanbuild.core import engine, interrupts
from cleanbuild.core.console import console, step_done, step_started
from cleanbuild.core.errors import CleanBuildError, Interrupted
from cleanbuild.images import report, steps
from cleanbuild.images.observe import observe
from cleanbuild.images.plan import Plan
from cleanbuild.images.record import BuildRecord, StepFailedWith, StepRecord, StepStatus
from cleanbuild.images.schedule import Site
from cleanbuild.images.steps import Journal, Outcome

if TYPE_CHECKING:
    from docker.client import DockerClient


@dataclass(frozen=True)
class Ctx:
    """What one run holds for its steps: the plan (its options hold the typed request), the engine client, the
    journal cleanup reads, --rebuild, the patches --only names, and whether the run builds images (preflight then
    asks for the profile's disk, else for 2 GiB)."""

    plan: Plan
    client: DockerClient
    journal: Journal
    rebuild: bool = False
    patch_only: tuple[str, ...] = ()
    builds: bool = True

    def site(self, rec: BuildRecord) -> Site:
        """Where a building step has its units: with the engine as preflight found it (rec.engine)."""
        return Site(self.plan, self.client, rec.engine, self.rebuild)


Step = Callable[[Ctx, BuildRecord], Outcome]

# Every step, in build order, with what each is given (cleanbuild.images.steps). A plan's steps and each task's
# name them; run() calls them in the order it is given.
STEPS: dict[str, Step] = {
    "preflight": lambda ctx, rec: steps.preflight(ctx.client, ctx.plan, rec, builds=ctx.builds),
    "prepare": lambda ctx, rec: steps.prepare(ctx.client, ctx.plan, rec),
    "wheels": lambda ctx, rec: steps.wheels(ctx.site(rec), rec),
    "clean": lambda ctx, rec: steps.clean(ctx.site(rec), rec),
    "dev": lambda ctx, rec: steps.dev(ctx.site(rec), rec),
    "patch": lambda ctx, rec: steps.patch(ctx.site(rec), rec, ctx.patch_only),
    "validate": lambda ctx, rec: steps.validate(ctx.client, ctx.plan, rec),
    "smoke": lambda ctx, rec: steps.smoke(ctx.client, ctx.plan, rec),
    "tag": lambda ctx, rec: steps.tag(ctx.client, ctx.plan, rec, ctx.journal),
    "report": lambda ctx, rec: steps.report(ctx.client, ctx.plan, rec),
    "push": lambda ctx, rec: steps.push(ctx.site(rec), rec),
}


def new_record(plan: Plan, **known: Any) -> BuildRecord:
    return BuildRecord(run_id=plan.options.run_id, started=time.monotonic(),
                       started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), **known)


def run(plan: Plan, client: DockerClient, names: Iterable[str], rec: BuildRecord | None = None, *, rebuild: bool = False,
        patch_only: tuple[str, ...] = (), failed_report: bool = True) -> BuildRecord:
    """The steps names gives (STEPS' keys), in that order, on rec (a new record when None); what each step is given
    is STEPS' line for it. rebuild: --rebuild; patch_only: the patches --only names; failed_report: cleanup writes a
    failed report."""
    names = tuple(names)
    ctx = Ctx(plan, client, Journal(), rebuild=rebuild, patch_only=patch_only,
              builds=bool({"prepare", "wheels", "clean"} & set(names)))
    rec = rec or new_record(plan)
    try:
        for name in names:
            rec = _step(ctx, rec, name)
    except KeyboardInterrupt:
        notes = _cleanup(ctx, ctx.journal.failed or rec, failed_report, "interrupted")
        raise Interrupted(f"interrupted; {notes}") from None
    except Exception as exc:  # not only ours: an OSError after the tag step must not leave the release tag
        notes = _cleanup(ctx, ctx.journal.failed or rec, failed_report, str(exc))
        console.print(f"[red]{notes}[/red]")
        raise
    return rec


def _step(ctx: Ctx, rec: BuildRecord, name: str) -> BuildRecord:
    step_started(name)
    start = time.monotonic()
    try:
        rec, status, detail = STEPS[name](ctx, rec)
    except BaseException as exc:
        detail = (str(exc).splitlines() or [type(exc).__name__])[0]
        step = StepRecord(name, StepStatus.FAILED, time.monotonic() - start, detail)
        step_done(name, StepStatus.FAILED, step.seconds, detail)
        partial = exc.record if isinstance(exc, StepFailedWith) else rec  # what it learned (validation's report)
        ctx.journal.failed = replace(partial, steps=(*rec.steps, step))
        raise
    step = StepRecord(name, status, time.monotonic() - start, detail)
    step_done(name, status, step.seconds, detail)
    return replace(rec, steps=(*rec.steps, step))


def _cleanup(ctx: Ctx, rec: BuildRecord, failed_report: bool, why: str) -> str:
    """Undo what a failed run left: containers, the release tag, temporary names; keep the candidate as -failed."""
    done, problems = [], []
    with interrupts.held(reraise=False) as pressed:
        for action in (_remove_containers, _remove_release, _keep_failed):
            try:
                note = action(ctx, rec)
                if note:
                    done.append(note)
            except CleanBuildError as exc:
                problems.append(str(exc))
        if failed_report and rec.steps:
            try:
                done.append(f"report {report.write(ctx.plan, observe(ctx.client, rec, ctx.plan.base_image), failed=True, error=why)}")
            except (CleanBuildError, OSError) as exc:
                problems.append(f"report not written ({exc})")
        if pressed:
            done.append("Ctrl-C during cleanup was held back until cleanup finished")
    summary = "; ".join(done) or "nothing to clean up"
    return summary + (f"; CLEANUP INCOMPLETE: {'; '.join(problems)}" if problems else "") + "; no release tag."


def _remove_containers(ctx: Ctx, rec: BuildRecord) -> str | None:
    removed = engine.remove_run_containers(ctx.client, rec.run_id)
    return f"removed containers {', '.join(removed)}" if removed else None


def _remove_release(ctx: Ctx, rec: BuildRecord) -> str | None:
    if ctx.journal.release is None:
        return None
    ref = ":".join(ctx.journal.release)
    if engine.image_id(ctx.client, ref) == rec.candidate_id and engine.untag(ctx.client, ref):
        return f"removed the release tag {ref}"
    return None


def _keep_failed(ctx: Ctx, rec: BuildRecord) -> str | None:
    """Only build-clean's candidate: a user's image given to `nox -s validate` keeps its own names."""
    if not rec.candidate_id or rec.candidate_ref != ctx.plan.patch.image:
        return None
    ref = engine.tag(ctx.client, rec.candidate_id, ctx.plan.release_repo, f"{rec.run_id}-failed")
    return f"candidate kept as {ref}; logs in {ctx.plan.options.run_dir}"
