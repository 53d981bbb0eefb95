"""One warm validation process for a whole bisection (validation.serve): torch is imported once, and each step's
`python -m validation` is a child forked from it, in a process of its own as before.

`started(work)` binds the Unix socket in the bisection's folder and hands it to the process, so a step that asks
before torch has loaded waits in the socket's queue; `ask` is the step's side. Where the socket cannot be made or
the process does not answer, a step starts `python -m validation` itself: slower, the same answer.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

from cleanbuild.core.run import serving
from cleanbuild.core.spec import REPO_ROOT

SOCKET_PATH_MAX = 100  # sockaddr_un holds 108 bytes; a deeper folder (a long TMPDIR) gets no warm process
TIMEOUT = 600  # a step's validation, as for the process it replaces


@contextlib.contextmanager
def started(work: Path) -> Iterator[str | None]:
    """The socket's path while the warm process runs; None where the path is too long for a Unix socket."""
    path = work / "validation.sock"
    if len(str(path)) > SOCKET_PATH_MAX:
        yield None
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(1)
        argv = [sys.executable, "-m", "validation.serve", str(listener.fileno())]
        with serving(argv, pass_fds=(listener.fileno(),), cwd=REPO_ROOT, env={"PYTHONPATH": str(REPO_ROOT)}):
            yield str(path)


def ask(path: str, argv: list[str], folder: Path) -> tuple[int, str]:
    """`python -m validation ARGV` in a child of the warm process: (its exit code, its stderr). OSError when the
    process is not there or stops without an answer (the caller then starts the process itself)."""
    out, err = folder / "validation.stdout", folder / "validation.stderr"
    request = {"argv": argv, "env": dict(os.environ), "cwd": str(REPO_ROOT), "stdout": str(out), "stderr": str(err),
               "timeout": TIMEOUT}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(TIMEOUT + 60)  # the child's own alarm ends it at TIMEOUT
        conn.connect(path)
        conn.sendall(json.dumps(request).encode() + b"\n")
        line = conn.makefile("rb").readline()
    if not line:
        raise ConnectionResetError(f"the warm validation process at {path} closed without an answer")
    return int(json.loads(line)["exit"]), err.read_text(errors="replace") if err.is_file() else ""
