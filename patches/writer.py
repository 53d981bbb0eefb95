"""Atomic file replacement: a reader (or a Ctrl-C) never sees half a file, and a
set of files is replaced all together or not at all."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path


class WriteError(OSError):
    """A write failed; the message names the file, the cause and what was undone."""


@dataclass(frozen=True)
class Change:
    name: str  # as the report shows it (relative to the root)
    path: Path
    new: bytes
    old: bytes  # what was read, to roll back to


def write_atomic(path: Path, data: bytes) -> None:
    """Replace path's content with data, keeping its mode (and owner when allowed).

    The temp file sits in the same directory so os.replace is a rename on one
    file system; a symlink is followed so the link itself survives.
    """
    real, tmp = _stage(path, data)
    try:
        os.replace(tmp, real)
    except BaseException:
        _discard([tmp])
        raise


def write_all(changes: list[Change]) -> None:
    """Replace every file or none. Every temp file is written (and synced)
    first, where a full disk or a read-only folder shows up; only then are they
    renamed into place. If a rename still fails, the files already replaced get
    their old bytes back. Raises WriteError naming the file and the cause."""
    staged: list[tuple[Change, Path, str]] = []
    try:
        for change in changes:
            staged.append((change, *_stage_named(change)))
    except BaseException:
        _discard([tmp for _, _, tmp in staged])
        raise
    done: list[tuple[Change, Path]] = []
    for index, (change, real, tmp) in enumerate(staged):
        try:
            os.replace(tmp, real)
        except BaseException as exc:
            _discard([t for _, _, t in staged[index:]])
            undone = _roll_back(done)
            if not isinstance(exc, Exception):  # Ctrl-C: undo, then stop as asked
                raise
            raise WriteError(f"could not write {change.name} ({_cause(exc)}); {undone}") from exc
        done.append((change, real))


def _stage_named(change: Change) -> tuple[Path, str]:
    try:
        return _stage(change.path, change.new)
    except OSError as exc:
        raise WriteError(f"could not write {change.name} ({_cause(exc)}); nothing was changed") from exc


def _stage(path: Path, data: bytes) -> tuple[Path, str]:
    """A synced temp file next to path's real file, with its mode and owner."""
    real = Path(os.path.realpath(path))
    st = real.stat()
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        _keep_owner(tmp, st)
    except BaseException:
        _discard([tmp])
        raise
    return real, tmp


def _roll_back(done: list[tuple[Change, Path]]) -> str:
    """Put back what was replaced; say truthfully what that left."""
    if not done:
        return "nothing was changed"
    failed = []
    for change, real in reversed(done):
        try:
            write_atomic(real, change.old)
        except OSError as exc:
            failed.append(f"{change.name} ({_cause(exc)})")
    restored = ", ".join(change.name for change, _ in done)
    if failed:
        return f"could not restore {', '.join(failed)}: those files stay patched"
    return f"restored {restored}, which had been replaced: nothing was changed"


def _discard(tmps: list[str]) -> None:
    for tmp in tmps:
        with contextlib.suppress(OSError):  # never hide the error that got us here
            os.unlink(tmp)


def _cause(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _keep_owner(tmp: str, st: os.stat_result) -> None:
    # Only root can give a file away; everyone else keeps their own uid, which
    # is then already the owner of the file being replaced in the usual case.
    if hasattr(os, "chown"):
        with contextlib.suppress(PermissionError):
            os.chown(tmp, st.st_uid, st.st_gid)
