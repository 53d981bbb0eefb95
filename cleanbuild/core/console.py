"""What people see: one line per step with ✓/✕ and its duration; rich on a terminal, plain lines in CI."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cleanbuild.core.run import label

# Not a terminal (CI, a log file): plain lines, wide enough that image names and argv are not wrapped.
console = Console(stderr=True, highlight=False, force_terminal=None if sys.stderr.isatty() else False,
                  width=None if sys.stderr.isatty() else 200, soft_wrap=True)
MARKS = {"passed": "[green]✓[/green]", "reused": "[green]✓[/green]", "skipped": "[yellow]–[/yellow]",
         "failed": "[red]✕[/red]"}


def step_started(name: str) -> None:
    console.print(f"{escape(label())}[bold]▶ {name}[/bold]")


def step_done(name: str, status: str, seconds: float, detail: str) -> None:
    console.print(f"{escape(label())}{MARKS.get(status, '?')} {name} ({seconds:.1f} s){' ' + escape(detail) if detail else ''}")


class _Step(Protocol):
    """A finished step as the tables show it (cleanbuild.images.record.StepRecord); the console imports no layer above."""

    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def seconds(self) -> float: ...
    @property
    def detail(self) -> str: ...


class _Unit(Protocol):
    """A keyed image of a plan (cleanbuild.images.components.Unit)."""

    @property
    def name(self) -> str: ...
    @property
    def short(self) -> str: ...
    @property
    def image(self) -> str: ...


class _Plan(Protocol):
    """The part of a plan (cleanbuild.images.plan.Plan) units_table shows."""

    @property
    def stem(self) -> str: ...
    @property
    def units(self) -> Sequence[_Unit]: ...


def steps_table(title: str, steps: Iterable[_Step]) -> Table:
    table = Table(title=title)
    for col in ("step", "status", "seconds", "detail"):
        table.add_column(col)
    for s in steps:
        table.add_row(s.name, s.status, f"{s.seconds:.1f}", s.detail)
    return table


def key_values(title: str, rows: list[tuple[str, object]]) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for key, value in rows:
        table.add_row(key, str(value))
    return table


def units_table(plan: _Plan, states: list[dict[str, str]]) -> Table:
    """Per keyed image of a plan: its key, image name, and whether it will be reused or built (and why)."""
    table = Table(title=f"images by key: {plan.stem}")
    for col in ("unit", "key", "image", "state", "why"):
        table.add_column(col)
    for unit, state in zip(plan.units, states, strict=True):
        table.add_row(unit.name, unit.short, unit.image, state["state"], state["why"])
    return table


def print_rows(title: str, rows: Mapping[str, object]) -> None:
    console.print(key_values(title, list(rows.items())))
