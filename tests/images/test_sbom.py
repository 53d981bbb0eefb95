"""cleanbuild.images.sbom on the manifest the wheels stage writes (collect_wheels on tiny wheels, as its own tests make
them): every wheel with version, sha256 and origin; aiter and ATOM with their full commits; the base image."""

from __future__ import annotations

import json

from cleanbuild.images import sbom
from tests.support.collect_stage import collect
from tests.support.upstream import AITER_PIN, ATOM_PIN

BASE = "atom-build/standin-base:24ea9762e151"
DIGEST = "sha256:" + "cd" * 32


def manifest_of(stage) -> dict:  # noqa: F811
    errors, out = collect(stage)
    assert errors == []
    return json.loads((out / "manifest.json").read_text())


def components(doc: dict) -> dict[str, dict]:
    return {c["name"]: c for c in doc["components"]}


def props(component: dict) -> dict[str, str]:
    return {p["name"]: p["value"] for p in component.get("properties", [])}


def test_every_wheel_is_a_component_with_version_sha256_and_origin(stage):  # noqa: F811
    manifest = manifest_of(stage)
    doc = sbom.cyclonedx(manifest, image="atom-build/candidate:x", version="sha256:" + "e" * 64, base=BASE,
                         base_digest=DIGEST)
    found = components(doc)
    assert {w["name"] for w in manifest["wheels"]} <= set(found)
    numpy = found["numpy"]
    assert (numpy["version"], numpy["hashes"][0]["content"], numpy["externalReferences"][0]["url"]) == (
        "2.3.4", next(w["sha256"] for w in manifest["wheels"] if w["name"] == "numpy"), sbom.PYPI)


def test_aiter_and_atom_name_their_repository_and_full_commit(stage):  # noqa: F811
    found = components(sbom.cyclonedx(manifest_of(stage), image="i", version=None, base=BASE, base_digest=None))
    assert [(props(found[n])["io.atom-build:commit"], found[n]["externalReferences"][0]["type"])
            for n in ("amd-aiter", "atom")] == [(AITER_PIN, "vcs"), (ATOM_PIN, "vcs")]


def test_the_base_image_is_a_component_with_its_digest(stage):  # noqa: F811
    found = components(sbom.cyclonedx(manifest_of(stage), image="i", version=None, base=BASE, base_digest=DIGEST))
    assert (found["atom-build/standin-base"]["version"], found["atom-build/standin-base"]["hashes"][0]["content"]) == (
        DIGEST, "cd" * 32)


def test_a_base_pinned_by_digest_is_named_by_its_repository(stage):  # noqa: F811
    pinned = f"rocm/dev-ubuntu-24.04:7.2-complete@{DIGEST}"  # what Profile.pinned gives plan.base_image
    found = components(sbom.cyclonedx(manifest_of(stage), image="i", version=None, base=pinned, base_digest=None))
    assert found["rocm/dev-ubuntu-24.04"]["version"] == DIGEST


def test_the_same_manifest_gives_the_same_document(stage):  # noqa: F811
    manifest = manifest_of(stage)
    args = {"image": "i", "version": "sha256:" + "e" * 64, "base": BASE, "base_digest": DIGEST}
    assert sbom.cyclonedx(manifest, **args) == sbom.cyclonedx(manifest, **args)


def test_provenance_names_the_pins_and_the_lock_digest(stage):  # noqa: F811
    manifest = manifest_of(stage)
    doc = sbom.provenance(manifest, image="i", image_id="sha256:" + "e" * 64, pins={"aiter": f"repo@{AITER_PIN}"},
                          profile="offline", base=BASE, base_digest=DIGEST)
    params = doc["predicate"]["buildDefinition"]["externalParameters"]
    assert (doc["predicateType"], params["pins"]["aiter"], params["lock_sha256"]) == (
        "https://slsa.dev/provenance/v1", f"repo@{AITER_PIN}", manifest["lock_sha256"])


def test_audit_finds_the_sbom_and_provenance_of_the_image_in_its_report_folder(tmp_path):
    from cleanbuild.commands.audit_report import supply_chain_finding

    folder = tmp_path / "atom-gfx950-ckfree" / "run1"
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps({"image_id": "sha256:" + "e" * 64}))
    for name in ("sbom.cdx.json", "provenance.json"):
        (folder / name).write_text("{}")
    assert [supply_chain_finding(i, tmp_path)["status"] for i in ("sha256:" + "e" * 64, "sha256:" + "f" * 64)] == [
        "ok", "unknown"]


def test_the_attached_sbom_is_the_reports_and_both_statements_name_the_image_manifest(stage):  # noqa: F811
    manifest, subject = manifest_of(stage), "sha256:" + "a" * 64
    args = {"base": BASE, "base_digest": DIGEST, "pins": {"aiter": f"repo@{AITER_PIN}"}, "profile": "offline"}
    bom, prov = sbom.statements(manifest, subject, name="atom-gfx950-ckfree", version="key", **args)
    assert bom["predicate"] == sbom.cyclonedx(manifest, image="atom-gfx950-ckfree", version="key", base=BASE,
                                              base_digest=DIGEST)
    assert prov["predicate"] == sbom.provenance(manifest, image="other", image_id=None, **args)["predicate"]
    assert [(s["predicateType"], s["subject"][0]["digest"]["sha256"]) for s in (bom, prov)] == [
        (sbom.SBOM, "a" * 64), (sbom.PROVENANCE, "a" * 64)]


def test_audit_says_whether_the_sbom_is_attached_from_the_registry_or_the_report(tmp_path):
    from cleanbuild.commands.audit_report import supply_chain_finding

    image_id, ref = "sha256:" + "e" * 64, "127.0.0.1:5000/atom-gfx950-ckfree@sha256:" + "e" * 64
    folder = tmp_path / "atom-gfx950-ckfree" / "run1"
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps({"image_id": image_id, "attestations": [sbom.SBOM, sbom.PROVENANCE]}))
    for name in ("sbom.cdx.json", "provenance.json"):
        (folder / name).write_text("{}")
    pushed = supply_chain_finding(image_id, tmp_path / "none", (ref, [sbom.PROVENANCE, sbom.SBOM]))
    half = supply_chain_finding("sha256:" + "f" * 64, tmp_path, (ref, [sbom.PROVENANCE]))
    reported = supply_chain_finding(image_id, tmp_path, (ref, []))
    assert [(f["status"], f["evidence"][-1]) for f in (pushed, half)] == [
        ("ok", f"{ref} carries attestations {sbom.PROVENANCE}, {sbom.SBOM}"),
        ("unknown", f"no build report under {tmp_path} names sha256:ffffffffffff with sbom.cdx.json and provenance.json")]
    assert half["evidence"][0] == f"{ref} carries {sbom.PROVENANCE}"
    assert (reported["status"], reported["evidence"][-1]) == ("ok", f"attached to the image: {sbom.SBOM}, {sbom.PROVENANCE}")
