"""cleanbuild.images.ocilayout and cleanbuild.images.attest on a small OCI layout written here the way BuildKit's oci
exporter (tar=false) lays one out (blobs/sha256/*, the image's descriptor in buildx's metadata file): what
`docker load` is given (the new layers, every layer on a second try), the attestation index, byte-identical for the
same inputs, and the layout's prune. `docker` is a script here that loads like the containerd store: it fails when a
layer is neither in the tar nor among the blobs it already holds."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import time

import pytest

from cleanbuild.errors import BuildFailed
from cleanbuild.images import attest, ocilayout

NAME = "127.0.0.1:5000/atom-gfx950-ckfree:candidate"


def _blob(layout, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return f"sha256:{digest}"


def _layer(text: bytes) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    return gzip.compress(raw.getvalue(), mtime=0)


def export(layout, metadata=None) -> tuple[ocilayout.Export, list[str]]:
    """A two-layer image: the lower layer was in the layout before the build, the upper one is new. Returns the
    Export (read back from a metadata file as buildx writes it) and the layer digests, bottom first."""
    lower = _blob(layout, _layer(b"below\n"))
    before = ocilayout.blobs(layout)
    upper = _blob(layout, _layer(b"mine\n"))
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": attest.MANIFEST,
                           "config": {"mediaType": attest.CONFIG, "digest": _blob(layout, config), "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": 1}
                                      for d in (lower, upper)]}).encode()
    desc = {"mediaType": attest.MANIFEST, "digest": _blob(layout, manifest), "size": len(manifest),
            "annotations": {"org.opencontainers.image.created": "1980-01-01T00:00:00Z"},
            "platform": {"architecture": "amd64", "os": "linux"}}
    metadata = metadata or layout.parent / "metadata.json"
    metadata.write_text(json.dumps({"containerimage.descriptor": desc, "containerimage.digest": desc["digest"],
                                    "image.name": NAME}))
    return ocilayout.exported(layout, metadata, before), [lower, upper]


def statements(subject: str, version: str = "key1") -> list[dict]:
    return [attest.statement("atom-gfx950-ckfree", subject, "https://cyclonedx.org/bom", {"version": version}),
            attest.statement("atom-gfx950-ckfree", subject, "https://slsa.dev/provenance/v1", {"pins": {}})]


def written(exp, version: str | None = "key1", everything: bool = False) -> tuple[str, dict[str, bytes]]:
    out = io.BytesIO()
    given = None if version is None else (lambda subject: statements(subject, version))
    digest = ocilayout.write(exp, given, out, everything=everything)
    with tarfile.open(fileobj=io.BytesIO(out.getvalue())) as tar:
        return digest, {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def test_the_index_holds_the_image_and_an_attestation_of_each_statement(tmp_path):
    exp, _ = export(tmp_path / "oci")
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


def test_only_the_layers_the_build_wrote_are_given_unless_every_layer_is_asked_for(tmp_path):
    exp, (lower, upper) = export(tmp_path / "oci")
    new = {f"blobs/sha256/{d.split(':')[1]}" for d in (lower, upper)}
    _, files = written(exp, version=None)
    assert new & set(files) == {f"blobs/sha256/{upper.split(':')[1]}"}
    _, files = written(exp, version=None, everything=True)
    assert new <= set(files)


def test_without_attestations_the_id_is_the_manifest_and_every_blob_is_named_by_its_sha256(tmp_path):
    exp, _ = export(tmp_path / "oci")
    digest, files = written(exp, version=None)
    assert digest == exp.image["digest"] == json.loads(files["index.json"])["manifests"][0]["digest"]
    blobs = {name: data for name, data in files.items() if name.startswith("blobs/")}
    assert len(blobs) == 3 and all(name.rsplit("/", 1)[1] == hashlib.sha256(data).hexdigest() for name, data in blobs.items())
    _, attested = written(exp)
    assert len([n for n in attested if n.startswith("blobs/")]) == 3 + 5  # 2 statements, their config, manifest, index


def test_the_same_inputs_give_the_same_digest_and_another_statement_another(tmp_path):
    exp, _ = export(tmp_path / "oci")
    assert written(exp)[0] == written(exp)[0] != written(exp, "key2")[0]


@pytest.mark.parametrize("meta,message", [
    ("{}", "wrote no image descriptor"),
    ("not json", "wrote no image descriptor"),
    (json.dumps({"containerimage.descriptor": {"mediaType": attest.INDEX, "digest": "sha256:0"}, "image.name": "x"}),
     "not one image manifest"),
])
def test_a_metadata_file_without_one_image_manifest_is_refused(tmp_path, meta, message):
    (tmp_path / "m.json").write_text(meta)
    with pytest.raises(BuildFailed, match=message):
        ocilayout.exported(tmp_path, tmp_path / "m.json", set())


def test_prune_removes_only_the_blobs_not_written_for_the_days_given(tmp_path):
    layout = tmp_path / "oci"
    old, fresh = _blob(layout, b"old"), _blob(layout, b"fresh")
    long_ago = time.time() - 20 * 86400
    os.utime(layout / "blobs" / "sha256" / old.split(":")[1], (long_ago, long_ago))
    assert ocilayout.prune(layout, days=14) == 3
    assert ocilayout.blobs(layout) == {fresh}
    assert ocilayout.prune(tmp_path / "none") == 0


# ---- docker load, through a stand-in `docker` that stores blobs as the containerd store does -------------------

FAKE_DOCKER = """#!{python}
import json, os, sys, tarfile
store, calls = sys.argv[0] + ".store", sys.argv[0] + ".calls"
with open(calls, "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1:] != ["load"]:
    sys.exit(0)
held = set(json.load(open(store))) if os.path.exists(store) else set()
with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
    files = {{m.name: tar.extractfile(m).read() for m in tar if m.isfile()}}
held |= {{n.rsplit("/", 1)[1] for n in files if n.startswith("blobs/")}}
json.dump(sorted(held), open(store, "w"))
top = json.loads(files["index.json"])["manifests"][0]
manifest = json.loads(files["blobs/sha256/" + top["digest"].split(":")[1]])
if top["mediaType"].endswith("index.v1+json"):
    manifest = json.loads(files["blobs/sha256/" + manifest["manifests"][0]["digest"].split(":")[1]])
missing = [l["digest"] for l in manifest["layers"] if l["digest"].split(":")[1] not in held]
if missing:
    print("failed to unpack loaded image: content digest " + missing[0] + ": not found")
    sys.exit(1)
print("Loaded image: " + top["annotations"]["io.containerd.image.name"])
"""


@pytest.fixture
def docker(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "docker"
    script.write_text(FAKE_DOCKER.format(python=sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return script


def calls(docker) -> list[str]:
    return docker.with_suffix(".calls").read_text().splitlines()


def test_a_load_gives_the_new_layers_when_the_engine_holds_the_ones_below(tmp_path, docker):
    exp, (lower, _) = export(tmp_path / "oci")
    docker.with_suffix(".store").write_text(json.dumps([lower.split(":")[1]]))
    digest = ocilayout.load(exp, statements, tmp_path / "load.log")
    assert calls(docker) == ["load"] and digest.startswith("sha256:") and digest != exp.image["digest"]
    assert "Loaded image: " + NAME in (tmp_path / "load.log").read_text()


def test_a_load_the_engine_cannot_unpack_removes_the_name_and_gives_every_layer(tmp_path, docker):
    exp, _ = export(tmp_path / "oci")
    assert ocilayout.load(exp, None, tmp_path / "load.log") == exp.image["digest"]
    assert calls(docker) == ["load", f"image rm {NAME}", "load"]
    log = (tmp_path / "load.log").read_text()
    assert "not found" in log and log.rstrip().endswith(f"Loaded image: {NAME}")


def test_a_load_that_fails_with_every_layer_is_one_error_naming_the_log(tmp_path, docker):
    exp, _ = export(tmp_path / "oci")
    docker.write_text(docker.read_text().replace("held = ", "sys.exit(1)  # a full disk, say\nheld = "))
    with pytest.raises(BuildFailed, match=r"docker load of .* failed \(exit 1\), with every layer of it given; log "):
        ocilayout.load(exp, None, tmp_path / "load.log")
    assert calls(docker) == ["load", f"image rm {NAME}", "load", f"image rm {NAME}"]


def test_a_layer_gone_from_the_layout_is_one_error_naming_it(tmp_path, docker):
    exp, (lower, _) = export(tmp_path / "oci")
    (tmp_path / "oci" / "blobs" / "sha256" / lower.split(":")[1]).unlink()  # pruned, and never loaded
    with pytest.raises(BuildFailed, match=f"the OCI layout .* lacks {lower}. To fix, build again"):
        ocilayout.load(exp, None, tmp_path / "load.log")
