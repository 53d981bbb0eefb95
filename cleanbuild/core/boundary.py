"""The one error boundary of the host CLIs (every invoke task, `nox -s validate`): what escapes a command becomes
one line and README's exit code (2 bad input, 3 the host cannot, 1 a result is wrong, 130 interrupted).

CleanBuildError already says what failed and how to fix it. The foreign errors a careful user can provoke are
translated here, naming the file or input: OSError (permissions, a read-only tree, a full disk, a folder where a
file was expected), JSON, TOML and text decoding, packaging's version and requirement parsers. Anything else is
a bug and keeps its traceback.

Standard output is checked in one way everywhere: a failed write is StdoutFailed (CheckedStdout), a closed pipe
(`| head -1`) ends quietly with 141 (OutputClosed), any other failure is one line and exit 3. guarded() does it for
a task's body (under plain `invoke` too); checked_output() for a whole run of atom-build (its help and lists too).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import tomllib
from collections.abc import Callable, Iterator
from typing import Any, TextIO, TypeVar, cast

from cleanbuild.core.errors import (
    CleanBuildError,
    EnvironmentProblem,
    Interrupted,
    OutputClosed,
    UsageError,
)
from cleanbuild.core.run import CommandFailed

T = TypeVar("T")
# errno -> (exit class, what to do); the rest of OSError is "the host cannot" with a generic hint.
_OS_FIXES: dict[int, tuple[type[CleanBuildError], str]] = {
    errno.EROFS: (EnvironmentProblem, "run it from a writable checkout (this file system is mounted read-only)"),
    errno.EACCES: (EnvironmentProblem, "give this user access to it, or work in a copy this user owns"),
    errno.EPERM: (EnvironmentProblem, "give this user access to it, or work in a copy this user owns"),
    errno.ENOSPC: (EnvironmentProblem, "free disk space there (or send the output elsewhere) and run it again"),
    errno.EDQUOT: (EnvironmentProblem, "free space within your disk quota and run it again"),
    errno.EFBIG: (EnvironmentProblem, "raise the file size limit (ulimit -f) and run it again"),
    errno.ENOENT: (UsageError, "check the path"),
    errno.EISDIR: (UsageError, "name a file, not a folder"),
    errno.ENOTDIR: (UsageError, "check the path: a part of it is a file, not a folder"),
}


class StdoutFailed(OSError):
    """Standard output could not be written (a full device, a closed pipe)."""


def translate(exc: BaseException) -> CleanBuildError | None:
    """The one-line error for exc, or None when it is a bug (the caller lets its traceback through)."""
    if isinstance(exc, CleanBuildError):
        return exc
    if isinstance(exc, KeyboardInterrupt):
        return Interrupted("interrupted")
    if isinstance(exc, OSError):
        return _os_error(exc)
    if isinstance(exc, UnicodeDecodeError):
        return UsageError(f"reading a file failed because it is not UTF-8 text ({exc.reason} at byte {exc.start}). "
                          "To fix, restore the file (git checkout) or remove it.")
    if isinstance(exc, json.JSONDecodeError):
        return UsageError(f"reading JSON failed because it is not valid ({exc.msg}, line {exc.lineno}). "
                          "To fix, restore the file or remake it.")
    if isinstance(exc, tomllib.TOMLDecodeError):
        return UsageError(f"reading TOML failed because it is not valid ({exc}). To fix, correct the file.")
    if isinstance(exc, CommandFailed):  # a command its caller did not expect to fail: still one line
        return EnvironmentProblem(f"running {exc} failed. To fix, read the command's own message above (--debug "
                                  "shows where it was run from).")
    # Imported here, on the way out: packaging's parsers cost every start (`--help`) time, and only reach this
    # function through a caller that has already imported them.
    from packaging.requirements import InvalidRequirement
    from packaging.specifiers import InvalidSpecifier
    from packaging.version import InvalidVersion

    if isinstance(exc, InvalidVersion | InvalidRequirement | InvalidSpecifier):
        return UsageError(f"a version or requirement is not valid ({exc}). To fix, write it as PEP 440/508 says "
                          "(e.g. 2.11.0, name>=1.0).")
    return None


def os_fix(errno_: int | None) -> tuple[type[CleanBuildError], str]:
    """The exit class and the hint for an OSError's errno (the same table for a write refused early or late)."""
    return _OS_FIXES.get(errno_ or 0, (EnvironmentProblem, "check the file system and the permissions"))


def _os_error(exc: OSError) -> CleanBuildError:
    if isinstance(exc, StdoutFailed) and exc.errno == errno.EPIPE:
        return OutputClosed("standard output's reader went away")
    if isinstance(exc, StdoutFailed):
        return EnvironmentProblem(f"writing to standard output failed because {exc.strerror or exc}. To fix, send "
                                  "the output to a file or a device with space (or a pipe that stays open).")
    kind, fix = os_fix(exc.errno)
    where = exc.filename if exc.filename is not None else "a file"
    also = f" (and {exc.filename2})" if getattr(exc, "filename2", None) else ""
    return kind(f"reading or writing {where}{also} failed because {exc.strerror or exc}. To fix, {fix}.")


def _drop_stdout() -> None:
    """What could not be written is dropped: fd 1 now points at /dev/null, so the final flush at exit succeeds."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


class CheckedStdout:
    """sys.stdout while a command runs: a failed write or flush is StdoutFailed, told apart from a file's error."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as exc:
            _drop_stdout()
            raise StdoutFailed(exc.errno, exc.strerror) from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as exc:
            _drop_stdout()
            raise StdoutFailed(exc.errno, exc.strerror) from None

    def __getattr__(self, name: str) -> Any:  # every other attribute of the stream, as it is
        return getattr(self.stream, name)


def guarded(body: Callable[[], T], *, debug: bool, report: Callable[[CleanBuildError], None]) -> T | int:
    """Run body inside the boundary: its result, or report(error) and the error's exit code."""
    stdout = sys.stdout
    sys.stdout = cast(TextIO, CheckedStdout(stdout))  # a TextIO by duck typing: __getattr__ passes the rest on
    try:
        result = body()
        sys.stdout.flush()
        return result
    except BaseException as exc:  # noqa: BLE001 - the boundary: everything is translated or re-raised
        error = None if isinstance(exc, SystemExit) else translate(exc)
        if error is None:
            raise
        if isinstance(error, OutputClosed):  # nobody reads what would be said
            return error.exit_code
        if debug:
            import traceback

            traceback.print_exc()
        report(error)
        return error.exit_code
    finally:
        sys.stdout = stdout


@contextlib.contextmanager
def checked_output() -> Iterator[None]:
    """Around a whole run of the front door (its help and lists, and the tasks inside their own guarded()): standard
    output checked, what is still buffered flushed here rather than in the interpreter's last flush, and a failed
    write ended as a task's is: SystemExit with 141 and no line for a closed pipe, else one line and exit 3."""
    stdout = sys.stdout
    sys.stdout = cast(TextIO, CheckedStdout(stdout))
    try:
        try:
            yield
        finally:
            sys.stdout.flush()
    except StdoutFailed as exc:
        error = _os_error(exc)
        if not isinstance(error, OutputClosed):
            sys.stderr.write(f"error: {error}\n")
        raise SystemExit(error.exit_code) from None
    finally:
        sys.stdout = stdout

