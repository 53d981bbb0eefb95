"""Layers built at once: the clean step's units (venv, atom-layer, clean) each start FROM the one below, named by a
build argument (VENV_IMAGE, ATOM_IMAGE). Where every one of them is to be built, the build of a higher one can
name the lower one's stage of the same Dockerfile instead of its image (`VENV_IMAGE=venv`): its target then builds
the layers below inline. Started together on one BuildKit, the builds share those stages (BuildKit runs each
vertex once), and a layer above no longer waits for the image export of the one below: on the containerd store
that export (tar, zstd, digests, fsync of the 2.7 GB venv layer) is most of the venv unit's time. The LLB is the
one the images below would give, so the digests are those of the layers built one after another (checked by
tests/integration/test_reproducible_digests.py). Pure: cleanbuild.images.steps acts on it.
"""

from __future__ import annotations

from collections.abc import Sequence

from .components import Unit


def joins(lower: Unit, upper: Unit) -> bool:
    """upper can build lower's layers inline: a stage of the same Dockerfile, named by one of upper's arguments."""
    return (upper.dockerfile == lower.dockerfile and lower.target is not None and upper.target is not None
            and any(value == lower.image for _, value in upper.args))


def stage_args(batch: Sequence[Unit], unit: Unit) -> tuple[tuple[str, str], ...]:
    """unit's build arguments, with those the stages below it read (clean's build reads atom's VENV_IMAGE too),
    every image of a unit below it in batch replaced by that unit's stage (clean gets ATOM_IMAGE=atom, and
    VENV_IMAGE=venv when the venv is in batch, else the venv's image)."""
    at = [u.name for u in batch].index(unit.name)
    stages = {u.image: str(u.target) for u in batch[:at]}
    merged: dict[str, str] = {}
    for each in batch[:at + 1]:  # unit's own last: where they differ, its own value holds
        merged.update(each.args)
    return tuple((key, stages.get(value, value)) for key, value in merged.items())
