"""Stand-in command-line tools written in Python, for tests that put one first on PATH.

A `#!/path/to/python` line cannot hold a space (the kernel splits it), and pytest's folders and the venv's path hold
one wherever the checkout or TMPDIR does: the tool is a two-line sh script that runs this Python on the source."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path


def python_tool(path: Path, source: str) -> Path:
    """path: an executable that runs source with this interpreter; the source sits beside it as PATH.py."""
    script = path.with_name(path.name + ".py")
    script.write_text(source)
    path.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(script))} \"$@\"\n")
    path.chmod(0o755)
    return path
