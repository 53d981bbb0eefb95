"""The Docker engine through its SDK: preflight, inspect, read files from images, run containers, tag, clean up.

Builds do not come here: the SDK cannot drive BuildKit, so they go through the buildx CLI (cleanbuild.images.buildx).
This module is the boundary for Docker errors: every SDK or transport error leaves it as a CleanBuildError with
a fixed exit code and one line. Every container it creates carries the run's label (io.atom-build.run=<run id>),
has a unique name, and is removed in a `finally`; cleanup finds any left over by that label.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import json
import re
import shlex
import shutil
import sys
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from packaging.version import Version

from cleanbuild.core import interrupts, metadata
from cleanbuild.core.errors import (
    CleanBuildError,
    EnvironmentProblem,
    StepFailed,
    UsageError,
)
from cleanbuild.core.refs import parse_image, split_image
from cleanbuild.core.run import run
from cleanbuild.core.spec import EngineFacts, RunSpec

if TYPE_CHECKING:
    from docker.client import DockerClient
    from docker.models.images import Image

MIN_ENGINE = Version("20.10")
# Moby 26.0 vendors BuildKit 0.13: SOURCE_DATE_EPOCH in the config and history, whiteouts at time 0, mount stubs
# removed with their parent's time kept (measured, 2026-12-03). Debian's build reports BuildKit "v0.0.0+unknown",
# so the engine's version is what can be read.
REPRODUCIBLE_ENGINE = Version("26.0")
CONTAINERD_STORE = "io.containerd.snapshotter.v1"
_COUNTER = itertools.count()
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _boundary(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """SDK and transport errors -> one-line CleanBuildErrors (ImageNotFound is the user's input: exit 2)."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        import requests

        import docker

        try:
            return fn(*args, **kwargs)
        except CleanBuildError:
            raise
        except docker.errors.ImageNotFound as exc:
            raise UsageError(f"image not found: {_explain(exc)}. To fix, build it or pass an existing image.") from None
        except docker.errors.APIError as exc:
            raise StepFailed(f"the Docker engine refused {fn.__name__.strip('_')}: {_explain(exc)}.") from None
        except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
            raise EnvironmentProblem(f"the Docker engine failed during {fn.__name__.strip('_')} ({type(exc).__name__}: {_explain(exc)}). To fix, check dockerd.") from None

    return wrapper


def _explain(exc: Exception) -> str:
    text = getattr(exc, "explanation", None) or str(exc)
    return " ".join(str(text).split())[:300]


def client() -> DockerClient:
    import docker  # the SDK is a host dependency; imported late so `invoke --list` works without an engine

    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine is the same problem to the user
        raise EnvironmentProblem(f"the Docker engine is not reachable ({type(exc).__name__}). To fix, start dockerd "
                                 "(see .ci/install-docker.sh) or set DOCKER_HOST.") from None
    return client


@_boundary
def preflight(client: DockerClient, need_gib: float, builder: str | None = None) -> EngineFacts:
    """Engine recent enough, buildx present (and the builder, when one is named), disk space for the plan."""
    version = str(client.version().get("Version", "0"))
    if Version(_numeric(version)) < MIN_ENGINE:
        raise EnvironmentProblem(f"Docker engine {version} is too old for BuildKit mounts. To fix, upgrade to {MIN_ENGINE} or newer.")
    result = run(["docker", "buildx", "version"], check=False, capture=True, echo=False)
    if result.returncode != 0:
        raise EnvironmentProblem("the buildx CLI plugin is missing. To fix, install docker-buildx (see .ci/install-docker.sh).")
    if builder and run(["docker", "buildx", "inspect", builder], check=False, capture=True, echo=False).returncode:
        raise UsageError(f"buildx builder {builder!r} does not exist. To fix, create it (docker buildx create) or drop --builder.")
    info = client.info()
    root = info.get("DockerRootDir", "/var/lib/docker")
    free = shutil.disk_usage(root if Path(root).exists() else "/").free / 2**30
    if free < need_gib:
        raise EnvironmentProblem(f"only {free:.1f} GiB free under {root}; this plan needs {need_gib:.0f} GiB. To fix, run `docker system prune` or free disk.")
    store = dict(info.get("DriverStatus") or []).get("driver-type") == CONTAINERD_STORE
    return EngineFacts(version, result.stdout.strip(), root, round(free, 1), store,
                       reproducible_builds(version, store, builder))


def reproducible_builds(version: str, containerd_store: bool, builder: str | None) -> bool:
    """BuildKit >= 0.13 (the engine's own: Docker >= 26) sets the config's times to SOURCE_DATE_EPOCH and leaves a
    RUN's layer with the times the RUN set (docker/scripts/clamp_times.py), and its image exporter writes into the
    containerd store as it is (ID = manifest digest, pushed unchanged). A named builder's BuildKit version is not
    known here: it keeps the --load path."""
    return builder is None and containerd_store and Version(_numeric(version)) >= REPRODUCIBLE_ENGINE


def _numeric(version: str) -> str:
    head = version.split("+")[0].split("-")[0]
    return head if head.replace(".", "").isdigit() else "0"


@_boundary
def image_id(client: DockerClient, name: str) -> str | None:
    import docker

    try:
        return client.images.get(name).id
    except docker.errors.ImageNotFound:
        return None


@_boundary
def inspect(client: DockerClient, ref: str) -> dict[str, Any]:
    """The engine's inspect JSON (arbitrary nesting, read by key where it is used)."""
    return _inspected(client, ref)


def _inspected(client: DockerClient, ref: str) -> dict[str, Any]:
    inspected: dict[str, Any] = client.api.inspect_image(ref)  # type: ignore[no-untyped-call]  # types-docker leaves it untyped
    return inspected


@_boundary
def read_file(client: DockerClient, image: str, path: str, run_id: str = "adhoc") -> bytes | None:
    """A file's bytes from an image without starting it (create, get_archive, remove); None when absent."""
    import docker

    # Ctrl-C waits for the read (a second or two): one landing between the engine creating the container and the
    # SDK returning it left it behind, where the run's cleanup raced the engine's create (measured 2026-12-01).
    with interrupts.held():
        container = client.containers.create(image, command=["/nonexistent"], entrypoint=[], network_disabled=True,
                                          name=f"atom-read-{run_id}-{next(_COUNTER)}",
                                          labels={metadata.RUN_LABEL: run_id})
        try:
            stream, _ = container.get_archive(path)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                member = tar.next()
                handle = tar.extractfile(member) if member else None
                return handle.read() if handle else None
        except docker.errors.NotFound:
            return None
        finally:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def read_json(client: DockerClient, image: str, path: str, run_id: str = "adhoc") -> object | None:
    data = read_file(client, image, path, run_id)
    if not data:
        return None
    try:
        parsed: object = json.loads(data)
    except ValueError:
        raise UsageError(f"{image}:{path} is not valid JSON. To fix, rebuild the image with build-clean.") from None
    return parsed


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    logs: str


class MissingExecutable(StepFailed):
    """A sealed run's command names an executable the image does not have (audit then tries another name)."""


# What a sealed run adds to `docker run`, as people would type it.
SEALED_FLAGS = ("--read-only", "--tmpfs", "/tmp", "--entrypoint", "", "--user", "0:0",
                "--security-opt", "no-new-privileges")


@_boundary
def run_container(client: DockerClient, image: str, spec: RunSpec, gpu: Mapping[str, Any] | None = None, timeout_s: float = 3600, *,
                  sealed: bool = False) -> RunResult:
    """Run spec in image: the one place a container is started. gpu: the device kwargs of cleanbuild.gpuhost.gpu. Logs
    come back whatever the exit; the container is created, then started inside the `try`, so a failed start is
    removed too. sealed (audit, on any image): root, read-only root fs, tmpfs /tmp, no entrypoint, no new
    privileges, the command line on stderr (stdout carries --json), the image's anonymous volumes removed with
    it, and MissingExecutable when the image lacks the command's executable."""
    import docker

    for host, _, mode in spec.mounts:
        if mode == "rw":
            Path(host).mkdir(parents=True, exist_ok=True)
    kwargs = _sealed_kwargs(spec) if sealed else _sdk_kwargs(spec, gpu or {})
    argv = spec.argv(image)
    shown = [*argv[:3], *SEALED_FLAGS, *argv[3:]] if sealed else argv
    print(f"+ {shlex.join(shown)}", file=sys.stderr, flush=True)  # stderr, as every command: stdout is a task's answer
    container = client.containers.create(image, list(spec.command), **kwargs)
    try:
        try:
            container.start()
        except docker.errors.APIError as exc:
            if sealed and "executable file not found" in str(exc):
                raise MissingExecutable(f"{image} has no {spec.command[0]}.") from None
            raise
        try:
            status = container.wait(timeout=timeout_s)
        except Exception:  # noqa: BLE001 - the SDK raises a requests timeout type here
            raise StepFailed(f"{spec.step} did not finish within {timeout_s:.0f} s. To fix, look at `docker logs {spec.name}` while it runs.") from None
        logs = container.logs(stdout=True, stderr=True).decode(errors="replace")
        return RunResult(int(status.get("StatusCode", 1)), logs)
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            if sealed:
                container.remove(force=True, v=True)  # v: the anonymous volumes of an image's VOLUME lines too
            else:
                container.remove(force=True)


def _sdk_kwargs(spec: RunSpec, gpu: Mapping[str, Any]) -> dict[str, Any]:
    from docker.types import Mount

    kwargs: dict[str, Any] = {
        "name": spec.name, "network_mode": spec.network, "working_dir": spec.workdir,
        "environment": dict(spec.env), "labels": {metadata.RUN_LABEL: spec.run_id or "adhoc"},
        # Mount objects, not `volumes`: a host path holding ':' (a model folder) is taken as it is.
        "mounts": [Mount(target=inside, source=host, type="bind", read_only=mode == "ro")
                   for host, inside, mode in spec.mounts],
    }
    if spec.gpu:
        env = {**kwargs["environment"], **gpu.get("environment", {})}
        kwargs.update({k: v for k, v in gpu.items() if k != "environment"}, environment=env)
    return kwargs


def _sealed_kwargs(spec: RunSpec) -> dict[str, Any]:
    from docker.types import Mount

    # root, whatever the image's USER: it must read every home folder; the root fs is read-only, the network off.
    return {
        "name": spec.name, "network_mode": spec.network, "working_dir": spec.workdir, "environment": dict(spec.env),
        "labels": {metadata.RUN_LABEL: spec.run_id or "adhoc"},
        # Mount objects, as the engine uses: a host path holding ':' (a model folder) is taken as it is.
        "mounts": [Mount(target=inside, source=host, type="bind", read_only=mode == "ro")
                   for host, inside, mode in spec.mounts],
        "entrypoint": [], "user": "0:0", "read_only": True, "tmpfs": {"/tmp": "rw,nosuid,size=256m"},
        "security_opt": ["no-new-privileges"],
    }


@_boundary
def remove_run_containers(client: DockerClient, run_id: str) -> list[str]:
    """Every container a run created, found by its label (even one a Ctrl-C left with a random name)."""
    import docker

    removed = []
    # ignore_removed: a container that goes away between the list and its inspect (a --rm run ending) is not an error
    for c in client.containers.list(all=True, ignore_removed=True, filters={"label": f"{metadata.RUN_LABEL}={run_id}"}):
        with contextlib.suppress(docker.errors.NotFound):
            c.remove(force=True)
            removed.append(c.name or c.short_id)  # the engine names every container; the SDK types it Optional
    return removed


@_boundary
def tag(client: DockerClient, image: str, repository: str, tag_name: str) -> str:
    if not client.images.get(image).tag(repository, tag_name):
        raise StepFailed(f"the engine did not tag {image} as {repository}:{tag_name}.")
    return f"{repository}:{tag_name}"


@_boundary
def untag(client: DockerClient, ref: str) -> bool:
    import docker

    try:
        client.images.remove(ref, noprune=True)
        return True
    except docker.errors.ImageNotFound:
        return False


@_boundary
def largest_layers(client: DockerClient, image: str, count: int = 5) -> list[dict[str, Any]]:
    layers = sorted(history(client, image), key=lambda h: h.get("Size", 0), reverse=True)[:count]
    return [{"size": h.get("Size", 0), "created_by": (h.get("CreatedBy") or "")[:160]} for h in layers]


@_boundary
def history(client: DockerClient, image: str) -> list[dict[str, Any]]:
    """The image's build history, newest first: each entry's Size, CreatedBy."""
    entries: list[dict[str, Any]] = client.api.history(image)  # type: ignore[no-untyped-call]  # types-docker leaves APIClient.history untyped
    return entries


def layer_sizes(history: list[dict[str, Any]], layers: list[str]) -> list[dict[str, Any]]:
    """The image's layers bottom first, each {"digest", "size", "created_by"}: history (newest first, as the engine
    answers) paired with RootFS. Entries of size 0 made no layer (ENV, LABEL); where the count of the others is not
    the count of layers the pairing is unknown, and the digests are left out. Pure."""
    made = [h for h in reversed(history) if h.get("Size")]
    paired = len(made) == len(layers)
    return [{"digest": layers[i] if paired else None, "size": h.get("Size", 0),
             "created_by": (h.get("CreatedBy") or "")[:160]} for i, h in enumerate(made)]


@_boundary
def layers(client: DockerClient, image: str) -> list[str]:
    """The image's layer digests (RootFS), bottom first: what two images share is stored and shipped once."""
    return list(_inspected(client, image).get("RootFS", {}).get("Layers", []))


@_boundary
def save(client: DockerClient, image: str, dest: Path) -> Path:
    """`docker save` of one image into dest (a tar: manifest.json names each layer's file, bottom first)."""
    with dest.open("wb") as out:
        for chunk in client.images.get(image).save(named=False):
            out.write(chunk)
    return dest


def _split(ref: str) -> tuple[str, str]:
    """(repository, tag) as the SDK's pull and push take them: a digest goes where the tag goes, none is 'latest'."""
    name = parse_image(ref)
    return name.repository, name.digest or name.tag or "latest"


@_boundary
def pull(client: DockerClient, ref: str) -> str | None:
    """Pull ref from its registry: the image ID, or None when the registry does not have it. Credentials come from
    Docker's own config and credential helpers (the SDK reads them); nothing of them is printed or stored here."""
    import docker

    repo, tag = _split(ref)
    try:
        image = client.images.pull(repo, tag=tag)
    except docker.errors.NotFound:
        return None
    except docker.errors.APIError as exc:
        if "manifest unknown" in _explain(exc) or "not found" in _explain(exc).lower():
            return None
        raise
    return image.id


@_boundary
def push(client: DockerClient, ref: str) -> str:
    """Push ref; returns the manifest digest the registry stored. A failed push (the registry went away) is one
    line; the registry only creates the tag once every blob and the manifest arrived, so no half-tagged image.

    The containerd store pulls an index's own platform's manifest but not its attestation manifest (platform
    unknown/unknown), so a pulled image with attestations cannot be pushed from here ("missing content"): the
    registry then copies it from where it was pulled, by digest (registry_copy)."""
    repo, tag = _split(ref)
    digest = None
    for line in client.images.push(repo, tag=tag, stream=True, decode=True):
        if "error" in line:
            error = " ".join(str(line["error"]).split())
            source = _pulled_from(client, ref) if "missing content" in error else None
            if source is not None:
                return registry_copy(client, source, ref)
            raise StepFailed(f"push of {ref} failed: {error[:300]}. To fix, check the registry and retry.")
        digest = (line.get("aux") or {}).get("Digest") or _status_digest(line.get("status")) or digest
    if digest is None:
        raise StepFailed(f"push of {ref} reported no digest. To fix, check the registry.")
    return digest


def _pulled_from(client: DockerClient, ref: str) -> str | None:
    """A REPO@sha256:... of ref's image that its registry holds (the containerd store lists a digest for every
    registry-style name, pushed or not); one whose registry does not answer is passed over."""
    for source in repo_digests(client, ref):
        try:
            if "/" in source and registry_has(client, source):
                return source
        except CleanBuildError:
            continue
    return None


def registry_copy(client: DockerClient, source: str, dest: str) -> str:
    """Tag dest as source (REPO@sha256:..., in this registry or another) without moving anything through this
    engine: `docker buildx imagetools create` copies the manifest or index as it is, with its blobs (mounted
    within one registry). Returns the digest the registry holds for dest."""
    done = run(["docker", "buildx", "imagetools", "create", "--tag", dest, source], check=False, capture=True, echo=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise StepFailed(f"push of {dest} (a registry copy of {source}) failed: {last[:300]}. To fix, check the registry and retry.")
    return str(client.images.get_registry_data(dest).id)


def _status_digest(status: object) -> str | None:
    """The digest in a push's last status line ("TAG: digest: sha256:... size: N"): the containerd image store
    (Docker 26) reports it only there, without the classic store's aux record."""
    match = re.search(r"digest: (sha256:[0-9a-f]{64})", str(status or ""))
    return match.group(1) if match else None


@_boundary
def repo_digests(client: DockerClient, ref: str) -> list[str]:
    return list(_inspected(client, ref).get("RepoDigests") or [])


# ---- images found by key (cleanbuild.images.components) ---------------------------------------------------------------

KEY_LABEL, UNIT_LABEL, INPUTS_LABEL = (metadata.label(n) for n in ("key", "unit", "inputs"))


def _listed(client: DockerClient, labels: list[str]) -> list[Image]:
    """The images carrying these labels. The SDK lists IDs, then inspects each: an image another thread removes in
    between (a variant of a matrix building at the same time replaces its own unit's image) makes the list raise
    ImageNotFound, so the list is asked again (the last try's error goes to the caller)."""
    import docker

    for _ in range(4):
        with contextlib.suppress(docker.errors.ImageNotFound):
            return client.images.list(filters={"label": labels})
    return client.images.list(filters={"label": labels})


@_boundary
def _keyed(client: DockerClient, unit: str, key: str) -> list[Image]:
    found = _listed(client, [f"{KEY_LABEL}={key}", f"{UNIT_LABEL}={unit}"])
    return sorted(found, key=lambda i: i.attrs.get("Created", ""), reverse=True)


def _id(image: Image) -> str:
    """A listed image always has its ID; the SDK types Model.id Optional (a model made from partial attrs)."""
    if image.id is None:
        raise StepFailed("the Docker engine listed an image without an ID. To fix, check dockerd.")
    return image.id


def images_by_key(client: DockerClient, unit: str, key: str) -> list[tuple[str, tuple[str, ...]]]:
    """(image ID, its tags) of every local image built for this unit and key, whatever its name, newest first.
    More than one where the engine cannot build reproducibly (Docker 20.10 stamps build times) and an image was
    built again while an earlier one kept another name (a registry name, another plan's)."""
    return [(_id(i), tuple(i.tags)) for i in _keyed(client, unit, key)]


def find_by_key(client: DockerClient, unit: str, key: str, name: str = "", on: str | None = None) -> tuple[str, tuple[str, ...]] | None:
    """(image ID, its tags) of a local image built for this unit and key, whatever its name; None if none. Where
    several carry the key, the one already named `name`, else the newest: a name never moves to another image of
    the same key, so what was built FROM it stays built FROM the same bytes.
    on: the image (name or ID) the unit's target starts FROM. Only an image built on exactly its layers is taken:
    one built on another image of that key (Docker 20.10 rebuilds with new bytes) would ship those layers again
    under the next build that starts FROM the name, so it is built again instead."""
    below = layers(client, on) if on is not None else None
    named = _named_with_key(client, name, unit, key) if name else None
    if named is not None and (below is None or _sits_on(named, below)):
        return _id(named), tuple(named.tags)  # what the listing below would pick, for one inspect (no-op builds)
    found = _keyed(client, unit, key)  # lists every image: slow on the containerd store, so only where name misses
    if below is not None:
        found = [i for i in found if _sits_on(i, below)]
    pairs = [(_id(i), tuple(i.tags)) for i in found]
    return next((i for i in pairs if name in i[1]), pairs[0] if pairs else None)


def _sits_on(image: Image, below: list[str]) -> bool:
    return list(image.attrs.get("RootFS", {}).get("Layers", []))[:len(below)] == below


@_boundary
def _named_with_key(client: DockerClient, name: str, unit: str, key: str) -> Image | None:
    """The image called name, when it was built for this unit and key (else None: absent, or another key's)."""
    import docker

    try:
        image = client.images.get(name)
    except docker.errors.ImageNotFound:
        return None
    labels = image.attrs.get("Config", {}).get("Labels") or {}
    return image if labels.get(KEY_LABEL) == key and labels.get(UNIT_LABEL) == unit else None


@_boundary
def last_inputs(client: DockerClient, unit: str, variant: str, key: str) -> dict[str, Any] | None:
    """The inputs of the other build of this unit tagged here last: what changed since it was used. variant: the
    plan's stem for a unit with one image per arch and CK mode, whose images count only when tagged for it
    (`<stem>-<key>`): no image's config names its variant, since one of a key every variant shares (mori from
    PyPI) is the same image whichever variant built it first.
    Not the newest by Created: a reproducible build's is SOURCE_DATE_EPOCH, and BuildKit 0.8 dates a cache hit by
    the build that first made its layers. The engine's LastTagTime is when this machine last built, found or pulled
    it (every such image gets the plan's tag; cleanbuild.images.buildx names a reproducible build after it is
    stored, since the exporter dates its own name SOURCE_DATE_EPOCH); Created only breaks ties."""
    found = _listed(client, [f"{UNIT_LABEL}={unit}"])
    others = sorted((i for i in found if (i.labels or {}).get(KEY_LABEL) != key and _tagged_for(i, variant)),
                    key=lambda i: (engine_time((i.attrs.get("Metadata") or {}).get("LastTagTime")),
                                   engine_time(i.attrs.get("Created"))), reverse=True)
    for image in others:
        with contextlib.suppress(ValueError, TypeError):
            return dict(json.loads(image.labels.get(INPUTS_LABEL, "")))
    return None


def _tagged_for(image: Image, variant: str) -> bool:
    """Any image for a unit of every variant; for a variant's unit, one with a tag `<variant>-...`."""
    return not variant or any(split_image(tag)[1].startswith(f"{variant}-") for tag in image.tags)


_EPOCH = datetime.min.replace(tzinfo=UTC)


def engine_time(stamp: object) -> datetime:
    """An engine's RFC 3339 time (nanoseconds, Z or an offset; Go's zero time when unset) as a datetime; the
    earliest one for what does not parse."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", str(stamp or ""))
    if match is None:
        return _EPOCH
    whole, fraction, zone = match.groups()
    micro = (fraction or "").ljust(6, "0")[:6]
    return datetime.fromisoformat(f"{whole}.{micro}{'+00:00' if zone == 'Z' else zone}")


@_boundary
def registry_has(client: DockerClient, ref: str) -> bool:
    """A manifest check through the engine (no layers move): does the registry hold ref?"""
    import docker

    try:
        client.images.get_registry_data(ref)
        return True
    except (docker.errors.NotFound, docker.errors.ImageNotFound):
        return False
    except docker.errors.APIError as exc:
        if "manifest unknown" in _explain(exc) or "not found" in _explain(exc).lower():
            return False
        raise
