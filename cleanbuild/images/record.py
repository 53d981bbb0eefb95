"""The build record: everything a run learned, typed and immutable. Each step returns a new record
(dataclasses.replace); labels, the release reference and the report are pure functions of the plan and it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cleanbuild.core import metadata
from cleanbuild.core.errors import StepFailed
from cleanbuild.core.metadata import ImageFacts
from cleanbuild.core.spec import EngineFacts
from cleanbuild.images.plan import Plan
from cleanbuild.images.tag import Tag


class StepStatus(StrEnum):
    """How a step ended; the values are what reports, JSON and the console show."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    REUSED = "reused"  # everything it would make already existed


@dataclass(frozen=True)
class StepRecord:
    name: str
    status: StepStatus
    seconds: float
    detail: str = ""


@dataclass(frozen=True)
class Wheels:
    image: str
    image_id: str
    reused: bool
    manifest: dict[str, Any]
    manifest_digest: str


@dataclass(frozen=True)
class UnitRecord:
    """One keyed image of the run (cleanbuild.images.components): built, or reused and from where."""

    name: str
    key: str
    image: str
    image_id: str
    status: str  # built | reused
    how: str  # "found here by key", "pulled from the registry", "built", "built and pushed", ...
    changed: tuple[str, ...] = ()  # built: the inputs that differ from the newest other build of this unit here
    seconds: float = 0.0  # how long finding, pulling or building it took (the report's timeline)
    began: float | None = None  # time.monotonic() when it began (its wait for the key's lock included)


@dataclass(frozen=True)
class ImageSummary:
    """What the report says of the candidate image, read from the engine by the step that writes the report
    (cleanbuild.images.observe), so the report itself asks no engine."""

    size_bytes: int | None
    layers: tuple[str, ...]  # the layer digests (RootFS), bottom first
    labels: dict[str, str]
    largest_layers: tuple[dict[str, Any], ...]  # {"size", "created_by"}, largest first
    layer_sizes: tuple[dict[str, Any], ...] = ()  # every layer bottom first: {"digest", "size", "created_by", "unit"}
    # /opt/atom-build/payload.json and payload-left-out.json, as the clean step wrote them (reports.payload_section)
    payload: dict[str, Any] | None = None


@dataclass(frozen=True)
class BuildRecord:
    run_id: str
    started: float  # time.monotonic() at the start
    started_at: str  # ISO time, for people
    engine: EngineFacts | None = None
    prepared: dict[str, Any] | None = None
    wheels: Wheels | None = None
    clean_id: str | None = None
    candidate_id: str | None = None  # the image validation, smoke and tag act on
    candidate_ref: str | None = None  # its content-keyed name (build-clean) or the name the user gave
    candidate_digest: str | None = None  # promote: the registry manifest digest that was pulled and validated
    patches: dict[str, Any] | None = None
    triton_cache: dict[str, Any] | None = None  # the warm step's manifest, and its run facts when this run built it
    validation: dict[str, Any] | None = None
    smoke: dict[str, Any] | None = None
    gpu: tuple[dict[str, Any], ...] | None = None  # the GPUs a GPU step ran on
    facts: ImageFacts | None = None
    tag: Tag | None = None
    release_ref: str | None = None  # set only once the release tag exists
    dev_ref: str | None = None  # --src: the dev tag applied instead (never a release tag)
    units: tuple[UnitRecord, ...] = ()  # every keyed image the run made or reused, in build order
    steps: tuple[StepRecord, ...] = field(default=())
    image: ImageSummary | None = None  # the candidate as the engine saw it when the report was written
    finished: float | None = None  # time.monotonic() when the report was written

    def candidate(self) -> str:
        """The candidate's image ID: validate, smoke and tag act on what patch made (or the image a task names)."""
        if self.candidate_id is None:
            raise StepFailed("there is no candidate image yet. To fix, run the steps that make it first.")
        return self.candidate_id

    def tagged(self) -> tuple[ImageFacts, Tag]:
        """The image's facts and its tag, once release.release_tag has read them."""
        if self.facts is None or self.tag is None:
            raise StepFailed("the image's versions were not read yet, so it has no tag.")
        return self.facts, self.tag


def digest(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def clean_labels(plan: Plan, record: BuildRecord) -> tuple[tuple[str, str], ...]:
    """OCI and io.atom-build labels of the clean image: pins, arch, CK mode, the wheels manifest and lock digests."""
    wheels = record.wheels
    manifest = wheels.manifest if wheels else {}
    out = {
        "org.opencontainers.image.title": "atom-clean",
        "org.opencontainers.image.base.name": plan.base_image,
        metadata.label("profile"): plan.profile.name,
        metadata.label("pinned"): plan.profile.pinned,
        metadata.label("wheels-image"): plan.wheels.image,
        metadata.label("wheels-manifest-digest"): wheels.manifest_digest if wheels else "",
        metadata.label("lock-digest"): str(manifest.get("lock_sha256", "")),
    }
    for comp in plan.profile.components:
        out[metadata.label(f"source.{comp.name}")] = comp.provenance()
    for name, src in (manifest.get("sources") or {}).items():
        if src:
            out[metadata.label(f"commit.{name}")] = f"{src.get('sha')} ({src.get('describe')})"
    for wheel in manifest.get("wheels", []):
        if wheel.get("component") not in ("deps",):
            out[metadata.label(f"version.{wheel['name']}")] = str(wheel.get("version", ""))
    return tuple(sorted(out.items()))


class StepFailedWith(StepFailed):
    """A step's wrong result together with what the step learned before it failed (validation's checks, the smoke
    output), so the failed report shows it."""

    def __init__(self, message: str, record: BuildRecord) -> None:
        super().__init__(message)
        self.record = record
