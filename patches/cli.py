"""python -m patches list | apply --root DIR | check --root DIR | upstream

Exit codes: 0 done (apply) or nothing to change (check); 1 check found
something to change; 2 drift or a usage error; 3 the host cannot (a write or
read failed: permissions, a read-only tree, a full disk, stdout unwritable);
130 interrupted. One line on stderr, the traceback only with --debug.
`upstream` has its own: 0 every patch applies or is fixed upstream, 1 drift,
2 a malformed or unknown ref or URL, 3 a repository cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TextIO, TypeVar, cast

from patches import engine, upstream
from patches.catalog import PATCHES, by_name

_T = TypeVar("_T")


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse prints usage plus message; we want one line
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m patches", description="Checked source rewrites of aiter and ATOM.")
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("list", parents=[debug], help="list the patches and their target files")
    for mode, text in (
        ("apply", "rewrite the targets (nothing is written on drift)"),
        ("check", "report what apply would change; writes nothing"),
    ):
        cmd = sub.add_parser(mode, parents=[debug], help=text)
        cmd.add_argument(
            "--root",
            required=True,
            type=Path,
            help="a source checkout root or a site-packages folder holding aiter/ and/or atom/",
        )
        cmd.add_argument(
            "--only",
            nargs="+",
            action="extend",
            default=[],
            metavar="NAME",
            help="run only these patches (their targets must be present)",
        )
        cmd.add_argument("--json", action="store_true", help="print the report as JSON")
    add_upstream_parser(sub, debug)
    return parser


def add_upstream_parser(sub: argparse._SubParsersAction[_Parser], debug: _Parser) -> None:
    cmd = sub.add_parser(
        "upstream",
        parents=[debug],
        help="fetch upstream's target files (shallow) and check every patch against them",
    )
    for repo, default in upstream.DEFAULT_SOURCES.items():
        cmd.add_argument(f"--{repo}", metavar="URL_OR_PATH",
                         help=f"default: its copy in ${upstream.MIRROR_ENV} when set, else {default}")
    cmd.add_argument(
        "--ref",
        default=upstream.DEFAULT_REF,
        help="branch, tag or commit to check in both repositories (default: each one's default branch)",
    )
    for repo in upstream.DEFAULT_SOURCES:
        cmd.add_argument(f"--{repo}-ref", metavar="REF", help=f"overrides --ref for {repo}")
    cmd.add_argument("--json", action="store_true", help="print the report as JSON")


class StdoutFailed(OSError):
    pass


def main(argv: list[str] | None = None) -> int:
    """The error boundary: every failure is one line and a fixed exit code (see the module docstring)."""
    argv = sys.argv[1:] if argv is None else argv
    stdout, sys.stdout = sys.stdout, cast(TextIO, _CheckedStdout(sys.stdout))  # a TextIO by duck typing (__getattr__)
    try:
        code = dispatch(build_parser().parse_args(argv))
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        print("patches: interrupted; nothing was left half-written", file=sys.stderr)
        return 130
    except upstream.Unreachable as exc:
        return _fail(argv, str(exc), 3)
    except (UsageError, upstream.NotFound) as exc:
        return _fail(argv, str(exc), 2)
    except OSError as exc:
        return _fail(argv, _os_message(exc), 3)
    except Exception as exc:  # a bug in a patch or the engine: still one line
        if "--debug" in argv:
            raise
        print(
            f"patches: error: internal error {exc!r} (rerun with --debug for the traceback)", file=sys.stderr
        )
        return 2
    finally:
        sys.stdout = stdout


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "list":
        return list_patches()
    if args.command == "upstream":
        return run_upstream(args)
    return run(args)


def _fail(argv: list[str], message: str, code: int) -> int:
    if "--debug" in argv:
        raise  # noqa: PLE0704 - re-raises the exception being handled in main()
    print(f"patches: error: {message}", file=sys.stderr)
    return code


def _os_message(exc: OSError) -> str:
    if isinstance(exc, StdoutFailed):
        return (f"writing to standard output failed because {exc.strerror or exc} (to fix, send the output to a "
                "file or a device with space)")
    if exc.filename is None or str(exc.filename) in str(exc):
        return str(exc)  # writer.WriteError names the file itself
    return f"reading or writing {exc.filename} failed because {exc.strerror or exc} (to fix, check its permissions and the disk)"


class _CheckedStdout:
    """sys.stdout while main() runs: a failed write is StdoutFailed (exit 3, said as such); fd 1 then becomes
    /dev/null so the interpreter's own flush at exit does not print 'Exception ignored' and exit 120."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self._checked(self.stream.write, text)

    def flush(self) -> None:
        self._checked(self.stream.flush)

    def _checked(self, call: Callable[..., _T], *args: object) -> _T:
        try:
            return call(*args)
        except OSError as exc:
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, self.stream.fileno())
                os.close(null)
            except (OSError, ValueError):
                pass
            raise StdoutFailed(exc.errno, exc.strerror) from None

    def __getattr__(self, name: str) -> Any:  # every other attribute of the stream, as it is
        return getattr(self.stream, name)


