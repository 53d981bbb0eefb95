"""A step's units had as a graph, not one after another: a unit starts as soon as every unit it needs is had
(cleanbuild.images.plan.Plan.needs: a build argument its target reads names that unit's image), each on a thread of
its own, so independent units (the closure, torch, ATOM, the installer) build at the same time on one BuildKit.
What each unit does (found by key, pulled or built: cleanbuild.images.steps._ensure) is unchanged, and so is its own
record; the records come back in the plan's order.

In a step of more than one unit, the lines each unit echoes start with its name (cleanbuild.core.run.labelled, after
the variant's). A failure starts nothing new, lets the running units finish, then is raised (the first one); Ctrl-C
reaches every build through the process group, and the main thread waits for the running units before it raises.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from cleanbuild.core.run import labelled
from cleanbuild.images.components import Unit

R = TypeVar("R")


def workers(count: int) -> int:
    """At most one thread per unit, and no more than the machine's CPUs (two at least)."""
    return max(1, min(count, max(2, os.cpu_count() or 2)))


def run(units: Sequence[Unit], needs: Callable[[Unit], Iterable[str]], work: Callable[[Unit], R]) -> tuple[R, ...]:
    """work(unit) for every unit, each once every unit it needs among these is done, at most workers(len(units))
    at a time and, whenever a thread is free, the first ready in units' order (a unit ready late still goes before
    those after it); the results in units' order."""
    names = {u.name for u in units}
    wanted = {u.name: set(needs(u)) & names for u in units}
    missing = [u.name for u in units if u.name in wanted[u.name]]
    if missing:
        raise ValueError(f"units that need themselves: {missing}")
    done: dict[str, R] = {}
    pending = list(units)
    failure: BaseException | None = None
    width = workers(len(units))
    with concurrent.futures.ThreadPoolExecutor(max_workers=width, thread_name_prefix="unit") as pool:
        running: dict[concurrent.futures.Future[R], Unit] = {}
        try:
            while pending or running:
                ready = [u for u in pending if wanted[u.name] <= done.keys()] if failure is None else []
                for unit in ready[:width - len(running)]:  # a free thread takes the first unit ready, not a queue
                    pending.remove(unit)
                    label = len(units) > 1
                    running[pool.submit(contextvars.copy_context().run, _labelled, work, unit, label)] = unit
                if not running:
                    break
                finished, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    unit = running.pop(future)
                    exc = future.exception()
                    if exc is None:
                        done[unit.name] = future.result()
                    elif failure is None:
                        failure = exc
        except KeyboardInterrupt:
            concurrent.futures.wait(running)  # their builds got Ctrl-C too: let each finish its own cleanup
            raise
    if failure is not None:
        raise failure
    if pending:  # unreachable while needs only names units of this plan in build order; kept as a guard
        raise ValueError(f"units whose needs are never met: {[u.name for u in pending]}")
    return tuple(done[u.name] for u in units)


def _labelled(work: Callable[[Unit], R], unit: Unit, label: bool) -> R:
    if not label:
        return work(unit)
    with labelled(unit.name):
        return work(unit)
