"""Output paths named on a command line, checked before the first effect (a container, a build, a fetch).

A file target may not be a folder; a folder target may not be a file. Folders missing on the way are made when
the output is written, so the nearest existing folder must accept a new file: a probe file is created there and
removed at once (root passes every permission check, and /proc or a read-only mount answer only to a real
attempt). A target that exists is opened for appending, never truncated. A device that takes the open and fails
the write (/dev/full) fails later, through the error boundary: one line, exit 3.
Refusals: exit 2 for a path that cannot be (a folder for a file, a file on the way), 3 when the host refuses
the write (permissions, a read-only mount), by the same errno table as the boundary's.
"""

from __future__ import annotations

import os
from pathlib import Path

from cleanbuild.core.boundary import os_fix
from cleanbuild.core.errors import CleanBuildError, UsageError


def output_file(path: Path | str, flag: str) -> Path:
    """path, after checking that a file can be written there (a new one, or an existing one appended to)."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder. To fix, name a file (e.g. {path / 'report.json'}).")
    if path.exists():
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
        except OSError as exc:
            raise _refused(flag, path, f"opening it for writing failed ({exc.strerror})", exc.errno) from None
    else:
        _probe(_nearest_folder(path, flag), flag, path)
    return path


def output_folder(path: Path | str, flag: str, *, empty: bool = False) -> Path:
    """path, after checking that files can be written in it (empty: it must be new or an empty folder)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is a file, not a folder. To fix, name a folder (a new one, or an "
                         "existing one to write into).")
    if empty and path.is_dir() and any(path.iterdir()):
        raise UsageError(f"{flag} {path} exists and is not empty. To fix, pass a new folder.")
    _probe(path if path.is_dir() else _nearest_folder(path, flag), flag, path)
    return path


def _nearest_folder(path: Path, flag: str) -> Path:
    """The deepest folder above path that exists (the one the missing folders would be made in)."""
    for parent in path.absolute().parents:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise UsageError(f"{flag} {path} cannot be written because {parent} is a file, not a folder. To "
                                 "fix, check the path.")
            return parent
    return Path("/")  # pragma: no cover - "/" exists


def _probe(folder: Path, flag: str, path: Path) -> None:
    probe = folder / f".{path.name or 'output'}.{os.getpid()}.probe"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as exc:
        raise _refused(flag, path, f"a new file in {folder} was refused ({exc.strerror})", exc.errno) from None
    os.unlink(probe)


def _refused(flag: str, path: Path, why: str, errno: int | None) -> CleanBuildError:
    kind, fix = os_fix(errno)
    return kind(f"{flag} {path} cannot be written because {why}. To fix, {fix} (or name another path).")
