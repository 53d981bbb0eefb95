"""`invoke TASK` in this checkout: the tasks of cleanbuild.tasks (the same as `atom-build TASK`).

Plain invoke runs its own Program, so two things atom-build does are done here as far as a tasks file can:
Ctrl-C while the tasks import is one line and exit 130 (not invoke's silent exit 1), and this checkout's invoke.yaml
is checked before invoke reads it (one line, exit 2, instead of a YAML traceback). invoke's own parse errors
stay exit 1, `-f FILE` is read by invoke as it is, and a task with positionals needs `invoke --help TASK`;
atom-build (cleanbuild.cli) handles all of those.
"""

import signal
import sys
from types import FrameType
from typing import NoReturn


def _interrupted(signum: int, frame: FrameType | None) -> NoReturn:
    sys.stderr.write("error: interrupted (Ctrl-C). To fix, run the command again.\n")
    raise SystemExit(130)


signal.signal(signal.SIGINT, _interrupted)  # first: the imports below take a while
try:
    from pathlib import Path

    from cleanbuild.errors import UsageError
    from cleanbuild.settings import site_file
    from cleanbuild.tasks import ns

    try:
        site_file(Path(__file__).with_name("invoke.yaml"))
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(2) from None
finally:
    signal.signal(signal.SIGINT, signal.default_int_handler)

__all__ = ["ns"]
