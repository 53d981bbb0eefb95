"""Reuse or build: where one keyed unit's image comes from, decided once. `invoke plan` shows the decision
(cleanbuild.commands.build.unit_states) and the build acts on it (cleanbuild.images.schedule.ensure), so the two cannot
disagree about the same engine and registry.

In order: --rebuild builds; an image with the unit's key here (whatever its name) is reused when it sits on the
image its target starts FROM (engine.find_by_key's on); else the registry, when one is configured and holds the
unit's image, is pulled from; else it is built, naming the inputs that changed since the last other build of the
unit here (engine.last_inputs, components.changed).

The plan decides before anything is built: where the image below is not here yet (it is pulled or built first),
what is here cannot be checked against it, and the unit is pulled (the registry holds it) or built. The build
asks once the image below is here; after a pull it asks again with the registry left out (what it pulled must
sit on the image below too). Reads the engine and the registry, changes neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from cleanbuild.core import engine
from cleanbuild.images.components import Unit, changed
from cleanbuild.images.plan import Plan

if TYPE_CHECKING:
    from docker.client import DockerClient

NO_EARLIER_BUILD = "no earlier build here"


class Action(Enum):
    REUSE = "reused"  # an image with the unit's key is here, on the image below
    PULL = "pull"  # the registry holds the unit's image
    BUILD = "build"


@dataclass(frozen=True)
class Below:
    """The unit whose image the unit's target starts FROM, and that image here (None: not here yet, it is
    `first` pulled or built)."""

    name: str
    image: str | None
    first: str = "built"


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    image_id: str = ""  # reused: the image found here
    tags: tuple[str, ...] = ()  # reused: its names
    changed: tuple[str, ...] = ()  # built: the inputs that differ from the last other build here


def decide(client: DockerClient, unit: Unit, *, variant: str, below: Below | None, registry: bool,
           rebuild: bool = False) -> Decision:
    """The decision for unit. variant: the plan's stem for a unit with one image per arch and CK mode, else "";
    below: None where the target starts FROM a base image or scratch; registry: ask the registry (a remote one is
    configured and not yet asked)."""
    if rebuild:
        return _build(client, unit, variant, "--rebuild")
    if below is not None and below.image is None:
        if registry and engine.registry_has(client, unit.image):
            return Decision(Action.PULL, f"the registry holds {unit.image}; the image it starts FROM "
                                         f"({below.name}) is {below.first} first")
        return Decision(Action.BUILD, f"the image it starts FROM ({below.name}) is {below.first} first")
    found = engine.find_by_key(client, unit.name, unit.key, unit.image, below.image if below else None)
    if found is not None:
        image_id, tags = found
        return Decision(Action.REUSE, f"found here by key ({', '.join(tags) or image_id[:19]})", image_id, tags)
    if registry and engine.registry_has(client, unit.image):
        return Decision(Action.PULL, f"the registry holds {unit.image}")
    elsewhere = below is not None and engine.images_by_key(client, unit.name, unit.key)
    return _build(client, unit, variant, f"its key is here on another image of {below.name}" if below and elsewhere else "")


def _build(client: DockerClient, unit: Unit, variant: str, why: str) -> Decision:
    last = engine.last_inputs(client, unit.name, variant, unit.key)
    moved = tuple(changed(last, dict(unit.inputs))) if last is not None else (NO_EARLIER_BUILD,)
    return Decision(Action.BUILD, why or ", ".join(moved), changed=moved)


def preview(client: DockerClient, plan: Plan) -> list[Decision]:
    """Every unit's decision, in build order, before anything is built (`invoke plan`): a unit below that is to
    be pulled or built is not here yet for the units above it."""
    decided: dict[str, Decision] = {}
    for unit in plan.units:
        below = plan.below(unit)
        decided[unit.name] = decide(client, unit, variant=plan.variant(unit), registry=plan.options.remote,
                                    below=_as_below(below.name, decided[below.name]) if below else None)
    return list(decided.values())


def _as_below(name: str, decision: Decision) -> Below:
    if decision.action is Action.REUSE:
        return Below(name, decision.image_id)
    return Below(name, None, "pulled" if decision.action is Action.PULL else "built")
