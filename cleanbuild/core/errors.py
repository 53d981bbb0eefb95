"""Error classes with fixed exit codes. Messages are one line: what failed, why, and how to fix it."""

from __future__ import annotations


class CleanBuildError(Exception):
    """Base class: every error the CLI turns into one line and an exit code."""

    exit_code = 1


class StepFailed(CleanBuildError):
    """A pipeline step ran and its result was wrong (validation, smoke test, patch drift)."""

    exit_code = 1


class UsageError(CleanBuildError):
    """Bad input from the user: an unknown arch, a malformed flag, a missing file."""

    exit_code = 2


class EnvironmentProblem(CleanBuildError):
    """The host cannot do the job: no Docker engine, no buildx, no disk, a probe that hangs."""

    exit_code = 3


class BuildFailed(CleanBuildError):
    """BuildKit ran and the build failed."""

    exit_code = 4


class Interrupted(CleanBuildError):
    """Ctrl-C: everything temporary was removed."""

    exit_code = 130


class OutputClosed(CleanBuildError):
    """Standard output's reader went away (`atom-build --help | head -1`): the command stops quietly, no line, with
    the status a shell gives a writer that SIGPIPE ends (128 + 13). Not a failure to report: the reader chose it."""

    exit_code = 141
