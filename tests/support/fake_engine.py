"""One fake Docker client for the host tier: the part of the docker SDK that cleanbuild.core.engine calls, over a small
store of images (ID, labels, names, layers, files, created) and containers (name, labels, image, mounts, removed).

It raises the SDK's own error types (docker.errors), so engine's boundary and every `suppress(NotFound)` act as on a
real engine. Faults are placed at exact calls: `refuse` makes the engine answer an error instead of doing the work
(a busy container that cannot be removed yet); `after` runs something once the engine has done the work but before
the SDK returns it (Ctrl-C pressed between the engine creating a container and the caller holding it). `ctrl_c`
sends the process a real SIGINT, so a block that holds Ctrl-C back (cleanbuild.core.interrupts) sees it as it would.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import signal
import tarfile
from collections.abc import Callable
from pathlib import Path

import docker
from cleanbuild.core import engine

Program = Callable[["Container"], tuple[int, str]]  # what a container does when started: (exit code, logs)


def ctrl_c() -> None:
    """The user presses Ctrl-C: a real SIGINT to this process."""
    os.kill(os.getpid(), signal.SIGINT)


def busy(what: str = "container") -> docker.errors.APIError:
    """The engine's answer to a removal it cannot do yet (a container whose mount is still busy)."""
    return docker.errors.APIError(f"could not remove {what}: device or resource busy")


def _matches(labels: dict, filters: dict | None) -> bool:
    wanted = (filters or {}).get("label", [])
    pairs = [f.split("=", 1) for f in ([wanted] if isinstance(wanted, str) else wanted)]
    return all(labels.get(k) == v for k, v in pairs)


class Image:
    def __init__(self, fake: FakeEngine, image_id: str, labels: dict, layers: tuple[str, ...], files: dict,
                 created: str):
        self.fake, self.id, self.labels, self.layers, self.files = fake, image_id, labels, layers, files
        self.attrs = {"Created": created, "RootFS": {"Layers": list(layers)}}

    @property
    def tags(self) -> list[str]:
        return [name for name, i in self.fake.names.items() if i == self.id]

    def tag(self, repository: str, tag: str | None = None) -> bool:
        return self.fake.call("image.tag", f"{repository}:{tag}", lambda: self.fake.names.update({f"{repository}:{tag or 'latest'}": self.id}) or True)


class Images:
    def __init__(self, fake: FakeEngine):
        self.fake = fake

    def get(self, ref: str) -> Image:
        return self.fake.call("images.get", ref, lambda: self.fake.image(ref))

    def list(self, name: str | None = None, all: bool = False, filters: dict | None = None) -> list[Image]:  # noqa: A002 - the SDK's names
        return self.fake.call("images.list", "", lambda: [i for i in self.fake.by_id.values() if _matches(i.labels, filters)])

    def remove(self, image: str, force: bool = False, noprune: bool = False) -> None:
        self.fake.call("images.remove", image, lambda: self.fake.remove_image(image, force))

    def get_registry_data(self, ref: str) -> Image:
        return self.fake.call("images.get_registry_data", ref, lambda: self.fake.in_registry(ref))

    def pull(self, repository: str, tag: str | None = None) -> Image:
        return self.fake.call("images.pull", f"{repository}:{tag}", lambda: self.fake.pull(f"{repository}:{tag}"))

    def push(self, repository: str, tag: str | None = None, stream: bool = False, decode: bool = False) -> list[dict]:
        return self.fake.call("images.push", f"{repository}:{tag}", lambda: self.fake.push(f"{repository}:{tag}"))


class Api:
    """The low-level client's calls engine makes (cli.api)."""

    def __init__(self, fake: FakeEngine):
        self.fake = fake

    def inspect_image(self, ref: str) -> dict:
        def inspect():
            i = self.fake.image(ref)
            return {"Id": i.id, "RepoTags": i.tags, "Created": i.attrs["Created"], "Size": 1000 * len(i.layers),
                    "RootFS": {"Type": "layers", "Layers": list(i.layers)}, "Config": {"Labels": dict(i.labels)}}

        return self.fake.call("api.inspect_image", ref, inspect)

    def history(self, ref: str) -> list[dict]:
        return self.fake.call("api.history", ref, lambda: [{"Size": 1000, "CreatedBy": f"layer {layer}"}
                                                      for layer in reversed(self.fake.image(ref).layers)])


