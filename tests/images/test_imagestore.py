"""cleanbuild.images.imagestore and cleanbuild.images.attest: what buildx's metadata file says the image exporter
stored, and what `docker load` is given to attach the attestations (the index and the attestation's own blobs,
byte-identical for the same inputs, never the image's). `docker` is a script here that loads like the containerd
store: it fails when a manifest, config or layer the index reaches is neither in the tar nor in the store already.
That a real engine takes the same tar is tests/integration (the candidate's SBOM and its digest)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile

import pytest

from cleanbuild.core.errors import BuildFailed
from cleanbuild.images import attest, imagestore
from tests.support.tools import python_tool

NAME = "127.0.0.1:5000/atom-gfx950-ckfree:candidate"


def _layer(text: bytes) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    return gzip.compress(raw.getvalue(), mtime=0)


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def stored(tmp_path) -> tuple[imagestore.Export, dict[str, bytes]]:
    """A two-layer image as the image exporter leaves it: its blobs (digest -> bytes, what the store holds) and the
    Export read back from a metadata file as buildx writes it."""
    layers = [_layer(b"below\n"), _layer(b"mine\n")]
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": attest.MANIFEST,
                           "config": {"mediaType": attest.CONFIG, "digest": _digest(config), "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": _digest(d),
                                       "size": len(d)} for d in layers]}).encode()
    desc = {"mediaType": attest.MANIFEST, "digest": _digest(manifest), "size": len(manifest),
            "annotations": {"org.opencontainers.image.created": "1980-01-01T00:00:00Z"},
            "platform": {"architecture": "amd64", "os": "linux"}}
    metadata = tmp_path / "metadata.json"
    metadata.write_text(json.dumps({"containerimage.descriptor": desc, "containerimage.digest": desc["digest"],
                                    "image.name": NAME}))
    return imagestore.exported(metadata), {_digest(b): b for b in (*layers, config, manifest)}


def statements(subject: str, version: str = "key1") -> list[dict]:
    return [attest.statement("atom-gfx950-ckfree", subject, "https://cyclonedx.org/bom", {"version": version}),
            attest.statement("atom-gfx950-ckfree", subject, "https://slsa.dev/provenance/v1", {"pins": {}})]


def written(exp, version: str = "key1") -> tuple[str, dict[str, bytes]]:
    out = io.BytesIO()
    digest = imagestore.write(exp, lambda subject: statements(subject, version), out)
    with tarfile.open(fileobj=io.BytesIO(out.getvalue())) as tar:
        return digest, {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def test_the_export_is_the_manifest_descriptor_its_name_and_its_platform(tmp_path):
    exp, blobs = stored(tmp_path)
    assert exp.name == NAME and exp.platform == {"architecture": "amd64", "os": "linux"}
    assert "platform" not in exp.image and exp.image["digest"] in blobs


def test_the_index_holds_the_image_and_an_attestation_of_each_statement(tmp_path):
    exp, _ = stored(tmp_path)
    digest, files = written(exp)
    top = json.loads(files["index.json"])["manifests"]
    assert [(d["mediaType"], d["digest"], d["annotations"]["io.containerd.image.name"],
             d["annotations"]["org.opencontainers.image.ref.name"]) for d in top] == [(attest.INDEX, digest, NAME, NAME)]
    index = json.loads(files[f"blobs/sha256/{digest.split(':')[1]}"])
    image = exp.image["digest"]
    assert [(d["digest"], d["platform"]) for d in index["manifests"]][0] == (image, {"architecture": "amd64", "os": "linux"})
    assert "annotations" not in index["manifests"][0]
    assert index["manifests"][1]["annotations"] == {attest.REFERENCE_DIGEST: image, attest.REFERENCE_TYPE: "attestation-manifest"}
    found = attest.attestations(index, lambda d: files[f"blobs/sha256/{d.split(':')[1]}"])
    assert {t: s["subject"][0]["digest"]["sha256"] for t, s in found.items()} == {
        "https://cyclonedx.org/bom": image.split(":")[1], "https://slsa.dev/provenance/v1": image.split(":")[1]}


def test_the_load_holds_only_the_attestations_blobs_each_named_by_its_sha256(tmp_path):
    exp, image_blobs = stored(tmp_path)
    _, files = written(exp)
    blobs = {name: data for name, data in files.items() if name.startswith("blobs/")}
    assert len(blobs) == 5  # 2 statements, their config, the attestation manifest, the index
    assert all(name.rsplit("/", 1)[1] == hashlib.sha256(data).hexdigest() for name, data in blobs.items())
    assert not {f"blobs/sha256/{d.split(':')[1]}" for d in image_blobs} & set(blobs)


def test_the_same_inputs_give_the_same_digest_and_another_statement_another(tmp_path):
    exp, _ = stored(tmp_path)
    assert written(exp)[0] == written(exp)[0] != written(exp, "key2")[0]


@pytest.mark.parametrize("meta,message", [
    ("{}", "wrote no image descriptor"),
    ("not json", "wrote no image descriptor"),
    (json.dumps({"containerimage.descriptor": {"mediaType": attest.INDEX, "digest": "sha256:0"}, "image.name": "x"}),
     "not one OCI image manifest"),
    (json.dumps({"containerimage.descriptor": {"mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                                               "digest": "sha256:0"}, "image.name": "x"}), "not one OCI image manifest"),
    (json.dumps({"containerimage.descriptor": {"mediaType": attest.MANIFEST, "digest": "sha256:0"}, "image.name": "x"}),
     "wrote no platform for x"),
])
def test_a_metadata_file_without_one_oci_image_manifest_and_its_platform_is_refused(tmp_path, meta, message):
    (tmp_path / "m.json").write_text(meta)
    with pytest.raises(BuildFailed, match=message):
        imagestore.exported(tmp_path / "m.json")


# ---- docker load, through a stand-in `docker` that stores blobs as the containerd store does -------------------

FAKE_DOCKER = """import json, os, sys, tarfile
store, calls = {tool!r} + ".store", {tool!r} + ".calls"
with open(calls, "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1:] != ["load"]:
    sys.exit(0)
held = json.load(open(store)) if os.path.exists(store) else {{}}
with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
    files = {{m.name: tar.extractfile(m).read().decode() for m in tar if m.isfile()}}
held.update({{n.rsplit("/", 1)[1]: data for n, data in files.items() if n.startswith("blobs/")}})
json.dump(held, open(store, "w"))
def need(digest):
    if digest.split(":")[1] not in held:
        print("failed to unpack loaded image: content digest " + digest + ": not found")
        sys.exit(1)
    return json.loads(held[digest.split(":")[1]])
top = json.loads(files["index.json"])["manifests"][0]
for desc in need(top["digest"])["manifests"]:
    manifest = need(desc["digest"])
    if "layers" in manifest and desc.get("platform", {{}}).get("os") != "unknown":
        need(manifest["config"]["digest"])
        for layer in manifest["layers"]:
            if layer["digest"].split(":")[1] not in held:
                need(layer["digest"])
print("Loaded image: " + top["annotations"]["io.containerd.image.name"])
"""


@pytest.fixture
def docker(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = python_tool(bin_dir / "docker", FAKE_DOCKER.format(tool=str(bin_dir / "docker")))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return script


def calls(docker) -> list[str]:
    return docker.with_suffix(".calls").read_text().splitlines()


def _holds(docker, blobs: dict[str, bytes]) -> None:
    """The store holds what the image exporter wrote (layers as placeholders: only their presence is read)."""
    held = {d.split(":")[1]: (b.decode() if b[:1] == b"{" else "layer") for d, b in blobs.items()}
    docker.with_suffix(".store").write_text(json.dumps(held))


def test_attach_loads_the_index_over_the_image_the_store_holds_and_returns_its_digest(tmp_path, docker):
    exp, blobs = stored(tmp_path)
    _holds(docker, blobs)
    digest = imagestore.attach(exp, statements, tmp_path / "load.log")
    assert calls(docker) == ["load"] and digest == written(exp)[0] != exp.image["digest"]
    assert "Loaded image: " + NAME in (tmp_path / "load.log").read_text()


def test_attach_to_an_image_the_store_lacks_is_one_error_naming_the_log(tmp_path, docker):
    exp, _ = stored(tmp_path)
    with pytest.raises(BuildFailed, match=r"docker load of the attestations of .* failed \(exit 1\); log .*load.log"):
        imagestore.attach(exp, statements, tmp_path / "load.log")
    assert "not found" in (tmp_path / "load.log").read_text()
