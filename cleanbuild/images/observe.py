"""What the report says that only the engine and the clock know, read into the record before the report is written
(by the report step, cleanbuild.images.steps, and by the executor's failed report, cleanbuild.images.pipeline), so
the report itself (cleanbuild.images.report) asks no engine.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cleanbuild.core import engine, metadata
from cleanbuild.images.record import BuildRecord, ImageSummary

if TYPE_CHECKING:
    from docker.client import DockerClient


def observe(client: DockerClient | None, rec: BuildRecord, base: str | None = None) -> BuildRecord:
    """What the report says that only the engine and the clock know, into the record: the candidate's size,
    layers and labels (when there is a candidate and an engine), and the time the run ended."""
    image = None
    if rec.candidate_id and client is not None:
        inspected = engine.inspect(client, rec.candidate_id)
        layers = tuple((inspected.get("RootFS") or {}).get("Layers", []))
        largest = tuple(engine.largest_layers(client, rec.candidate_id))
        sizes = engine.layer_sizes(engine.history(client, rec.candidate_id), list(layers))
        image = ImageSummary(inspected.get("Size"), layers, dict((inspected.get("Config") or {}).get("Labels") or {}),
                             largest, tuple(_owned(client, rec, sizes, base)), _payload(client, rec))
    return replace(rec, image=image, finished=time.monotonic())


def _payload(client: DockerClient, rec: BuildRecord) -> dict[str, Any] | None:
    """The image's own payload manifest and what its clean step left out (None for an image built without them)."""
    image = rec.candidate()
    manifest = engine.read_json(client, image, metadata.PAYLOAD_PATH, rec.run_id)
    left_out = engine.read_json(client, image, metadata.PAYLOAD_LEFT_OUT_PATH, rec.run_id)
    if not isinstance(manifest, dict):
        return None
    return {"manifest": manifest, "left_out": left_out if isinstance(left_out, dict) else None}


def _owned(client: DockerClient, rec: BuildRecord, sizes: list[dict[str, Any]], base: str | None) -> list[dict[str, Any]]:
    """Each layer named by the image that first holds it: the base image, or the unit (venv, atom-layer, clean,
    candidate) whose layers the candidate's start with. Bottom first, so the layer at index i belongs to the
    smallest of those images that has more than i layers."""
    counts = [("base", len(engine.layers(client, base)) if base and engine.image_id(client, base) else 0)]
    candidate = [s["digest"] for s in sizes]
    for unit in rec.units:
        own = engine.layers(client, unit.image_id)
        if own and own == candidate[:len(own)]:
            counts.append((unit.name, len(own)))
    counts.sort(key=lambda c: c[1])
    return [{**s, "unit": next((n for n, k in counts if k > i), "candidate")} for i, s in enumerate(sizes)]