class Container:
    def __init__(self, fake: FakeEngine, image: Image, name: str, labels: dict, mounts: list):
        self.fake, self.image, self.name, self.labels, self.mounts = fake, image, name, labels, mounts
        self.status, self.removed, self.exit_code, self.output = "created", False, None, ""

    def host_path(self, inside: str) -> Path:
        """Where a bind mount puts a path of the container on the host (how a container writes a report out)."""
        mount = next(m for m in self.mounts if inside.startswith(m["Target"]))
        return Path(mount["Source"]) / inside.removeprefix(mount["Target"]).lstrip("/")

    def start(self) -> None:
        def started():
            program = next((p for prefix, p in self.fake.programs.items() if self.name.startswith(prefix)),
                           lambda c: (0, ""))
            self.status = "running"
            self.exit_code, self.output = program(self)
            self.status = "exited"

        self.fake.call("container.start", self.name, started)

    def wait(self, timeout: float | None = None) -> dict:
        return self.fake.call("container.wait", self.name, lambda: {"StatusCode": self.exit_code})

    def logs(self, stdout: bool = True, stderr: bool = True) -> bytes:
        return self.fake.call("container.logs", self.name, lambda: self.output.encode())

    def get_archive(self, path: str) -> tuple:
        def archive():
            if path not in self.image.files:
                raise docker.errors.NotFound(f"Could not find the file {path} in container {self.name}")
            out = io.BytesIO()
            with tarfile.open(fileobj=out, mode="w") as tar:
                info = tarfile.TarInfo(Path(path).name)
                info.size = len(self.image.files[path])
                tar.addfile(info, io.BytesIO(self.image.files[path]))
            return iter([out.getvalue()]), {"name": Path(path).name}

        return self.fake.call("container.get_archive", self.name, archive)

    def remove(self, force: bool = False, v: bool = False) -> None:
        def remove():
            if self.removed:
                raise docker.errors.NotFound(f"No such container: {self.name}")
            self.removed = True

        self.fake.call("container.remove", self.name, remove)


class Containers:
    def __init__(self, fake: FakeEngine):
        self.fake = fake

    def create(self, image: str, command=None, *, name: str | None = None, labels: dict | None = None,
               mounts: list | None = None, **kwargs) -> Container:
        def create():
            if name in {c.name for c in self.fake.live()}:
                raise docker.errors.APIError(f'Conflict. The container name "/{name}" is already in use')
            container = Container(self.fake, self.fake.image(image), name or f"random-{len(self.fake.created)}",
                                  dict(labels or {}), list(mounts or []))
            self.fake.created.append(container)
            return container

        return self.fake.call("containers.create", name or "", create)

    def get(self, name: str) -> Container:
        def get():
            found = [c for c in self.fake.live() if c.name == name]
            if not found:
                raise docker.errors.NotFound(f"No such container: {name}")
            return found[0]

        return self.fake.call("containers.get", name, get)

    def list(self, all: bool = False, filters: dict | None = None, ignore_removed: bool = False) -> list[Container]:  # noqa: A002 - the SDK's names
        return self.fake.call("containers.list", "", lambda: [c for c in self.fake.live() if _matches(c.labels, filters)
                                                          and (all or c.status == "running")])


