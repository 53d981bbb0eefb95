"""Units built at once: a unit's build reads the units it needs through build arguments that name their images
(VENV_IMAGE, DEPS_WHEELS, BUILDER, ...). Where a unit it needs is to be built too, from the same Dockerfile, its
build can name that unit's stage instead (`DEPS_WHEELS=deps-out`, `VENV_IMAGE=venv`): its target then builds those
stages inline. Started together on one BuildKit, the builds share those stages (BuildKit runs each vertex once), and
a unit no longer waits for the image export of the units below it: on the containerd store that export (tar, zstd,
digests, unpack, fsync) is seconds per unit and 20 s for the 2.7 GB venv layer.

A stage is only the same vertex, and its output only the same bytes, where the build arguments it reads have the
same values in both builds. So a unit inlines a unit it needs only where every argument that unit's stages read
has its value in this build too, and where the arguments it adds change none of this unit's own stages; else it
waits for that unit's image (the wheels assembly reads aiter's, built with GPU_ARCH="" in the Triton-only mode,
while its own GPU_ARCH names the arch). Nor where a stage of its own, other than a layer of its image, starts FROM
that unit's stage: BuildKit keys such a stage's cache by the chain below it, and a later build reading the image
would run it again (_cached_alike). A unit that waits for an image reads the images of every unit that one needs
as well: they are built by the time it starts, and building their stages again would only add vertices to look
up (and their build context to send: the local repositories, 217 MB offline). The LLB of every target is then the
one the images below would give, so the digests are those of the units built one after another
(tests/integration/test_reproducible_digests.py). Pure: cleanbuild.images.schedule acts on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cleanbuild.images.components import Unit
from cleanbuild.images.dockerfile import built_on, from_chain, reached, used_args

Args = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Joined:
    """How one unit of a batch is built: the batch units whose stages its target runs inline (in batch order), the
    batch units it waits for (it reads their images), and its build arguments."""

    inline: tuple[str, ...]
    waits: tuple[str, ...]
    args: Args


def batch(units: Sequence[Unit], needs: Callable[[Unit], Iterable[str]]) -> dict[str, Joined]:
    """For every unit of units (all to be built, in build order) how it is built at once with the others. needs:
    the names of the units whose images a unit reads (cleanbuild.images.plan.Plan.needs)."""
    by_name = {u.name: u for u in units}
    order = [u.name for u in units]
    out: dict[str, Joined] = {}
    for unit in units:
        wanted = set(needs(unit))
        needed = [n for n in order if n in wanted]
        ready: set[str] = set()  # built by the time unit starts: it reads their images
        while True:
            inline = _inlined(unit, [n for n in needed if n not in ready and not ready & set(out[n].inline)],
                              units, out)
            waits = tuple(n for n in needed if n not in inline)
            now = _with_needs(waits, by_name, needs)
            if now <= ready:
                break
            ready |= now
        out[unit.name] = Joined(tuple(n for n in order if n in inline), waits, _args(units, inline, unit))
    return out


def _inlined(unit: Unit, names: list[str], units: Sequence[Unit], built: dict[str, Joined]) -> set[str]:
    """The units of names (in build order) whose stages unit's target builds inline: each with the units it
    inlines itself, where _consistent holds for all of them together."""
    by_name = {u.name: u for u in units}
    inline: set[str] = set()
    for name in names:
        lower = by_name[name]
        if lower.dockerfile != unit.dockerfile or lower.target is None or unit.target is None:
            continue
        trial = inline | {name} | set(built[name].inline)
        if _consistent(unit, _args(units, trial, unit), [by_name[n] for n in trial], built):
            inline = trial
    return inline


def _with_needs(names: Iterable[str], by_name: dict[str, Unit], needs: Callable[[Unit], Iterable[str]]) -> set[str]:
    """names and every unit of the batch they need, transitively: all built by the time every one of names is."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [n for n in needs(by_name[name]) if n in by_name]
    return seen


def groups(joined: dict[str, Joined]) -> dict[str, tuple[str, ...]]:
    """Each unit's group: the units linked to it by inlining, whose builds share stages."""
    parent = {name: name for name in joined}

    def root(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    for name, how in joined.items():
        for lower in how.inline:
            parent[root(lower)] = root(name)
    return {name: tuple(n for n in joined if root(n) == root(name)) for name in joined}


def _args(units: Sequence[Unit], inline: set[str], unit: Unit) -> Args:
    """unit's build arguments with those of the units it inlines (its own last: where they differ, its own value
    holds), each inlined unit's image replaced by its stage."""
    stages = {u.image: str(u.target) for u in units if u.name in inline}
    merged: dict[str, str] = {}
    for each in [*(u for u in units if u.name in inline), unit]:
        merged.update(each.args)
    return tuple((key, stages.get(value, value)) for key, value in merged.items())


def _consistent(unit: Unit, args: Args, inline: list[Unit], built: dict[str, Joined]) -> bool:
    """unit's target, with args, reaches every inlined unit's stage (FROM names only a stage defined above it);
    every argument an inlined unit's stages read has, in args, the value of that unit's own build; every argument
    the inlining adds to unit's own is one unit's own stages do not read; and BuildKit's cache of unit's stages
    serves a later build that reads the inlined units' images (_cached_alike)."""
    values = dict(args)
    stages = {s.name for s in reached(unit.dockerfile.read_text(), str(unit.target), values)}
    if any(lower.target not in stages for lower in inline):
        return False
    for lower in inline:
        own = dict(built[lower.name].args)
        if any(values.get(key) != own.get(key) for key in used_args(lower.dockerfile, str(lower.target), own)):
            return False
    added = set(values) - {key for key, _ in unit.args}
    if added & used_args(unit.dockerfile, str(unit.target), dict(unit.args)):
        return False
    return _cached_alike(unit, values, inline, built)


def _cached_alike(unit: Unit, values: dict[str, str], inline: list[Unit], built: dict[str, Joined]) -> bool:
    """No stage of unit's own that is not a layer of its image (its target's FROM chain) starts FROM an inlined
    unit's stage. BuildKit keys such a stage's cache by the chain below it: built on the stage here and on the
    image in a later build (a bump that reuses the unit below), it would run again there. aiter's torch-env and
    aiter-env start FROM builder-git and read no aiter pin: built on builder-git's stage, an aiter bump ran them
    again (19.1 -> 40.3 s, 2026-12-04). A stage read with COPY --from or --mount is keyed by its content. The
    layers of the unit's own image are allowed: the clean layers each start FROM the one below, and built at once
    the venv's export leaves their critical path; each installs what its key moved on (its /wheels mount, keyed
    by content), so a later build rebuilds it anyway."""
    text = unit.dockerfile.read_text()
    layers = set(from_chain(text, str(unit.target), values))
    for lower in inline:
        lower_stages = {s.name for s in reached(text, str(lower.target), dict(built[lower.name].args))}
        if built_on(text, str(unit.target), values, str(lower.target)) - lower_stages - layers:
            return False
    return True
