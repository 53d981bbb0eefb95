"""cleanbuild.build.attest on a small OCI archive written here the way BuildKit's oci exporter lays one out
(index.json naming one image manifest, blobs/sha256/*): the rewritten stream is a valid OCI layout whose index
holds the image and an attestation manifest of the statements, byte-identical for the same inputs."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile

import pytest

from cleanbuild.build import attest
from cleanbuild.errors import BuildFailed

NAME = "127.0.0.1:5000/atom-gfx950-ckfree:candidate"


def _blob(files: dict[str, bytes], data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    files[f"blobs/sha256/{digest}"] = data
    return f"sha256:{digest}"


def _layer() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"hi\n"))
    return gzip.compress(raw.getvalue(), mtime=0)


def make_archive(path, manifests: int = 1) -> str:
    """A single-image OCI archive; returns its image manifest digest."""
    files: dict[str, bytes] = {"oci-layout": b'{"imageLayoutVersion":"1.0.0"}'}
    layer = _layer()
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": attest.MANIFEST,
                           "config": {"mediaType": attest.CONFIG, "digest": _blob(files, config), "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                       "digest": _blob(files, layer), "size": len(layer)}]}).encode()
    desc = {"mediaType": attest.MANIFEST, "digest": _blob(files, manifest), "size": len(manifest),
            "annotations": {"io.containerd.image.name": NAME, "org.opencontainers.image.ref.name": "candidate"}}
    files["index.json"] = json.dumps({"schemaVersion": 2, "manifests": [desc] * manifests}).encode()
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return desc["digest"]


def statements(subject: str, version: str = "key1") -> list[dict]:
    return [attest.statement("atom-gfx950-ckfree", subject, "https://cyclonedx.org/bom", {"version": version}),
            attest.statement("atom-gfx950-ckfree", subject, "https://slsa.dev/provenance/v1", {"pins": {}})]


def rewrite(archive, version: str = "key1") -> tuple[str, dict[str, bytes]]:
    out = io.BytesIO()
    digest = attest.write(archive, lambda subject: statements(subject, version), out)
    with tarfile.open(fileobj=io.BytesIO(out.getvalue())) as tar:
        return digest, {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def test_the_index_holds_the_image_and_an_attestation_of_each_statement(tmp_path):
    image = make_archive(tmp_path / "a.tar")
    digest, files = rewrite(tmp_path / "a.tar")
    top = json.loads(files["index.json"])["manifests"]
    assert [(d["mediaType"], d["digest"], d["annotations"]["io.containerd.image.name"]) for d in top] == [
        (attest.INDEX, digest, NAME)]
    index = json.loads(files[f"blobs/sha256/{digest.split(':')[1]}"])
    assert [(d["digest"], d["platform"]) for d in index["manifests"]][0] == (image, {"architecture": "amd64", "os": "linux"})
    assert index["manifests"][1]["annotations"] == {attest.REFERENCE_DIGEST: image, attest.REFERENCE_TYPE: "attestation-manifest"}
    found = attest.attestations(index, lambda d: files[f"blobs/sha256/{d.split(':')[1]}"])
    assert {t: s["subject"][0]["digest"]["sha256"] for t, s in found.items()} == {
        "https://cyclonedx.org/bom": image.split(":")[1], "https://slsa.dev/provenance/v1": image.split(":")[1]}


def test_every_blob_is_named_by_its_sha256_and_the_image_blobs_are_kept(tmp_path):
    make_archive(tmp_path / "a.tar")
    with tarfile.open(tmp_path / "a.tar") as tar:
        before = {m.name for m in tar if m.name.startswith("blobs/")}
    _, files = rewrite(tmp_path / "a.tar")
    blobs = {name: data for name, data in files.items() if name.startswith("blobs/")}
    assert before < set(blobs) and len(blobs) == len(before) + 5  # 2 statements, their config, manifest, index
    assert all(name.rsplit("/", 1)[1] == hashlib.sha256(data).hexdigest() for name, data in blobs.items())


def test_the_same_inputs_give_the_same_digest_and_another_statement_another(tmp_path):
    make_archive(tmp_path / "a.tar")
    assert rewrite(tmp_path / "a.tar")[0] == rewrite(tmp_path / "a.tar")[0] != rewrite(tmp_path / "a.tar", "key2")[0]


def test_an_archive_of_two_images_is_refused(tmp_path):
    make_archive(tmp_path / "a.tar", manifests=2)
    with pytest.raises(BuildFailed, match="not one image manifest"):
        attest.write(tmp_path / "a.tar", statements, io.BytesIO())
