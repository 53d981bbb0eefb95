"""`invoke verify REF`: rebuild an image from its own labels on this engine and compare digests.

The labels give the profile, arch, CK mode and the registry prefix the image was named under; its key label is the
hash of every input (pins, lock blocks, Dockerfile stages, scripts, patches: cleanbuild.images.components), so this
checkout can rebuild it only when the plan's key for that unit is the image's key, and the lock digest matches.
Then every unit is built again (rebuild) through the pipeline's own steps, and the digests are compared: the same
digest proves the image came from these inputs. Every name keeps pointing where it did; a rebuild that differs is
kept as `<unit image>-rebuilt` for a closer look.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cleanbuild.core import engine, metadata
from cleanbuild.core.errors import EnvironmentProblem, StepFailed, UsageError
from cleanbuild.core.refs import split_image
from cleanbuild.images import pipeline, reproduce
from cleanbuild.images.components import changed
from cleanbuild.images.plan import Plan, make_plan
from cleanbuild.request.build import Request
from cleanbuild.request.load import load_profile, parse_arch

if TYPE_CHECKING:
    from docker.client import DockerClient

STEPS = ("preflight", "prepare", "wheels", "clean", "patch")


def label_request(labels: Mapping[str, str], given: Request, ref: str) -> tuple[Request, str, str]:
    """(request, unit, registry prefix) the image was built with, from its labels: its profile (unless --profile
    names one), arch and CK mode. Reads no engine; loads the label's profile."""
    unit = labels.get(engine.UNIT_LABEL)
    label = labels.get(metadata.label("profile"))
    wheels = labels.get(metadata.label("wheels-image"), "")
    arch, ck_mode = metadata.image_labels(dict(labels))
    if not unit or not label or not arch or "/wheels:" not in wheels:
        raise UsageError(f"{ref} lacks the io.atom-build labels of a clean or candidate image (unit, profile, arch, "
                         "wheels-image). To fix, pass an image built by invoke build-clean.")
    built = given.profile if given.profile_from == "--profile" else load_profile(
        label, given.overrides, given.mirror, torch_index=given.torch_index)
    request = replace(given, profile=built, arch=parse_arch(arch), ck_free=ck_mode == "ckfree")
    return request, unit, wheels.rsplit("/wheels:", 1)[0]


def rebuild_plan(client: DockerClient, ref: str, given: Request) -> tuple[Plan, str, str]:
    """(plan, unit name, image ID): a plan whose unit has the image's key, or a UsageError naming what differs."""
    info = engine.inspect(client, ref)
    labels = info.get("Config", {}).get("Labels") or {}
    request, unit_name, registry = label_request(labels, given, ref)
    request = _with_warm_model(request, _json_object(labels.get(engine.INPUTS_LABEL)) or {})
    plan = make_plan(request.profile, replace(request, registry=registry, cache="none").build(request.arch[0]))
    unit = plan.unit(unit_name)
    if unit.key != labels.get(engine.KEY_LABEL):
        image_inputs = _json_object(labels.get(engine.INPUTS_LABEL))
        moved = ", ".join(changed(image_inputs, dict(unit.inputs))) if image_inputs else "its inputs label is missing"
        raise UsageError(f"this checkout does not build {ref}: its {unit_name} key differs ({moved}). To fix, check out "
                         "the commit that built it, or pass the --set overrides it was built with.")
    lock = labels.get(metadata.label("lock-digest"))
    if lock and lock != plan.prepare.lock_digest:
        raise UsageError(f"{ref} was built from lock {lock[:19]}, this checkout has {plan.prepare.lock_digest[:19]}. "
                         "To fix, check out the commit that built it.")
    return plan, unit_name, info["Id"]


def _with_warm_model(request: Request, inputs: Mapping[str, Any]) -> Request:
    """The request with the model whose config.json the candidate was warmed for (its WARM_MODEL_CONFIG input, the
    config as one line of JSON) when none is given: written to a folder of the cache, as --model would give it."""
    config = inputs.get("WARM_MODEL_CONFIG")
    if request.model is not None or not isinstance(config, str) or not config:
        return request
    folder = request.cache_dir / "verify" / f"model-{hashlib.sha256(config.encode()).hexdigest()[:16]}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(config + "\n")
    return replace(request, model=folder)


def _json_object(text: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(text or "")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def rebuild_and_compare(client: DockerClient, ref: str, given: Request) -> dict[str, Any]:
    """Rebuild ref's unit from its labels (every unit built again); {"ref", "image", "rebuilt", "identical",
    "rebuilt_ref", "difference"}."""
    facts = engine.preflight(client, 2.0)  # what the engine can do; the rebuild's own preflight checks its disk
    if not facts.reproducible:
        raise EnvironmentProblem(f"Docker {facts.version} (containerd image store: {facts.containerd_store}) stamps build "
                                 "times into images, so a rebuild never has the same digest. To fix, verify on Docker "
                                 ">= 26 with the containerd image store (.ci/install-docker.sh).")
    plan, unit_name, image_id = rebuild_plan(client, ref, given)
    image = plan.unit(unit_name).image
    repo, tag = split_image(image)
    before = engine.image_id(client, image)
    # The containerd store drops an image that loses its last name: hold the verified one (and what the unit's
    # name pointed to) under names of their own while the rebuild takes the unit's name.
    holds = [engine.tag(client, image_id, repo, f"{tag[:100]}-verified")]
    if before and before != image_id:
        holds.append(engine.tag(client, before, repo, f"{tag[:100]}-previous"))
    try:
        pipeline.run(plan, client, STEPS, rebuild=True, failed_report=False)
        rebuilt = str(engine.image_id(client, image))
        result = {"ref": ref, "image": image_id, "rebuilt": rebuilt, "identical": rebuilt == image_id,
                  "rebuilt_ref": image, "difference": None}
        if not result["identical"]:
            result["difference"] = reproduce.first_difference(client, image_id, rebuilt)
            result["rebuilt_ref"] = engine.tag(client, rebuilt, repo, f"{tag[:100]}-rebuilt")
            if before:
                engine.tag(client, before, repo, tag)  # the unit's name goes back where it was
    finally:
        for hold in holds:
            engine.untag(client, hold)
    return result


def summary(result: dict[str, Any]) -> str:
    """One line: the same digest, or the first differing layer and file."""
    if result["identical"]:
        return f"{result['ref']}: rebuilt from its labels with the same digest {result['image']}"
    diff = result["difference"]
    where = ("the image config" if diff["layer"] is None
             else f"layer {diff['layer']} ({diff['diff_ids'][0]} vs {diff['diff_ids'][1]}), file {diff['file']}")
    return f"{result['ref']} ({result['image'][:19]}) differs from its rebuild ({result['rebuilt'][:19]}): {where}: {diff['why']}"


def check(result: dict[str, Any]) -> None:
    if not result["identical"]:
        raise StepFailed(summary(result))
