"""Atomic file replacement: a reader (or a Ctrl-C) never sees half a file."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """Replace path's content with data, keeping its mode (and owner when allowed).

    The temp file sits in the same directory so os.replace is a rename on one
    file system; a symlink is followed so the link itself survives.
    """
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
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _keep_owner(tmp: str, st: os.stat_result) -> None:
    # Only root can give a file away; everyone else keeps their own uid, which
    # is then already the owner of the file being replaced in the usual case.
    if hasattr(os, "chown"):
        with contextlib.suppress(PermissionError):
            os.chown(tmp, st.st_uid, st.st_gid)
