"""`invoke TASK` in this checkout: the tasks of cleanbuild.cli.collection (the same as `atom-build TASK`).

Plain invoke runs its own Program, so what atom-build does (cleanbuild.cli.program) is done here as far as a tasks file
can, when invoke imports it: Ctrl-C while the tasks import is one line and exit 130 (not invoke's silent exit 1);
the config files invoke reads after this import (this checkout's invoke.*, and -f FILE or INVOKE_RUNTIME_CONFIG)
are checked first, and the system's and user's, which invoke read before it, are checked too (cleanbuild.cli.invokefiles:
one line, exit 2, instead of a traceback or a named file silently skipped); help and the task list, which invoke
prints after this import, end quietly into a closed pipe (cleanbuild.core.boundary.quiet_into_closed_pipe). invoke's own parse
errors stay exit 1, a broken system or user config file is invoke's traceback, and a task with positionals needs
`invoke --help TASK`; atom-build handles all of those (README: Exit codes).
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

    from cleanbuild.cli import invokefiles
    from cleanbuild.cli.collection import ns
    from cleanbuild.core.boundary import quiet_into_closed_pipe
    from cleanbuild.core.errors import UsageError

    quiet_into_closed_pipe()
    try:
        invokefiles.check_found(Path(__file__).parent)
        invokefiles.check_runtime(invokefiles.runtime(invokefiles.config_flag(sys.argv)))
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(2) from None
finally:
    signal.signal(signal.SIGINT, signal.default_int_handler)

__all__ = ["ns"]
