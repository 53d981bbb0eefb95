"""All of the build's scheduling in one place: each unit found by key, pulled or built as cleanbuild.images.reuse
decides (ensure), one thread at a time per unit key; and a step's units run as a graph or built at once
(ensure_step).

A graph (run): a unit starts as soon as every unit it needs is had (cleanbuild.images.plan.Plan.needs: a build
argument its target reads names that unit's image), each on a thread of its own, so independent units (the closure,
torch, ATOM, the installer) build at the same time on one BuildKit; the records come back in the plan's order. At
once (the containerd store): every unit is decided first, then the units to build are built together, each target
naming the stages of the units it inlines (cleanbuild.images.atonce, the pure plan of their build arguments).

In a step of more than one unit, the lines each unit echoes start with its name (cleanbuild.core.run.labelled, after
the variant's). A failure starts nothing new, lets the running units finish, then is raised (the first one); Ctrl-C
reaches every build through the process group, and the main thread waits for the running units before it raises.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from cleanbuild.core import engine
from cleanbuild.core.refs import split_image
from cleanbuild.core.run import labelled
from cleanbuild.core.spec import EngineFacts
from cleanbuild.images import atonce, buildx, reuse
from cleanbuild.images.buildx_argv import cache_flags
from cleanbuild.images.components import Unit
from cleanbuild.images.plan import Plan, build_spec
from cleanbuild.images.record import UnitRecord

if TYPE_CHECKING:
    from docker.client import DockerClient

R = TypeVar("R")
Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Site:
    """Where a step has its units: the plan, the engine client, what preflight found of the engine (None before
    it ran) and --rebuild."""

    plan: Plan
    client: DockerClient
    facts: EngineFacts | None
    rebuild: bool = False

    @property
    def reproducible(self) -> bool:
        """The engine gives the same digest for the same inputs (cleanbuild.images.buildx)."""
        return self.facts is not None and self.facts.reproducible

    @property
    def containerd_store(self) -> bool:
        return self.facts is not None and self.facts.containerd_store


_KEY_LOCKS: dict[str, threading.Lock] = {}
_KEY_LOCKS_GUARD = threading.Lock()


def key_lock(key: str) -> threading.Lock:
    """One lock per unit key in this process: variants built at once (commands.build_matrix) share units (the
    builders, torch, the closure, the venv), and the one that comes second waits, then finds the image by key.
    A plain lock, not a re-entrant one: a step that builds at once takes the locks of its units in build order and
    each is released by the thread that built its unit (_Claims)."""
    with _KEY_LOCKS_GUARD:
        return _KEY_LOCKS.setdefault(key, threading.Lock())


def ensure(site: Site, unit: Unit, labels: Labels = (), attestations: buildx.Attestations | None = None) -> UnitRecord:
    """The unit's image, as cleanbuild.images.reuse decides: found here by its key (whatever its name; tagged with
    the plan's name), pulled from the registry, or built. The unit below was had first and holds its name. With a
    remote registry, the registry is made to hold it (a manifest check, a push when missing), so another node
    finds every image this build used. One thread at a time per key; the seconds include the wait."""
    start = time.monotonic()
    with key_lock(unit.key):
        decision, how = _decided(site, unit, _layer_below(site, unit))
        if decision.action is reuse.Action.REUSE:
            return _reused(site, unit, decision, how, start)
        image_id = buildx.build(build_spec(unit), site.plan.options, labels=(*labels, *unit_labels(unit)),
                                reproducible=site.reproducible, containerd_store=site.containerd_store,
                                attestations=attestations)
        return _built(site, unit, image_id, decision, start)


def _layer_below(site: Site, unit: Unit) -> reuse.Below | None:
    below = site.plan.below(unit)
    return reuse.Below(below.name, below.image) if below is not None else None


def _decided(site: Site, unit: Unit, below: reuse.Below | None) -> tuple[reuse.Decision, str]:
    """reuse.decide's answer for unit, a pull it calls for done (then asked again, the registry left out), and
    how a reused image was had."""
    o, client = site.plan.options, site.client
    ask = functools.partial(reuse.decide, client, unit, variant=site.plan.variant(unit), rebuild=site.rebuild, below=below)
    decision, how = ask(registry=o.remote), "found here by key"
    if decision.action is reuse.Action.PULL:
        engine.pull(client, unit.image)
        decision, how = ask(registry=False), "pulled from the registry by key"
    return decision, how


def _reused(site: Site, unit: Unit, decision: reuse.Decision, how: str, start: float) -> UnitRecord:
    o, client = site.plan.options, site.client
    if unit.image not in decision.tags:
        engine.tag(client, decision.image_id, *split_image(unit.image))
    if o.remote and how.startswith("found") and not engine.registry_has(client, unit.image):
        engine.push(client, unit.image)
        how += ", pushed (the registry lacked it)"
    return UnitRecord(unit.name, unit.key, unit.image, decision.image_id, "reused", how,
                      seconds=time.monotonic() - start, began=start)


def _built(site: Site, unit: Unit, image_id: str, decision: reuse.Decision, start: float,
           how: str = "built") -> UnitRecord:
    """The record of a unit just built, pushed first with a remote registry (and its -latest tag, for an inline
    cache)."""
    o, client = site.plan.options, site.client
    if o.remote:
        engine.push(client, unit.image)
        if "type=inline" in cache_flags(build_spec(unit), o, containerd_store=site.containerd_store):  # its -latest tag
            repo, tag = split_image(unit.image)
            latest = f"{tag.rsplit('-', 1)[0]}-latest"
            engine.tag(client, image_id, repo, latest)
            engine.push(client, f"{repo}:{latest}")
        how += " and pushed"
    return UnitRecord(unit.name, unit.key, unit.image, image_id, "built", how, decision.changed,
                      time.monotonic() - start, began=start)


def ensure_step(site: Site, units: tuple[Unit, ...], labels: dict[str, Labels]) -> list[UnitRecord]:
    """A step's units, each had as cleanbuild.images.reuse decides. Where the engine builds reproducibly (the
    containerd store), every unit is decided first (in build order, its key's lock taken), and the units to build
    are then built at once (cleanbuild.images.atonce): each target builds inline the stages of the units it reads
    where BuildKit's cache allows, so few wait for another's image export. Elsewhere (Docker 20.10's classic store,
    where building at once measured no faster) a unit starts once every unit it needs is had (run)."""
    if not site.reproducible:
        return list(run(units, site.plan.needs, lambda unit: ensure(site, unit, labels.get(unit.name, ()))))
    claims = _Claims()
    try:
        had: dict[str, UnitRecord] = {}
        to_build: list[tuple[Unit, reuse.Decision]] = []
        for unit in units:
            start = time.monotonic()
            claims.take(unit.key)
            decision, how = _decided_first(site, unit, {u.name for u, _ in to_build})
            if decision.action is reuse.Action.REUSE:
                had[unit.name] = _reused(site, unit, decision, how, start)
                claims.release(unit.key)
            else:
                to_build.append((unit, decision))
        had.update(_build_at_once(site, to_build, labels, claims))
    finally:
        claims.release_all()
    return [had[u.name] for u in units]


def _decided_first(site: Site, unit: Unit, building: set[str]) -> tuple[reuse.Decision, str]:
    """_decided, except that a unit whose image below is to be built in this step is built too."""
    below = site.plan.below(unit)
    if below is None or below.name not in building:
        return _decided(site, unit, _layer_below(site, unit))
    return reuse.decide(site.client, unit, variant=site.plan.variant(unit), rebuild=site.rebuild,
                        below=reuse.Below(below.name, None), registry=site.plan.options.remote), "built"


class _Claims:
    """The key locks a step took, each released by whichever thread is done with its unit (or at the end)."""

    def __init__(self) -> None:
        self._held: set[str] = set()
        self._guard = threading.Lock()

    def take(self, key: str) -> None:
        key_lock(key).acquire()
        with self._guard:
            self._held.add(key)

    def release(self, key: str) -> None:
        with self._guard:
            if key not in self._held:
                return
            self._held.discard(key)
        key_lock(key).release()

    def release_all(self) -> None:
        for key in list(self._held):
            self.release(key)


def _build_at_once(site: Site, batch: list[tuple[Unit, reuse.Decision]], labels: dict[str, Labels],
                   claims: _Claims) -> dict[str, UnitRecord]:
    """Every unit of batch built on one BuildKit with the build arguments atonce.batch gives it, each once the
    units it waits for are built; the units that inline the most first, as many at a time as there are CPUs
    (workers), a free thread taking the first ready: the longest chain (aiter's, once the build environments are
    there; the clean layer's) gets the CPU first, and the units below it then find their stages built and only
    export them. All at once on 2 cores, every unit competed for them and the wheels step took no less time
    (89.2 s against 87.0 s one after another, 2026-12-04). Each unit's key lock is released when its build is done."""
    units = [u for u, _ in batch]
    decisions = {u.name: d for u, d in batch}
    joined = atonce.batch(units, site.plan.needs)
    group = atonce.groups(joined)

    def work(unit: Unit) -> UnitRecord:
        start = time.monotonic()
        try:
            image_id = buildx.build(build_spec(unit), site.plan.options, labels=(*labels.get(unit.name, ()), *unit_labels(unit)),
                                    build_args=joined[unit.name].args, reproducible=True,
                                    containerd_store=site.containerd_store)
            together = group[unit.name]
            how = f"built at once ({', '.join(together)})" if len(together) > 1 else "built"
            return _built(site, unit, image_id, decisions[unit.name], start, how)
        finally:
            claims.release(unit.key)

    first = sorted(units, key=lambda unit: -len(joined[unit.name].inline))  # the longest chains first
    done = run(first, lambda unit: joined[unit.name].waits, work)
    return {u.name: d for u, d in zip(first, done, strict=True)}


def unit_labels(unit: Unit) -> Labels:
    """The labels an image is found by: its unit and key, and the inputs its key is the hash of. Nothing else: an
    image's bytes are a function of its key, so the variant that built it first is not among them (its tags say it)."""
    return ((engine.UNIT_LABEL, unit.name), (engine.KEY_LABEL, unit.key),
            (engine.INPUTS_LABEL, json.dumps(dict(unit.inputs), sort_keys=True, separators=(",", ":"))))


def summary(done: Sequence[UnitRecord]) -> str:
    """The units grouped by how each was had: "built: atom; found here by key: torch, triton, ..."."""
    groups: dict[str, list[str]] = {}
    for unit in done:
        groups.setdefault(unit.how, []).append(unit.name)
    return "; ".join(f"{how}: {', '.join(names)}" for how, names in groups.items())


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
