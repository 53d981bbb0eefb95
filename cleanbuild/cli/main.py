"""`atom-build`: the console script ([project.scripts] in pyproject.toml), the front door to every task.

Ctrl-C is handled first, before the heavy imports (invoke, the tasks, the docker SDK): wherever SIGINT lands, the
process ends with one line and exit 130 (README's "interrupted"), never invoke's exit 1 ("a wrong result"). Only
the standard library (and cleanbuild.core.clone, which imports nothing else) is imported at the top of this module for
that reason. Before them, a copy installed without its clone (`pip install .`) says so: one line, exit 3.
"""

from __future__ import annotations

import sys

from cleanbuild.core.clone import not_a_clone
from cleanbuild.core.interrupts import INTERRUPTED


def main(argv: list[str] | None = None) -> None:
    """atom-build [--core-opts] TASK [--task-opts] ... [-- VALIDATION ARGS]"""
    problem = not_a_clone()
    if problem:
        sys.stderr.write(problem + "\n")
        sys.exit(3)  # README: the host cannot (this install cannot run the tool)
    try:  # the heavy imports happen inside, after the interrupt handling is in place
        from cleanbuild.cli.program import AtomBuild

        AtomBuild().run(argv)
    except KeyboardInterrupt:
        sys.stderr.write(INTERRUPTED + "\n")
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover - `python -m cleanbuild.cli.main` runs the console script
    main()
