"""The SBOM (CycloneDX 1.6 JSON, written by cyclonedx-python-lib) and the provenance (an in-toto statement with
an SLSA v1 predicate) of a build, from what the build itself recorded: the wheels manifest (every wheel's name,
version, sha256 and component; `expected`: where each component came from; `sources`: aiter's and ATOM's full
commits), the base image and its digest, the pins and the lock digest. Pure: no engine, no clock.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from cyclonedx.model import (
    ExternalReference,
    ExternalReferenceType,
    HashAlgorithm,
    HashType,
    Property,
    XsUri,
)
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

from cleanbuild.core.refs import parse_image
from cleanbuild.images import attest

PYPI = "https://pypi.org/simple"
NS = "io.atom-build"
SBOM = "https://cyclonedx.org/bom"  # in-toto predicate types
PROVENANCE = "https://slsa.dev/provenance/v1"
BUILDER = "https://github.com/atom-build/atom-clean-build/cleanbuild@v1"


def origin(component: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """Where a component's wheels came from: {"kind": index|git|local, "url", "commit"?}."""
    ref = str((manifest.get("expected") or {}).get(component, ""))
    source = (manifest.get("sources") or {}).get(component) or {}
    if ref.startswith("git:"):
        repo, _, sha = ref.removeprefix("git:").rpartition("@")
        return {"kind": "git", "url": source.get("repo") or repo, "commit": source.get("sha") or sha}
    if ref.startswith("index:"):
        return {"kind": "index", "url": ref.removeprefix("index:").split()[0]}
    if ref.startswith("local:"):
        return {"kind": "local", "url": ref.removeprefix("local:").split()[0]}
    return {"kind": "index", "url": PYPI}  # pypi:NAME==VERSION, the lock's closure (lock/deps.txt), flydsl


def wheel_component(wheel: dict[str, Any], manifest: dict[str, Any]) -> Component:
    where = origin(wheel["component"], manifest)
    refs = [ExternalReference(type=ExternalReferenceType.VCS if where["kind"] == "git" else ExternalReferenceType.DISTRIBUTION,
                              url=XsUri(where["url"]))]
    props = [Property(name=f"{NS}:component", value=wheel["component"]), Property(name=f"{NS}:origin", value=where["kind"]),
             Property(name=f"{NS}:filename", value=wheel["filename"])]
    if where.get("commit"):
        props.append(Property(name=f"{NS}:commit", value=where["commit"]))
    return Component(type=ComponentType.LIBRARY, name=wheel["name"], version=wheel["version"],
                     bom_ref=f"wheel:{wheel['filename']}",
                     purl=PackageURL("pypi", name=wheel["name"].lower(), version=wheel["version"],
                                     qualifiers={"file_name": wheel["filename"]}),
                     hashes=[HashType(alg=HashAlgorithm.SHA_256, content=wheel["sha256"])],
                     external_references=refs, properties=props)


def cyclonedx(manifest: dict[str, Any], *, image: str, version: str | None, base: str, base_digest: str | None) -> dict[str, Any]:
    """Every wheel in the image and the base image, as a CycloneDX 1.6 document (deterministic for one manifest).
    image, version: the image's name and version (build-clean: the release name and the candidate's content key)."""
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"{image}@{version}"))
    # No timestamp, so one manifest gives one document; the library's setter is annotated datetime-only, but the
    # serializer omits a None timestamp.
    bom.metadata.timestamp = None  # type: ignore[assignment]
    bom.metadata.component = Component(type=ComponentType.CONTAINER, name=image, version=version or "unknown",
                                       bom_ref="image")
    base_name = parse_image(base)  # a pinned base is REPO:TAG@sha256:...; its name is the repository alone
    bom.components.add(Component(
        type=ComponentType.CONTAINER, name=base_name.repository,
        version=base_digest or base_name.digest or base_name.tag or "unknown", bom_ref="base-image",
        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=base_digest.split(":", 1)[1])] if base_digest else [],
        properties=[Property(name=f"{NS}:role", value="base image"), Property(name=f"{NS}:reference", value=base)]))
    parts = [wheel_component(wheel, manifest) for wheel in manifest.get("wheels", [])]
    for part in parts:
        bom.components.add(part)
    bom.register_dependency(bom.metadata.component, [*bom.components])
    document: dict[str, Any] = json.loads(JsonV1Dot6(bom).output_as_string())
    return document


def provenance_predicate(manifest: dict[str, Any], *, pins: dict[str, str], profile: str, base: str,
                         base_digest: str | None) -> dict[str, Any]:
    """SLSA provenance v1: the pins, the lock digest and the component keys the image was built from (external
    parameters), the base image and sources (resolved dependencies). No engine version and no time: the predicate is
    attached to the image (cleanbuild.images.attest), whose digest must stay a function of the pins."""
    deps = [{"uri": f"git+{s.get('repo')}", "digest": {"gitCommit": s.get("sha")}, "name": name}
            for name, s in sorted((manifest.get("sources") or {}).items()) if s]
    deps.append({"uri": base, "name": "base image", **({"digest": {"sha256": base_digest.split(":", 1)[1]}} if base_digest else {})})
    return {
        "buildDefinition": {
            "buildType": "https://github.com/atom-build/atom-clean-build/build-clean@v1",
            "externalParameters": {"profile": profile, "arch": manifest.get("arch"), "ck_mode": manifest.get("ck_mode"),
                                   "pins": pins, "lock_sha256": manifest.get("lock_sha256")},
            "internalParameters": {"component_keys": manifest.get("component_keys") or {}},
            "resolvedDependencies": deps,
        },
        "runDetails": {"builder": {"id": BUILDER}},
    }


def provenance(manifest: dict[str, Any], *, image: str, image_id: str | None, pins: dict[str, str], profile: str,
               base: str, base_digest: str | None) -> dict[str, Any]:
    """An in-toto statement v1 of provenance_predicate about the image (the report's provenance.json)."""
    return {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": image, "digest": {"sha256": image_id.split(":", 1)[1]} if image_id else {}}],
        "predicateType": PROVENANCE,
        "predicate": provenance_predicate(manifest, pins=pins, profile=profile, base=base, base_digest=base_digest),
    }


def statements(manifest: dict[str, Any], subject: str, *, name: str, version: str, pins: dict[str, str], profile: str,
               base: str, base_digest: str | None) -> list[dict[str, Any]]:
    """The SBOM and the provenance as in-toto statements about the image manifest subject (sha256:...): what
    cleanbuild.images.attest attaches to the image. A function of the build's inputs only."""
    bom = cyclonedx(manifest, image=name, version=version, base=base, base_digest=base_digest)
    prov = provenance_predicate(manifest, pins=pins, profile=profile, base=base, base_digest=base_digest)
    return [attest.statement(name, subject, SBOM, bom), attest.statement(name, subject, PROVENANCE, prov)]
