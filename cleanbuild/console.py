"""What people see: one line per step with ✓/✕ and its duration; rich on a terminal, plain lines in CI."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

# Not a terminal (CI, a log file): plain lines, wide enough that image names and argv are not wrapped.
console = Console(stderr=True, highlight=False, force_terminal=None if sys.stderr.isatty() else False,
                  width=None if sys.stderr.isatty() else 200)


@dataclass
class StepRecord:
    name: str
    status: str = "running"  # passed | failed | skipped | reused
    seconds: float = 0.0
    detail: str = ""


@dataclass
class StepLog:
    records: list[StepRecord] = field(default_factory=list)

    @contextmanager
    def step(self, name: str) -> Iterator[StepRecord]:
        record = StepRecord(name)
        self.records.append(record)
        start = time.monotonic()
        console.print(f"[bold]▶ {name}[/bold]")
        try:
            yield record
        except BaseException as exc:
            record.status, record.seconds = "failed", time.monotonic() - start
            if not record.detail:
                record.detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            console.print(f"[red]✕ {name}[/red] ({record.seconds:.1f} s) {record.detail}")
            raise
        record.seconds = time.monotonic() - start
        if record.status == "running":
            record.status = "passed"
        mark = {"passed": "[green]✓[/green]", "reused": "[green]✓[/green]", "skipped": "[yellow]–[/yellow]"}[record.status]
        console.print(f"{mark} {name} ({record.seconds:.1f} s){' ' + record.detail if record.detail else ''}")

    def table(self, title: str) -> Table:
        table = Table(title=title)
        for col in ("step", "status", "seconds", "detail"):
            table.add_column(col)
        for r in self.records:
            table.add_row(r.name, r.status, f"{r.seconds:.1f}", r.detail)
        return table


def key_values(title: str, rows: list[tuple[str, object]]) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for key, value in rows:
        table.add_row(key, str(value))
    return table
