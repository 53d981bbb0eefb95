"""Attestations attached to an image the way BuildKit attaches its own (docs.docker.com, "Attestation storage"):
the single-image OCI archive a reproducible build wrote becomes an image index of two manifests, the image's and an
attestation manifest (platform unknown/unknown, annotated with the image manifest's digest) whose layers are
in-toto statements, one per predicate (here the CycloneDX SBOM and the SLSA provenance of cleanbuild.build.sbom).

The statements are a function of the build's inputs, so the index digest is as reproducible as the image's: the
containerd image store names the loaded image by it, `docker push` sends it as it is, and registries and
`docker buildx imagetools inspect` show the attestations next to the image. The archive is streamed into
`docker load` with the new index and blobs in place of the old index.json: nothing of its gigabytes is copied.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from ..errors import BuildFailed

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
IN_TOTO = "application/vnd.in-toto+json"
PREDICATE_TYPE = "in-toto.io/predicate-type"
REFERENCE_DIGEST = "vnd.docker.reference.digest"
REFERENCE_TYPE = "vnd.docker.reference.type"
ATTESTATION_MANIFEST = "attestation-manifest"
UNKNOWN = {"architecture": "unknown", "os": "unknown"}


def canonical(doc: dict) -> bytes:
    """One byte string per document: sorted keys, no whitespace."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def descriptor(media_type: str, data: bytes, **extra) -> dict:
    return {"mediaType": media_type, "digest": f"sha256:{hashlib.sha256(data).hexdigest()}", "size": len(data), **extra}


def statement(subject_name: str, subject_digest: str, predicate_type: str, predicate: dict) -> dict:
    """An in-toto statement about the image manifest subject_digest (sha256:...)."""
    return {"_type": "https://in-toto.io/Statement/v0.1", "predicateType": predicate_type,
            "subject": [{"name": subject_name, "digest": {"sha256": subject_digest.split(":", 1)[1]}}],
            "predicate": predicate}


