"""Attestations attached to an image the way BuildKit attaches its own (docs.docker.com, "Attestation storage"):
the image manifest a reproducible build exported is wrapped in an image index of two manifests, the image's and an
attestation manifest (platform unknown/unknown, annotated with the image manifest's digest) whose layers are
in-toto statements, one per predicate (here the CycloneDX SBOM and the SLSA provenance of cleanbuild.images.sbom).

The statements are a function of the build's inputs, so the index digest is as reproducible as the image's: the
containerd image store names the loaded image by it, `docker push` sends it as it is, and registries and
`docker buildx imagetools inspect` show the attestations next to the image. cleanbuild.images.imagestore gives the
new index and blobs to `docker load`; the image's own are in the store already.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from cleanbuild.core.run import run

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
IN_TOTO = "application/vnd.in-toto+json"
PREDICATE_TYPE = "in-toto.io/predicate-type"
REFERENCE_DIGEST = "vnd.docker.reference.digest"
REFERENCE_TYPE = "vnd.docker.reference.type"
ATTESTATION_MANIFEST = "attestation-manifest"
UNKNOWN = {"architecture": "unknown", "os": "unknown"}


def canonical(doc: dict[str, Any]) -> bytes:
    """One byte string per document: sorted keys, no whitespace."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def descriptor(media_type: str, data: bytes, **extra: Any) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": f"sha256:{hashlib.sha256(data).hexdigest()}", "size": len(data), **extra}


def statement(subject_name: str, subject_digest: str, predicate_type: str, predicate: dict[str, Any]) -> dict[str, Any]:
    """An in-toto statement about the image manifest subject_digest (sha256:...)."""
    return {"_type": "https://in-toto.io/Statement/v0.1", "predicateType": predicate_type,
            "subject": [{"name": subject_name, "digest": {"sha256": subject_digest.split(":", 1)[1]}}],
            "predicate": predicate}


def wrap(image: dict[str, Any], platform: dict[str, Any], statements: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The image index holding the image descriptor and an attestation manifest of the statements, and every new
    blob by digest (the index itself included). image: the image manifest's descriptor from the archive's index."""
    blobs: dict[str, bytes] = {}

    def add(media_type: str, doc: dict[str, Any] | bytes, **extra: Any) -> dict[str, Any]:
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


def attestations(index: dict[str, Any], blob: Callable[[str], bytes]) -> dict[str, dict[str, Any]]:
    """predicate type -> statement, from an image index and a reader of blobs by digest (a registry, a folder)."""
    found: dict[str, dict[str, Any]] = {}
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


def _raw(ref: str) -> dict[str, Any] | None:
    done = run(["docker", "buildx", "imagetools", "inspect", "--raw", ref], check=False, capture=True, timeout=60,
               echo=False)
    try:
        return json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        return None
