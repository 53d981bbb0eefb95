"""The configuration files invoke reads, found as invoke finds them, so that each is checked (settings.site_file:
one line, exit 2) before invoke reads it and fails with a traceback, or ignores a file the user named.

invoke's Config reads, in this order: the system's /etc/invoke.*, the user's ~/.invoke.*, the project's invoke.*
beside the tasks (of each, the first of .yaml, .yml, .json and .py that exists: a folder there is "found" too, and
breaks invoke), then the runtime file (`-f FILE`, else INVOKE_RUNTIME_CONFIG), which it reads by its suffix and
skips silently when it is missing. atom-build (cleanbuild.cli.program) checks them all before invoke reads any
(README: Exit codes); plain `invoke` reads them as it finds them (tasks.py is only the task collection).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from cleanbuild.cli.settings import CONFIG_TYPES, site_file
from cleanbuild.core.errors import UsageError

RUNTIME_ENV = "INVOKE_RUNTIME_CONFIG"
SYSTEM = "/etc/invoke"  # invoke's Config: system_prefix "/etc/" (none on Windows) + "invoke"
USER = "~/.invoke"  # user_prefix "~/." + "invoke"


def first(prefix: str) -> Path | None:
    """The file invoke reads for a prefix (/etc/invoke, ~/.invoke, PROJECT/invoke): the first suffix that exists."""
    for suffix in CONFIG_TYPES:
        path = Path(os.path.expanduser(f"{prefix}.{suffix}"))
        if path.exists():
            return path
    return None


def found(project: Path) -> list[Path]:
    """The system's, the user's and the project's (beside the tasks) files invoke reads, in its order."""
    return [path for path in map(first, (SYSTEM, USER, str(project / "invoke"))) if path]


def runtime(flag: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The runtime file invoke reads: -f FILE, else INVOKE_RUNTIME_CONFIG (None: neither)."""
    return flag if flag is not None else (os.environ if environ is None else environ).get(RUNTIME_ENV)


def check_found(project: Path) -> None:
    """The system's, the user's and the project's files, each as invoke would read it."""
    for path in found(project):
        site_file(path)


def check_runtime(name: str | None) -> None:
    """The runtime file, named by the user: it must be there and parse (invoke skips a missing one silently)."""
    if name is None:
        return
    if not name:
        raise UsageError(f"the site config is named but empty (-f '' or {RUNTIME_ENV}=''). To fix, name an "
                         f"invoke.yaml file or unset {RUNTIME_ENV}.")
    site_file(Path(os.path.expanduser(name)), given=True)
