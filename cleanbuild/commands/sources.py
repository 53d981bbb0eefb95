"""What `pins` and `lock` do: check or move the profile's pins against their repositories, and (re)make its lock.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from cleanbuild.core.console import console, print_rows
from cleanbuild.core.errors import (
    UsageError,
)
from cleanbuild.request.build import Request
from cleanbuild.upstream import mirror

if TYPE_CHECKING:
    pass

def run_pins(request: Request, *, as_json: bool, bump: str | None, to: str | None, dry_run: bool) -> int:
    from cleanbuild.upstream import pins

    if bump is None and (to is not None or dry_run):
        flag = "--to" if to is not None else "--dry-run"
        raise UsageError(f"{flag} only means something with --bump. To fix, add --bump COMPONENT (or drop {flag}).")
    profile = request.profile
    mirror.require_reachable(profile)
    if bump is not None:  # `--bump ''` is a bump of nothing: refused there, never a plain check
        result = pins.bump(profile, bump, to, dry_run=dry_run, relock=request.overrides)
        if as_json:
            print(json.dumps(result.__dict__, indent=2))
        else:
            print_rows(f"pins --bump {bump}", {"from": result.old, "to": f"{result.new} ({result.describe}, {result.date[:10]})",
                                                "patches": ", ".join(f"{k}={v}" for k, v in result.outcomes.items()) or "-",
                                                "written": "yes (profile and locks)" if result.written else "no"})
            if result.diff and (dry_run or result.written):
                print(result.diff, end="")
        for line in result.drift:
            console.print(f"[red]drift: {line}[/red]")
        if result.drift:
            console.print("[red]nothing was written: a patch no longer applies to the candidate[/red]")
        return 1 if result.drift else 0
    report_ = pins.check(profile)
    if as_json:
        print(json.dumps(report_.to_json(), indent=2))
    else:
        from rich.table import Table

        table = Table(title=f"pins of profile {profile.name} ({profile.file.name})")
        for col in ("component", "pin", "status", "detail"):
            table.add_column(col, overflow="fold")
        for row in report_.rows:
            table.add_row(row.component, row.pin[:40], row.status, row.detail)
        console.print(table)
        for row in report_.problems:
            console.print(f"[red]pin wrong: {row.component} {row.pin}: {row.detail}[/red]")
    return report_.exit_code


def run_lock(request: Request, *, upgrade: tuple[str, ...], check: bool) -> int:
    from cleanbuild.upstream import lock

    if check and upgrade:
        raise UsageError("--check writes nothing, so --upgrade-package has no effect with it. To fix, drop one.")
    profile = request.profile
    mirror.require_reachable(profile)
    if check:
        problems = lock.check(profile)
        for line in problems:
            console.print(f"[red]lock stale: {line}[/red]")
        if not problems:
            console.print(f"[green]✓[/green] {lock.lock_paths(profile)[0].name} matches the pins of {profile.name}")
        return 1 if problems else 0
    runtime, build = lock.write(profile, upgrade=upgrade)
    console.print(f"[green]✓[/green] wrote {runtime} ({len(lock.packages(runtime))} packages) and {build.name}; "
                  f"digest {lock.digest(profile)}")
    return 0
