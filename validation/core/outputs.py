"""Output paths of the in-image CLIs (python -m validation, python -m validation.audit), checked before any check
runs: standard library only (the host's cleanbuild.core.outputs does the same for the host CLIs; this cannot import it).

A target may not be a folder. Missing folders are made when the output is written, so the nearest existing folder
must accept a new file: a probe file is created there and removed (root passes os.access, and /proc or a read-only
mount answer only to a real attempt). A file that exists is opened for appending, never truncated. A write that
fails later (/dev/full) is written() 's one line and WRITE_FAILED.
"""

from __future__ import annotations

import os
from pathlib import Path

WRITE_FAILED = 3  # the host cannot: README's exit code for a full disk, a read-only mount


def check_output(path: Path, flag: str) -> None:
    """ValueError (one line) when a file cannot be written at path."""
    if path.is_dir():
        raise ValueError(f"{flag} {path}: is a folder, not a file")
    if path.exists():
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
        except OSError as exc:
            raise ValueError(f"{flag} {path}: cannot write there ({exc.strerror})") from None
        return
    folder = next((p for p in path.absolute().parents if p.exists()), Path("/"))
    if not folder.is_dir():
        raise ValueError(f"{flag} {path}: cannot write there ({folder} is a file, not a folder)")
    probe = folder / f".{path.name}.{os.getpid()}.probe"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as exc:
        raise ValueError(f"{flag} {path}: cannot write there (a new file in {folder} was refused: "
                         f"{exc.strerror})") from None
    os.unlink(probe)


def write_output(path: Path, text: str, flag: str) -> str | None:
    """Write text to path (making missing folders); the one-line error when the host refused, else None."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        return f"{flag} {path}: writing failed ({exc.strerror or exc}); free space there or name another path"
    return None
