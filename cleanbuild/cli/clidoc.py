"""README's tasks and options tables, generated from the code: `python -m cleanbuild.cli.clidoc [--write]`.

The tables go between `<!-- tasks:begin -->`/`<!-- tasks:end -->` and `<!-- options:begin -->`/`<!-- options:end -->`
in README.md. Without --write, prints both; with --write, replaces README's blocks in place (exit 2 when a marker
is missing). tests/cli/test_clidoc.py fails when README's blocks differ from this output.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

from cleanbuild.cli.collection import ns
from cleanbuild.cli.options import OPTIONS, SWITCHES, flag_name
from cleanbuild.core.spec import REPO_ROOT

README = REPO_ROOT / "README.md"
BLOCKS = ("tasks", "options")


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def tasks_table() -> str:
    rows = ["| task | what it does | flags |", "| --- | --- | --- |"]
    for name in sorted(ns.task_names):
        task = ns[name]
        summary = (inspect.getdoc(task) or "").splitlines()[0]
        args = task.get_arguments()
        flags = [f"`{a.name.upper()}`" if a.positional else f"`{flag_name(a.name.rstrip('_'))}`" for a in args]
        positional = [f for f, a in zip(flags, args, strict=True) if a.positional]
        rest = sorted(f for f, a in zip(flags, args, strict=True) if not a.positional)
        rows.append(f"| `{name}` | {_cell(summary)} | {' '.join([*positional, *rest])} |")
    return "\n".join(rows)


def options_table() -> str:
    rows = ["| flag | invoke.yaml key | env | default | what it does |", "| --- | --- | --- | --- | --- |"]
    for o in OPTIONS:
        flag = f"`{o.flag_name}`" + (" (repeatable)" if o.repeatable else "") if o.flag else "-"
        key = f"`cleanbuild.{o.name}`" if o.config else "-"
        env = f"`{o.env}`" if o.env else "-"
        default = "-" if o.default in (None, False, {}) else f"`{o.default}`"
        rows.append(f"| {flag} | {key} | {env} | {default} | {_cell(o.help)} |")
    rows += [f"| `{flag_name(name)}` | - | - | - | {_cell(text)} |" for name, text in SWITCHES.items()]
    return "\n".join(rows)


def render() -> dict[str, str]:
    return {"tasks": tasks_table(), "options": options_table()}


def markers(block: str) -> tuple[str, str]:
    return f"<!-- {block}:begin -->", f"<!-- {block}:end -->"


def blocks(text: str) -> dict[str, str | None]:
    """README's current blocks (the text between each pair of markers, stripped), None where a marker is missing."""
    out: dict[str, str | None] = {}
    for block in BLOCKS:
        begin, end = markers(block)
        head, found, tail = text.partition(begin)
        out[block] = tail.partition(end)[0].strip() if found and end in tail else None
    return out


def rewrite(text: str, tables: dict[str, str]) -> str:
    for block, table in tables.items():
        begin, end = markers(block)
        head, _, tail = text.partition(begin)
        text = f"{head}{begin}\n{table}\n{end}{tail.partition(end)[2]}"
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cleanbuild.cli.clidoc", description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help="replace README.md's blocks in place")
    p.add_argument("--readme", type=Path, default=README, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    tables = render()
    if not args.write:
        print("\n\n".join(tables.values()))
        return 0
    text = args.readme.read_text(encoding="utf-8")
    missing = [b for b, found in blocks(text).items() if found is None]
    if missing:
        begin, end = markers(missing[0])
        print(f"error: {args.readme} has no {begin} ... {end} markers. To fix, add them where the table goes.",
              file=sys.stderr)
        return 2
    args.readme.write_text(rewrite(text, tables), encoding="utf-8")
    print(f"wrote {', '.join(BLOCKS)} tables to {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