def wrap(image: dict, platform: dict, statements: Iterable[dict]) -> tuple[dict, dict[str, bytes]]:
    """The image index holding the image descriptor and an attestation manifest of the statements, and every new
    blob by digest (the index itself included). image: the image manifest's descriptor from the archive's index."""
    blobs: dict[str, bytes] = {}

    def add(media_type: str, doc: dict | bytes, **extra) -> dict:
        data = doc if isinstance(doc, bytes) else canonical(doc)
        desc = descriptor(media_type, data, **extra)
        blobs[desc["digest"]] = data
        return desc

    layers = [add(IN_TOTO, canonical(s), annotations={PREDICATE_TYPE: s["predicateType"]}) for s in statements]
    config = add(CONFIG, {**UNKNOWN, "config": {}, "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in layers]}})
    attestation = add(MANIFEST, {"schemaVersion": 2, "mediaType": MANIFEST, "config": config, "layers": layers},
                      annotations={REFERENCE_DIGEST: image["digest"], REFERENCE_TYPE: ATTESTATION_MANIFEST},
                      platform=UNKNOWN)
    bare = {k: v for k, v in image.items() if k != "annotations"}
    index = add(INDEX, {"schemaVersion": 2, "mediaType": INDEX, "manifests": [{**bare, "platform": platform}, attestation]},
                **({"annotations": image["annotations"]} if image.get("annotations") else {}))
    return index, blobs


def read_archive(archive: Path) -> tuple[dict, dict]:
    """The one image descriptor of a single-image OCI archive's index.json, and its platform (from its config)."""
    with tarfile.open(archive) as tar:
        image = _image(tar, archive.name)
        manifest = _json(tar, _blob(image["digest"]))
        config = _json(tar, _blob(manifest["config"]["digest"]))
    platform = {k: config[k] for k in ("architecture", "os", "variant") if config.get(k)}
    return image, platform


def image_descriptor(archive: Path) -> dict:
    """The one image descriptor of a single-image OCI archive's index.json (its digest: the image's)."""
    with tarfile.open(archive) as tar:
        return _image(tar, archive.name)


def _image(tar: tarfile.TarFile, name: str) -> dict:
    manifests = _json(tar, "index.json").get("manifests") or []
    if len(manifests) != 1 or manifests[0].get("mediaType") != MANIFEST:
        raise BuildFailed(f"{name} holds {len(manifests)} entries, not one image manifest.")
    return manifests[0]


def load(archive: Path, statements_for: Callable[[str], list[dict]], log: Path) -> str:
    """docker load the archive with statements_for(image manifest digest) attached; returns the index digest."""
    with log.open("wb") as out:
        proc = subprocess.Popen(["docker", "load"], stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603,S607
        digest = ""
        try:
            assert proc.stdin is not None
            with proc.stdin:
                digest = write(archive, statements_for, proc.stdin)
        except BrokenPipeError:
            pass  # docker load stopped reading: its exit code and log say why
        finally:
            code = proc.wait()
    if code != 0 or not digest:
        raise BuildFailed(f"docker load of {archive.name} with its attestations failed (exit {code}); log {log}")
    return digest


def write(archive: Path, statements_for: Callable[[str], list[dict]], out: IO[bytes]) -> str:
    """The archive as a tar stream into out, with statements_for(image manifest digest) attached: every member but
    index.json as it is, then the new blobs and index.json. Returns the new image index's digest."""
    image, platform = read_archive(archive)
    index, blobs = wrap(image, platform, statements_for(image["digest"]))
    with tarfile.open(fileobj=out, mode="w|") as dest:
        _copy(archive, dest)
        for digest, data in sorted(blobs.items()):
            _add(dest, _blob(digest), data)
        _add(dest, "index.json", canonical({"schemaVersion": 2, "mediaType": INDEX, "manifests": [index]}))
    return index["digest"]


def _copy(archive: Path, dest: tarfile.TarFile) -> None:
    with tarfile.open(archive, mode="r|") as src:
        for member in src:
            if member.name == "index.json":
                continue
            dest.addfile(member, src.extractfile(member) if member.isfile() else None)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _blob(digest: str) -> str:
    algorithm, _, hexdigest = digest.partition(":")
    return f"blobs/{algorithm}/{hexdigest}"


def _json(tar: tarfile.TarFile, name: str) -> dict:
    member = tar.extractfile(name)
    if member is None:
        raise BuildFailed(f"the OCI archive has no {name}.")
    return json.loads(member.read())


def attestations(index: dict, blob) -> dict[str, dict]:
    """predicate type -> statement, from an image index and a reader of blobs by digest (a registry, a folder)."""
    found: dict[str, dict] = {}
    for desc in index.get("manifests") or []:
        if (desc.get("annotations") or {}).get(REFERENCE_TYPE) != ATTESTATION_MANIFEST:
            continue
        for layer in json.loads(blob(desc["digest"])).get("layers") or []:
            doc = json.loads(blob(layer["digest"]))
            found[doc.get("predicateType", "")] = doc
    return found


def in_registry(ref: str) -> list[str] | None:
    """The predicate types of the attestations a pushed image carries (ref: REPO@sha256:..., one of its
    RepoDigests), read with `docker buildx imagetools inspect --raw`: [] for none, None when the registry does not
    answer."""
    index = _raw(ref)
    if index is None:
        return None
    repo = ref.split("@", 1)[0]
    types: list[str] = []
    for desc in index.get("manifests") or []:
        if (desc.get("annotations") or {}).get(REFERENCE_TYPE) == ATTESTATION_MANIFEST:
            manifest = _raw(f"{repo}@{desc['digest']}") or {}
            types += [(layer.get("annotations") or {}).get(PREDICATE_TYPE, "") for layer in manifest.get("layers") or []]
    return sorted(types)


def _raw(ref: str) -> dict | None:
    done = subprocess.run(["docker", "buildx", "imagetools", "inspect", "--raw", ref],  # noqa: S603,S607
                          capture_output=True, text=True, timeout=60, check=False)
    try:
        return json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        return None
