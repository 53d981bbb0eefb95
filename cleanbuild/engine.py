"""The Docker engine through its SDK: preflight, inspect, read files from images, run containers, tag.

Builds do not come here: the SDK cannot drive BuildKit, so they go through the buildx CLI (cleanbuild.buildx).
Every container this module starts has a unique name and is removed in a `finally`, Ctrl-C included.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from .errors import EnvironmentProblem, StepFailed
from .plan import GPU_DEVICES, GPU_GROUPS, RunSpec
from .run import run

MIN_ENGINE = Version("20.10")


def client():
    import docker  # the SDK is a host dependency; imported late so `invoke --list` works without an engine

    try:
        cli = docker.from_env(timeout=600)
        cli.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine is the same problem to the user
        raise EnvironmentProblem(
            f"the Docker engine is not reachable ({type(exc).__name__}). To fix, start dockerd "
            "(see .ci/install-docker.sh) or set DOCKER_HOST."
        ) from None
    return cli


@dataclass(frozen=True)
class EngineFacts:
    version: str
    buildx: str
    root_dir: str
    free_gib: float


def preflight(cli, need_gib: float) -> EngineFacts:
    """Engine recent enough, buildx present, disk space for the plan."""
    info = cli.version()
    version = str(info.get("Version", "0"))
    if Version(_numeric(version)) < MIN_ENGINE:
        raise EnvironmentProblem(f"Docker engine {version} is too old for BuildKit mounts. To fix, upgrade to {MIN_ENGINE} or newer.")
    result = run(["docker", "buildx", "version"], check=False, capture=True, echo=False)
    if result.returncode != 0:
        raise EnvironmentProblem("the buildx CLI plugin is missing. To fix, install docker-buildx (see .ci/install-docker.sh).")
    root = cli.info().get("DockerRootDir", "/var/lib/docker")
    free = shutil.disk_usage(root if Path(root).exists() else "/").free / 2**30
    if free < need_gib:
        raise EnvironmentProblem(f"only {free:.1f} GiB free under {root}; this plan needs {need_gib:.0f} GiB. To fix, run `docker system prune` or free disk.")
    return EngineFacts(version, result.stdout.strip(), root, round(free, 1))


def _numeric(version: str) -> str:
    head = version.split("+")[0].split("-")[0]
    return head if head.replace(".", "").isdigit() else "0"


def image_id(cli, name: str) -> str | None:
    import docker

    try:
        return cli.images.get(name).id
    except docker.errors.ImageNotFound:
        return None


def inspect(cli, ref: str) -> dict:
    return cli.api.inspect_image(ref)


def read_file(cli, image: str, path: str) -> bytes | None:
    """A file's bytes from an image without starting it (create, get_archive, remove); None when absent."""
    import docker

    container = cli.containers.create(image, command=["/nonexistent"], entrypoint=[], network_disabled=True)
    try:
        stream, _ = container.get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            handle = tar.extractfile(member) if member else None
            return handle.read() if handle else None
    except docker.errors.NotFound:
        return None
    finally:
        container.remove(force=True)


def read_json(cli, image: str, path: str) -> dict | None:
    data = read_file(cli, image, path)
    return json.loads(data) if data else None


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    logs: str


def run_container(cli, image: str, spec: RunSpec, timeout_s: float = 1800) -> RunResult:
    """Run spec in image; logs are returned whatever the exit; the container is always removed."""
    for host, _, mode in spec.mounts:
        if mode == "rw":
            Path(host).mkdir(parents=True, exist_ok=True)
    kwargs = _sdk_kwargs(spec)
    print(f"+ {' '.join(spec.argv(image))}", flush=True)
    container = cli.containers.run(image, list(spec.command), detach=True, **kwargs)
    try:
        try:
            status = container.wait(timeout=timeout_s)
        except Exception:  # noqa: BLE001 - the SDK raises a requests timeout type here
            raise StepFailed(f"{spec.step} did not finish within {timeout_s:.0f} s. To fix, look at `docker logs {spec.name}` while it runs.") from None
        logs = container.logs(stdout=True, stderr=True).decode(errors="replace")
        return RunResult(int(status.get("StatusCode", 1)), logs)
    finally:
        container.remove(force=True)


def _sdk_kwargs(spec: RunSpec) -> dict:
    kwargs: dict = {
        "name": spec.name,
        "network_mode": spec.network,
        "working_dir": spec.workdir,
        "environment": dict(spec.env),
        "volumes": {host: {"bind": inside, "mode": mode} for host, inside, mode in spec.mounts},
    }
    if spec.gpu:
        missing = [d for d in GPU_DEVICES if not Path(d).exists()]
        if missing:
            raise EnvironmentProblem(f"{spec.step} needs the GPU but {', '.join(missing)} is missing on this host. To fix, run on a ROCm host or use a profile whose {spec.step} runs on the CPU.")
        kwargs.update(devices=[f"{d}:{d}:rwm" for d in GPU_DEVICES], group_add=list(GPU_GROUPS),
                      ipc_mode="host", security_opt=["seccomp=unconfined"])
    return kwargs


def remove_stray(cli, name_prefix: str) -> list[str]:
    """Remove containers left by an interrupted run of ours (unique prefixes, so nobody else's)."""
    removed = []
    for c in cli.containers.list(all=True, filters={"name": name_prefix}):
        c.remove(force=True)
        removed.append(c.name)
    return removed


def tag(cli, image: str, repository: str, tag_name: str) -> str:
    cli.images.get(image).tag(repository, tag_name)
    return f"{repository}:{tag_name}"


def untag(cli, ref: str) -> None:
    import docker

    with contextlib.suppress(docker.errors.ImageNotFound):
        cli.images.remove(ref, noprune=True)


def largest_layers(cli, image: str, count: int = 5) -> list[dict]:
    history = cli.api.history(image)
    layers = sorted(history, key=lambda h: h.get("Size", 0), reverse=True)[:count]
    return [{"size": h.get("Size", 0), "created_by": (h.get("CreatedBy") or "")[:160]} for h in layers]
