"""The image a reproducible build exports straight into the engine's containerd image store, and the attestations
`docker load` attaches to it.

BuildKit's image exporter (`--output type=image,oci-mediatypes=true,compression=zstd`, cleanbuild.images.buildx_argv)
writes the new layers, the config and the manifest into the content store the engine's own BuildKit shares with
the image store, names the image and unpacks it from the snapshots the build already made: each new layer is
compressed once, and nothing is written to a folder or loaded again. buildx's metadata file gives the manifest's
descriptor; its digest is the image ID.

Attestations (cleanbuild.images.attest): `docker load` is given the image index that holds the image manifest and
an attestation manifest, and the attestation's own blobs, never the image's (the store holds those already, and the
load finds them there). The name then points at the index, whose digest becomes the image ID.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cleanbuild.core.errors import BuildFailed
from cleanbuild.core.run import run_feeding
from cleanbuild.images import attest

OCI_LAYOUT = b'{"imageLayoutVersion":"1.0.0"}'
NAME_ANNOTATIONS = ("io.containerd.image.name", "org.opencontainers.image.ref.name")
PLATFORM_KEYS = ("architecture", "os", "variant")

Statements = Callable[[str], list[dict[str, Any]]]  # image manifest digest -> in-toto statements about it


@dataclass(frozen=True)
class Export:
    """What one build exported: its image manifest's descriptor (without the platform) and the image's full name
    (docker.io/...), and the platform the exporter reported."""

    image: dict[str, Any]
    name: str
    platform: dict[str, str]


def exported(metadata: Path) -> Export:
    """The build's Export, from buildx's metadata file (containerimage.descriptor, image.name)."""
    try:
        meta = json.loads(metadata.read_text())
        image, name = dict(meta["containerimage.descriptor"]), meta["image.name"].split(",")[0]
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as exc:
        raise BuildFailed(f"buildx wrote no image descriptor to {metadata} ({exc}). To fix, use buildx >= 0.10.") from exc
    if image.get("mediaType") != attest.MANIFEST:
        raise BuildFailed(f"the build exported a {image.get('mediaType')}, not one OCI image manifest.")
    platform = image.pop("platform", None) or {}
    if not (platform.get("os") and platform.get("architecture")):
        raise BuildFailed(f"buildx wrote no platform for {name} to {metadata}. To fix, use buildx >= 0.10.")
    return Export(image, name, {k: platform[k] for k in PLATFORM_KEYS if platform.get(k)})


def attach(exp: Export, statements_for: Statements, log: Path) -> str:
    """docker load the index of the image and statements_for(its manifest digest) under the image's name; returns
    the index digest (the image ID now)."""
    code, digest = run_feeding(["docker", "load"], log, lambda stdin: write(exp, statements_for, stdin))
    if code != 0 or not digest:
        raise BuildFailed(f"docker load of the attestations of {exp.name} failed (exit {code}); log {log}")
    return digest


def write(exp: Export, statements_for: Statements, out: IO[bytes]) -> str:
    """The tar docker load reads, into out: oci-layout, the new blobs, index.json. Returns the index digest."""
    top, extra = attest.wrap(exp.image, exp.platform, statements_for(exp.image["digest"]))
    entry = {**{k: v for k, v in top.items() if k != "annotations"},
             "annotations": {**(top.get("annotations") or {}), **dict.fromkeys(NAME_ANNOTATIONS, exp.name)}}
    with tarfile.open(fileobj=out, mode="w|") as tar:
        _add(tar, "oci-layout", OCI_LAYOUT)
        for digest, data in sorted(extra.items()):
            _add(tar, "blobs/" + digest.replace(":", "/", 1), data)
        _add(tar, "index.json", attest.canonical({"schemaVersion": 2, "mediaType": attest.INDEX, "manifests": [entry]}))
    return str(top["digest"])


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))
