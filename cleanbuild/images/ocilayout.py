"""The OCI layout every reproducible build exports into, and the part of it `docker load` is given.

BuildKit's oci exporter with `tar=false` writes into a folder that outlives the build (the cache dir's `oci/`):
a blob already there is not sent again, so a build sends only its own new layers, not the whole stack below
them. An archive (`tar=true`) held every layer of the stack each time: measured on a cold gfx950 CK-free build,
its "sending tarball" took about 30 s for each of atom-layer, clean, candidate, venv and wheels (README "Engines").

`docker load` is then given a tar of the image's manifest, config and the layers this build wrote (the blobs that
were not in the layout before it), plus the attestations (cleanbuild.images.attest): the layers below come from
the image the build started FROM, which the engine holds. When the engine lacks one (it removed an image whose
layer a cache hit now reuses), its load fails ("content digest ... not found") without leaving a usable image;
the broken name is removed and the image is loaded again with every layer.

Blobs untouched for PRUNE_DAYS are removed before a build; one that is needed again is simply written again.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import subprocess
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import BuildFailed
from . import attest

PRUNE_DAYS = 14
OCI_LAYOUT = b'{"imageLayoutVersion":"1.0.0"}'
NAME_ANNOTATIONS = ("io.containerd.image.name", "org.opencontainers.image.ref.name")

Statements = Callable[[str], list[dict[str, Any]]]  # image manifest digest -> in-toto statements about it


@dataclass(frozen=True)
class Export:
    """What one build exported: the layout, its image manifest's descriptor, the image's full name (docker.io/...)
    and the blobs (sha256:...) this export added to the layout."""

    layout: Path
    image: dict[str, Any]
    name: str
    new: frozenset[str]


def folder(cache_dir: Path) -> Path:
    return cache_dir / "oci"


def blobs(layout: Path) -> set[str]:
    """The digests of the blobs the layout holds."""
    root = layout / "blobs"
    if not root.is_dir():
        return set()
    return {f"{algorithm.name}:{blob.name}" for algorithm in root.iterdir() if algorithm.is_dir()
            for blob in algorithm.iterdir()}


def prune(layout: Path, days: int = PRUNE_DAYS, now: float | None = None) -> int:
    """Remove the blobs not written for `days`; returns the bytes freed."""
    cutoff = (time.time() if now is None else now) - days * 86400
    freed = 0
    for digest in blobs(layout):
        path = layout / _path(digest)
        with contextlib.suppress(FileNotFoundError):
            info = path.stat()
            if info.st_mtime < cutoff:
                path.unlink()
                freed += info.st_size
    return freed


def exported(layout: Path, metadata: Path, before: set[str]) -> Export:
    """The build's Export, from buildx's metadata file (containerimage.descriptor, image.name)."""
    try:
        meta = json.loads(metadata.read_text())
        image, name = meta["containerimage.descriptor"], meta["image.name"].split(",")[0]
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        raise BuildFailed(f"buildx wrote no image descriptor to {metadata} ({exc}). To fix, use buildx >= 0.10.") from exc
    if image.get("mediaType") != attest.MANIFEST:
        raise BuildFailed(f"the build exported a {image.get('mediaType')}, not one image manifest.")
    return Export(layout, image, name, frozenset(blobs(layout) - before))


def load(exp: Export, statements_for: Statements | None, log: Path) -> str:
    """docker load the image (with statements_for(its manifest digest) attached, when given); returns the loaded
    ID: the manifest digest, or with attestations the image index's. New layers first, every layer if that fails."""
    for everything in (False, True):
        code, digest = _docker_load(log, functools.partial(_write_all if everything else write, exp, statements_for),
                                    append=everything)
        if code == 0 and digest:
            return digest
        subprocess.run(["docker", "image", "rm", exp.name], capture_output=True, check=False)  # noqa: S603,S607
    raise BuildFailed(f"docker load of {exp.name} failed (exit {code}), with every layer of it given; log {log}")


def write(exp: Export, statements_for: Statements | None, out: IO[bytes], *, everything: bool = False) -> str:
    """The tar docker load reads, into out: oci-layout, the blobs, index.json. Returns the image's ID."""
    manifest = _json(exp.layout, exp.image["digest"])
    config = _json(exp.layout, manifest["config"]["digest"])
    layers = [d["digest"] for d in manifest.get("layers") or []]
    ship = [exp.image["digest"], manifest["config"]["digest"], *(d for d in layers if everything or d in exp.new)]
    top, extra = exp.image, dict[str, bytes]()
    if statements_for is not None:
        platform = {k: config[k] for k in ("architecture", "os", "variant") if config.get(k)}
        top, extra = attest.wrap(exp.image, platform, statements_for(exp.image["digest"]))
    entry = {**{k: v for k, v in top.items() if k != "annotations"},
             "annotations": {**(top.get("annotations") or {}), **dict.fromkeys(NAME_ANNOTATIONS, exp.name)}}
    with tarfile.open(fileobj=out, mode="w|") as tar:
        _add(tar, "oci-layout", OCI_LAYOUT)
        for digest in dict.fromkeys(ship):
            tar.add(str(_file(exp.layout, digest)), arcname=_path(digest), recursive=False)
        for digest, data in sorted(extra.items()):
            _add(tar, _path(digest), data)
        _add(tar, "index.json", attest.canonical({"schemaVersion": 2, "mediaType": attest.INDEX, "manifests": [entry]}))
    return str(top["digest"])


def _write_all(exp: Export, statements_for: Statements | None, out: IO[bytes]) -> str:
    return write(exp, statements_for, out, everything=True)


def _docker_load(log: Path, writer: Callable[[IO[bytes]], str], append: bool) -> tuple[int, str]:
    """(exit code, what writer returned) of a `docker load` reading what writer writes; its output goes to log."""
    with log.open("ab" if append else "wb") as sink:
        proc = subprocess.Popen(["docker", "load"], stdin=subprocess.PIPE, stdout=sink, stderr=subprocess.STDOUT)  # noqa: S603,S607
        result = ""
        try:
            assert proc.stdin is not None
            with proc.stdin:
                result = writer(proc.stdin)
        except BrokenPipeError:
            pass  # docker load stopped reading: its exit code and log say why
        finally:
            code = proc.wait()
    return code, result


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _path(digest: str) -> str:
    algorithm, _, hexdigest = digest.partition(":")
    return f"blobs/{algorithm}/{hexdigest}"


def _file(layout: Path, digest: str) -> Path:
    path = layout / _path(digest)
    if not path.is_file():
        raise BuildFailed(f"the OCI layout {layout} lacks {digest}. To fix, build again: the export writes it.")
    return path


def _json(layout: Path, digest: str) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(_file(layout, digest).read_bytes())
        return doc
    except (OSError, ValueError) as exc:
        raise BuildFailed(f"the OCI layout {layout} cannot read {digest} ({exc}).") from exc