def list_patches() -> int:
    for patch in PATCHES:
        print(f"{patch.name:<26} {', '.join(patch.targets)}")
        print(f"{'':<26} {patch.summary}")
    return 0


def run(args: argparse.Namespace) -> int:
    root = args.root
    selected = select(args.only, root)
    report = engine.run(root, selected, args.command)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print_report(report)
    for result in report.drifted:
        print(f"patches: drift: {result.detail}", file=sys.stderr)
    if report.drifted and args.command == "apply":
        print("patches: nothing was written", file=sys.stderr)
    return report.exit_code


def select(names: list[str], root: Path) -> list[engine.Patch]:
    known = by_name()
    unknown = [name for name in names if name not in known]
    if unknown:
        raise UsageError(f"unknown patch {', '.join(unknown)}; known patches: {', '.join(known)}")
    if not root.is_dir():
        raise UsageError(f"--root {root} is not a directory")
    if not any((root / pkg).is_dir() for pkg in ("aiter", "atom")):
        raise UsageError(
            f"--root {root} holds neither aiter/ nor atom/ (give a checkout root or site-packages)"
        )
    chosen = [patch for patch in PATCHES if not names or patch.name in names]
    for patch in chosen:
        if names and not (root / patch.target).is_file():
            raise UsageError(f"--only {patch.name}: its target {patch.target} is not under {root}")
    return chosen


def print_report(report: engine.Report) -> None:
    counts: dict[str, int] = {}
    for result in report.results:
        outcome = result.outcome
        if report.mode == "check" and outcome == engine.APPLIED:
            outcome = "would apply"  # for people; the JSON keeps the five outcomes
        counts[outcome] = counts.get(outcome, 0) + 1
        print(f"{outcome:<16} {result.name:<26} {result.target}")
        print(f"{'':<16} {result.detail}")
        if result.diff:
            print(result.diff, end="")
    summary = ", ".join(f"{n} {outcome}" for outcome, n in counts.items())
    wrote = f"; wrote {len(report.written)} file(s)" if report.mode == "apply" else ""
    print(f"{report.mode}: {summary} under {report.root}{wrote}")


def run_upstream(args: argparse.Namespace) -> int:
    sources = {
        repo: (getattr(args, repo) or upstream.default_source(repo), getattr(args, f"{repo}_ref") or args.ref)
        for repo in upstream.DEFAULT_SOURCES
    }
    result = upstream.check(sources)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print_upstream(result)
    for drifted in result.report.drifted:
        print(f"patches: drift: {drifted.detail}", file=sys.stderr)
    return result.exit_code


def print_upstream(result: upstream.UpstreamReport) -> None:
    for fetched in result.fetched:
        print(f"{fetched.repo:<6} {fetched.commit[:12]} {fetched.date}  {fetched.source} ({fetched.ref})")
    for entry in result.report.results:
        fetched = result.fetched_for(entry.target)
        outcome = "would apply" if entry.outcome == engine.APPLIED else entry.outcome
        print(f"{outcome:<16} {entry.name:<26} {fetched.repo}@{fetched.commit[:12]} ({fetched.date[:10]})")
        print(f"{'':<16} {entry.detail}")
    verdict = (
        "drift: a patch no longer fits" if result.exit_code else "every patch applies or is fixed upstream"
    )
    print(f"upstream: {verdict}")
