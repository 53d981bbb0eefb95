"""The one subprocess entry point. Nothing else in cleanbuild calls subprocess.

Output is decoded with errors="replace": a tool that prints bytes that are not UTF-8 (a GPU probe, a compiler)
must not crash us. A command that outlives its timeout is killed with its whole process group, so a hung
wrapper script cannot leave its children running.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from cleanbuild.core.errors import EnvironmentProblem

T = TypeVar("T")

INSTALL_HINTS = {
    "docker": "install Docker Engine (Debian: apt-get install docker.io) and start dockerd",
    "git": "install git (Debian: apt-get install git)",
    "mmdebstrap": "apt-get install mmdebstrap",
    "rocminfo": "install ROCm (rocminfo package) or pass --arch",
    "amd-smi": "install ROCm's amd-smi or pass --arch",
    "uv": "pip install uv (the lock resolver)",
}


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    stdout_bytes: bytes = b""


class CommandFailed(Exception):
    """A command run with check=True exited non-zero; callers turn it into their own CleanBuildError."""

    def __init__(self, result: Result):
        tail = (result.stderr.strip().splitlines() or result.stdout.strip().splitlines() or ["no output"])[-1]
        super().__init__(f"{quote(result.argv)} exited {result.returncode}: {tail[:300]}")
        self.result = result


def quote(argv: Sequence[str]) -> str:
    """The shell-quoted form of an argv list, for printing and for the plan."""
    return shlex.join([str(a) for a in argv])


def which(name: str) -> str | None:
    return shutil.which(name)


def require(name: str) -> str:
    """Resolve a binary or fail with what to install. A tool installed into this Python's environment (uv from
    `pip install -e .`) is found beside sys.executable even when that environment is not activated."""
    path = shutil.which(name) or _beside_python(name)
    if path is None:
        hint = INSTALL_HINTS.get(name, f"install {name}")
        raise EnvironmentProblem(f"'{name}' was not found on PATH. To fix, {hint}.")
    return path


def _beside_python(name: str) -> str | None:
    if name == "uv":
        try:
            from uv import find_uv_bin

            return find_uv_bin()
        except (ImportError, FileNotFoundError):
            pass
    return shutil.which(name, path=str(Path(sys.executable).parent))


def _argv(argv: Sequence[str | os.PathLike[str]]) -> list[str]:
    args = [str(a) for a in argv]
    args[0] = require(args[0]) if os.sep not in args[0] else args[0]
    return args


# While several builds run at once (cleanbuild.commands.build.build_matrix), what each thread echoes starts with its variant.
_label: ContextVar[str] = ContextVar("echo_label", default="")


@contextlib.contextmanager
def labelled(label: str) -> Iterator[None]:
    """Every command echoed, build line shown and step printed in this block (this thread) starts with [label],
    after the labels of the blocks it is in."""
    token = _label.set(f"{_label.get()}[{label}] ")
    try:
        yield
    finally:
        _label.reset(token)


def label() -> str:
    return _label.get()


def run(argv: Sequence[str | os.PathLike[str]], *, check: bool = True, capture: bool = False,
        timeout: float | None = None, echo: bool = True, env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None, binary: bool = False, inherit_env: bool = True) -> Result:
    """Run argv (never through a shell). Prints `+ cmd` first unless echo is False.

    check=True raises CommandFailed on a non-zero exit. A timeout kills the process group and returns a Result
    with timed_out=True, so probes can move on. binary=True keeps stdout as bytes (stdout_bytes). env is added to
    this process's environment, or with inherit_env=False is the whole of it.
    """
    args = _argv(argv)
    if echo:
        print(f"{label()}+ {quote(args)}", file=sys.stderr, flush=True)
    full_env = None if env is None else {**(os.environ if inherit_env else {}), **env}
    pipe = subprocess.PIPE if capture or binary else None
    with subprocess.Popen(args, stdout=pipe, stderr=subprocess.PIPE if capture or binary else None,  # noqa: S603
                          env=full_env, cwd=cwd, start_new_session=timeout is not None) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            timed_out = True
    text = (out or b"").decode(errors="replace")
    result = Result(tuple(args), -1 if timed_out else proc.returncode, "" if binary else text,
                    (err or b"").decode(errors="replace"), timed_out, out or b"")
    if check and (timed_out or proc.returncode != 0):
        raise CommandFailed(result)
    return result


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def run_logged(argv: Sequence[str | os.PathLike[str]], log: Path, *, show: bool = True,
               env: Mapping[str, str] | None = None) -> int:
    """Run argv with stdout+stderr streamed line by line to `log` (and to stderr when show). Returns the exit code.

    Ctrl-C reaches the child through the process group as usual; we wait for it so no build is left running.
    """
    args = _argv(argv)
    print(f"{label()}+ {quote(args)}", file=sys.stderr, flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    full_env = None if env is None else {**os.environ, **env}
    with log.open("w") as sink, subprocess.Popen(  # noqa: S603 - argv list, no shell
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full_env,
    ) as proc:
        try:
            for raw in proc.stdout or ():  # stdout=PIPE: never None
                line = raw.decode(errors="replace")
                sink.write(line)
                if show:
                    sys.stderr.write(label() + line)
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait(timeout=60)
            raise
        return proc.wait()


@contextlib.contextmanager
def serving(argv: Sequence[str | os.PathLike[str]], *, pass_fds: tuple[int, ...] = (),
            env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Iterator[None]:
    """argv in the background for the with block (no stdin, its output dropped: what it serves says how it went),
    terminated when the block ends, Ctrl-C included, and killed when it does not stop in 10 s."""
    full_env = None if env is None else {**os.environ, **env}
    proc = subprocess.Popen(_argv(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,  # noqa: S603
                            stderr=subprocess.DEVNULL, pass_fds=pass_fds, env=full_env, cwd=cwd)
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_feeding(argv: Sequence[str | os.PathLike[str]], log: Path, feed: Callable[[IO[bytes]], T]) -> tuple[int, T | None]:
    """Run argv with `feed` writing its standard input (a stream: `docker load` of a tar written as it goes), its
    stdout+stderr to `log`. Returns (exit code, what feed returned; None when the child stopped reading)."""
    args = _argv(argv)
    print(f"{label()}+ {quote(args)}", file=sys.stderr, flush=True)
    fed: T | None = None
    with log.open("wb") as sink:
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=sink, stderr=subprocess.STDOUT)  # noqa: S603
        try:
            assert proc.stdin is not None  # stdin=PIPE
            with proc.stdin:
                fed = feed(proc.stdin)
        except BrokenPipeError:
            pass  # the child stopped reading: its exit code and log say why
        finally:
            code = proc.wait()
    return code, fed


def git_reason(stderr: str) -> str:
    """git's own reason in one line: its first fatal:/error: line (what follows is advice, such as 'Could not read
    from remote repository'), else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (said or lines[-1:] or [""])[0]
