"""`python -m validation.serve FD`: `python -m validation` many times over, with torch imported once.

A bisection validates one commit per step, and each step started a Python that imported torch: 1.5 s of a step's
2.5 s on two cores. This process imports torch once, then forks one child per request; the child runs
validation's main with the request's arguments, environment, working folder, stdout and stderr. Every commit is
still checked in a process of its own: nothing a child imports (aiter's source at its commit) reaches the next.

The parent (cleanbuild.bisect.warm) binds the Unix socket and passes it as file descriptor FD, so a request sent
before torch has loaded waits in the socket's queue. One JSON line per connection, {"argv", "env", "cwd",
"stdout", "stderr", "timeout"}; the answer is one line, {"exit": CODE}. Triton is not imported here: the child's
CLI sets TRITON_INTERPRET before anything imports it (validation.cli).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import traceback
from typing import Any


def serve(listener: socket.socket) -> None:
    import torch  # noqa: F401 - what every child would import again
    import torch.fx.experimental.symbolic_shapes  # noqa: F401 - a meta tensor's first operation imports it (0.3 s)

    while True:
        conn, _ = listener.accept()
        with conn:
            request = json.loads(conn.makefile("rb").readline() or b"{}")
            code = _fork(listener, request) if request else 2
            conn.sendall((json.dumps({"exit": code}) + "\n").encode())


def _fork(listener: socket.socket, request: dict[str, Any]) -> int:
    pid = os.fork()
    if pid == 0:
        listener.close()
        os._exit(_child(request))  # no atexit hooks: aiter's torch ops leave one that fails at exit
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _child(request: dict[str, Any]) -> int:
    signal.alarm(int(request["timeout"]))  # SIGALRM ends a hung check, as `run(timeout=)` did for a process
    try:
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        from validation.cli import main

        return main(request["argv"])
    except KeyboardInterrupt:
        return 130
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - said on the child's stderr, like an uncaught error of a process
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def main(argv: list[str]) -> int:
    try:
        serve(socket.socket(fileno=int(argv[0])))
    except KeyboardInterrupt:  # Ctrl-C reaches the whole foreground group: the bisection says so, not this
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
