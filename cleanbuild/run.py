"""The one subprocess entry point. Nothing else in cleanbuild calls subprocess."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import EnvironmentProblem

INSTALL_HINTS = {
    "docker": "install Docker Engine (Debian: apt-get install docker.io) and start dockerd",
    "mmdebstrap": "apt-get install mmdebstrap",
    "rocminfo": "install ROCm (rocminfo package) or pass --arch",
    "amd-smi": "install ROCm's amd-smi or pass --arch",
}


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


def quote(argv: Sequence[str]) -> str:
    """The shell-quoted form of an argv list, for printing and for the plan."""
    return shlex.join([str(a) for a in argv])


def which(name: str) -> str | None:
    return shutil.which(name)


def require(name: str) -> str:
    """Resolve a binary or fail with what to install."""
    path = shutil.which(name)
    if path is None:
        hint = INSTALL_HINTS.get(name, f"install {name}")
        raise EnvironmentProblem(f"'{name}' was not found on PATH. To fix, {hint}.")
    return path


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    check: bool = True,
    capture: bool = False,
    timeout: float | None = None,
    echo: bool = True,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stdout=None,
) -> Result:
    """Run argv (never through a shell). Prints `+ cmd` first unless echo is False.

    With check=True a non-zero exit raises CalledProcessError; callers turn it into their own error class.
    A timeout returns a Result with timed_out=True instead of raising, so probes can move on.
    """
    args = [str(a) for a in argv]
    args[0] = require(args[0]) if os.sep not in args[0] else args[0]
    if echo:
        print(f"+ {quote(argv)}", file=sys.stderr, flush=True)
    full_env = None if env is None else {**os.environ, **env}
    pipe = subprocess.PIPE if capture else stdout
    try:
        proc = subprocess.run(  # noqa: S603 - argv list, no shell
            args, stdout=pipe, stderr=subprocess.PIPE if capture else None, text=True,
            timeout=timeout, env=full_env, cwd=cwd, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return Result(tuple(args), -1, _text(exc.stdout), _text(exc.stderr), timed_out=True)
    result = Result(tuple(args), proc.returncode, proc.stdout or "", proc.stderr or "")
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, args, result.stdout, result.stderr)
    return result


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def run_logged(argv: Sequence[str | os.PathLike[str]], log: Path, *, show: bool = True,
               env: Mapping[str, str] | None = None) -> int:
    """Run argv with stdout+stderr streamed line by line to `log` (and to stderr when show). Returns the exit code.

    Ctrl-C reaches the child through the process group as usual; we wait for it so no build is left running.
    """
    args = [str(a) for a in argv]
    args[0] = require(args[0]) if os.sep not in args[0] else args[0]
    print(f"+ {quote(argv)}", file=sys.stderr, flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    full_env = None if env is None else {**os.environ, **env}
    with log.open("w") as sink, subprocess.Popen(  # noqa: S603 - argv list, no shell
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env, bufsize=1,
    ) as proc:
        try:
            for line in proc.stdout:  # type: ignore[union-attr]
                sink.write(line)
                if show:
                    sys.stderr.write(line)
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait(timeout=60)
            raise
        return proc.wait()