class FakeEngine:
    """The client: images, api, containers; what the engine holds, and the faults a test places."""

    def __init__(self):
        self.by_id: dict[str, Image] = {}
        self.names: dict[str, str] = {}  # repository:tag -> image ID
        self.registry: dict[str, Image] = {}  # repository:tag -> the image a remote registry holds under it
        self.created: list[Container] = []  # every container ever created; live() are those not removed
        self.programs: dict[str, Program] = {}  # container-name prefix -> what such a container does when started
        self._faults: list[tuple[str, str, BaseException | Callable[[], None]]] = []  # (call, subject prefix, what), once each
        self.images, self.containers, self.api = Images(self), Containers(self), Api(self)
        self._ids = itertools.count()

    def add_image(self, layers: tuple[str, ...], labels: dict | None = None, name: str | None = None,
                  files: dict[str, bytes] | None = None) -> str:
        number = next(self._ids)
        image_id = f"sha256:{number:064x}"
        self.by_id[image_id] = Image(self, image_id, dict(labels or {}), tuple(layers), dict(files or {}),
                                     f"2026-12-01T{number:06d}")
        if name:
            self.names[name] = image_id
        return image_id

    def add_remote(self, layers: tuple[str, ...], labels: dict, name: str) -> str:
        """An image only the remote registry holds, under name (another node built and pushed it)."""
        image_id = self.add_image(layers, labels)
        self.registry[name] = self.by_id.pop(image_id)
        return image_id

    def image(self, ref: str) -> Image:
        image_id = self.names.get(ref, ref)
        if image_id not in self.by_id:
            raise docker.errors.ImageNotFound(f"No such image: {ref}")
        return self.by_id[image_id]

    def remove_image(self, ref: str, force: bool) -> None:
        image = self.image(ref)
        if ref in self.names:
            del self.names[ref]
        elif len(image.tags) > 1 and not force:
            raise docker.errors.APIError(f"conflict: unable to delete {ref} (must be forced) - image has several names")
        if ref == image.id or not image.tags:  # its last name gone: the image goes with it
            for name in image.tags:
                del self.names[name]
            del self.by_id[image.id]

    def in_registry(self, ref: str) -> Image:
        if ref not in self.registry:
            raise docker.errors.NotFound(f"manifest unknown: {ref}")
        return self.registry[ref]

    def pull(self, ref: str) -> Image:
        """The registry's image here under its ID (the containerd store's: its manifest digest), named ref."""
        image = self.in_registry(ref)
        self.by_id.setdefault(image.id, image)
        self.names[ref] = image.id
        return image

    def push(self, ref: str) -> list[dict]:
        """The registry holds ref's image; the stream's last record names its digest (the image ID here)."""
        self.registry[ref] = self.image(ref)
        return [{"status": "Pushed"}, {"aux": {"Tag": ref.rpartition(":")[2], "Digest": self.registry[ref].id}}]

    def tags(self, repository: str) -> list[str]:
        """Every name in one repository, sorted."""
        return sorted(n for n in self.names if n.rpartition(":")[0] == repository)

    def live(self) -> list[Container]:
        return [c for c in self.created if not c.removed]

    def refuse(self, call: str, error: BaseException, subject: str = "") -> None:
        """The engine answers `error` instead of doing the next `call` on a subject starting with `subject` (an
        image reference, a container's name). KeyboardInterrupt: Ctrl-C arrives while the call is under way."""
        self._faults.append((call, subject, error))

    def after(self, call: str, action: Callable[[], None], subject: str = "") -> None:
        """`action` runs once the engine has done the next `call` on such a subject, before the SDK returns."""
        self._faults.append((call, subject, action))

    def call(self, name: str, subject: str, work: Callable):
        fault = next((f for f in self._faults if f[0] == name and subject.startswith(f[1])), None)
        if fault is not None:
            self._faults.remove(fault)
            if isinstance(fault[2], BaseException):
                raise fault[2]
        result = work()
        if fault is not None:
            fault[2]()
        return result


class Builds:
    """buildx.build for one plan on a fake engine: a unit's build stacks one layer named for it on the image its
    target starts FROM (Plan.below; the base when none), with the labels the step passes, that image's files plus
    `files[unit]` (what the unit's Dockerfile writes), and its name. `built` lists the units built, in order."""

    def __init__(self, fake: FakeEngine, plan, files: dict[str, dict[str, bytes]] | None = None):
        self.fake, self.plan, self.files, self.built = fake, plan, files or {}, []

    def __call__(self, spec, options, *, labels=(), **kwargs) -> str:
        unit = next(u for u in self.plan.units if u.image == spec.image)
        below = self.plan.below(unit)
        under = self.fake.image(below.image) if below is not None else None
        self.built.append(unit.name)
        layers = (*(under.layers if under else ("base",)), f"{unit.name}-{len(self.built)}")
        files = {**(under.files if under else {}), **self.files.get(unit.name, {})}
        return self.fake.add_image(layers, dict(labels), unit.image, files)


def keyed(unit) -> dict[str, str]:
    """The labels an image of a unit is found by (cleanbuild.core.engine.find_by_key)."""
    return {engine.UNIT_LABEL: unit.name, engine.KEY_LABEL: unit.key}


def json_file(data: object) -> bytes:
    return json.dumps(data).encode()
