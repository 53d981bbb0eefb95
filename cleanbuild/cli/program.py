"""invoke's Program for `atom-build` (cleanbuild.cli.main): the tasks of cleanbuild.cli.collection with README's exit codes.

invoke's own Program exits 1 on its parse errors and on Ctrl-C, shows a traceback for a broken YAML config and takes
`TASK --help` as a positional value. This subclass changes those, at invoke's own hooks (Program.run is
create_config, parse_core, parse_collection, parse_tasks, parse_cleanup, update_config, execute):
- a parse error is bad input: exit 2 and one line; Ctrl-C in any phase: exit 130 and one line;
- the site config is this checkout's invoke.yaml (not the current folder's), plus -f FILE or
  INVOKE_RUNTIME_CONFIG, and invoke's system and user files; each is checked before invoke reads it
  (cleanbuild.cli.invokefiles: one line, exit 2 when it is missing, a folder, of a type invoke cannot read, does not
  parse or holds a wrong `cleanbuild:` key);
- standard output is checked for the whole run (cleanbuild.core.boundary.checked_output): help or a list into a closed
  pipe ends quietly with 141, as a task's output does;
- `TASK --help` (and -h) anywhere after the task's name is `--help TASK`: help for every task, positional or not;
- what follows a standalone `--` is kept as the config value `validation_args` (atom-build validate ... -- ARGS).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from invoke import Exit, ParseError, Program

from cleanbuild import __version__
from cleanbuild.cli import invokefiles
from cleanbuild.cli.collection import ns
from cleanbuild.core.boundary import checked_output
from cleanbuild.core.errors import UsageError
from cleanbuild.core.interrupts import INTERRUPTED
from cleanbuild.core.spec import REPO_ROOT


class AtomBuild(Program):
    def __init__(self) -> None:
        super().__init__(namespace=ns, version=__version__, name="atom-build", binary="atom-build")
        self.validation_args: list[str] = []

    def run(self, argv: list[str] | None = None, exit: bool = True) -> None:
        with checked_output():
            super().run(argv, exit)

    def create_config(self) -> None:
        with _usage():
            invokefiles.check_found(REPO_ROOT)
            super().create_config()
            self.config.set_project_location(str(REPO_ROOT))
            self.config.load_project()

    def parse_core(self, argv: list[str] | None) -> None:
        words = list(sys.argv if argv is None else argv)
        if "--" in words:
            cut = words.index("--")
            words, self.validation_args = words[:cut], words[cut + 1:]
        with _usage():
            super().parse_core(help_first(words, set(ns.task_names) | {a for t in ns.task_names.values() for a in t}))

    def parse_collection(self) -> None:
        with _usage():
            super().parse_collection()

    def parse_tasks(self) -> None:
        with _usage():
            super().parse_tasks()

    def parse_cleanup(self) -> None:
        with _usage():
            super().parse_cleanup()

    def update_config(self, merge: bool = True) -> None:
        with _usage():
            invokefiles.check_runtime(invokefiles.runtime(self.args.config.value))
            super().update_config(merge=False)
            self.config.load_overrides({**self.config._overrides, "validation_args": self.validation_args},
                                       merge=False)
            if merge:
                self.config.merge()

    def execute(self) -> None:
        with _usage():
            super().execute()


def help_first(argv: list[str], tasks: set[str]) -> list[str]:
    """`PROG TASK ... --help` -> `PROG --help TASK`: invoke would give a task's positional the word --help."""
    for i, word in enumerate(argv[1:], 1):
        if word in ("--help", "-h"):
            named = [w for w in argv[1:i] if w in tasks]
            return [argv[0], "--help", named[0]] if named else argv
    return argv


@contextlib.contextmanager
def _usage() -> Iterator[None]:
    try:
        yield
    except UsageError as exc:  # a config file invoke would read (a task's own errors end inside its boundary)
        raise Exit(f"error: {exc}", code=2) from None
    except ParseError as exc:
        raise Exit(f"error: the command line failed to parse because {exc} To fix, see `atom-build --help TASK` "
                   "or `atom-build --list`.", code=2) from None
    except KeyboardInterrupt:
        raise Exit(INTERRUPTED, code=130) from None
