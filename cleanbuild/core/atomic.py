"""Write several files as one change: every file is replaced, or none is, also under Ctrl-C.

Each new content goes to a temporary file beside its target first (a full disk or a read-only tree fails here,
before any target changed). Then, with SIGINT held back, each target is kept as a hard-linked backup and
replaced by its temporary file; a failure in that phase puts every backup back. A Ctrl-C that arrived meanwhile
is raised once the set is complete (or rolled back).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from cleanbuild.core import interrupts


def replace_all(files: Mapping[Path, bytes | str]) -> None:
    """Replace every path with its content, all or nothing."""
    temps: dict[Path, Path] = {}
    try:
        for path, data in files.items():
            temps[path] = _temp_beside(path, data.encode() if isinstance(data, str) else data)
        with interrupts.held():
            _swap(temps)
    finally:
        for tmp in temps.values():
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def _temp_beside(path: Path, data: bytes) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as sink:
            sink.write(data)
            sink.flush()
            os.fsync(sink.fileno())
    except OSError as exc:  # named after the file the user knows, not the temporary one
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if path.exists():
        os.chmod(tmp, path.stat().st_mode & 0o7777)
    return tmp


def _swap(temps: Mapping[Path, Path]) -> None:
    done: list[tuple[Path, Path | None]] = []  # (target, its backup) for every target already replaced
    backups: list[Path] = []
    try:
        for path, tmp in temps.items():
            backup = None
            if path.exists():
                backup = path.with_name(f".{path.name}.{os.getpid()}.bak")
                with contextlib.suppress(FileNotFoundError):
                    backup.unlink()  # left by a process that was killed
                os.link(path, backup)
                backups.append(backup)
            os.replace(tmp, path)
            done.append((path, backup))
    except BaseException:
        for path, backup in reversed(done):
            if backup is not None:
                os.replace(backup, path)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        raise
    finally:
        for backup in backups:  # a hard link of a file still in place (or already renamed back)
            with contextlib.suppress(FileNotFoundError):
                backup.unlink()


