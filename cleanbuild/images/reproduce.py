"""Are two builds of the same inputs the same? Compare two wheels images and two clean images built apart, and,
where the engine builds reproducibly (Docker >= 26, the containerd store: cleanbuild.images.buildx), their digests: for
two images that differ, the first layer that differs and the first file in it that differs.

Same manifest bytes (every wheel's sha256), same installed file list and RECORD hashes in the venv. Image IDs may
still differ, and the comparison says why: BuildKit 0.8 (Docker 20.10's) stamps files a RUN creates with the time
of the build (the .pyc uv compiles, the files write_versions writes) and records each layer's creation time in the
image config. BuildKit >= 0.13 with a SOURCE_DATE_EPOCH build argument and the Dockerfiles' own clamp of every
RUN's times removes both; this engine's BuildKit predates that, so there the digests are not a test of the closure.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zstandard

from cleanbuild.core import engine
from cleanbuild.core.errors import StepFailed
from cleanbuild.core.spec import RunSpec

if TYPE_CHECKING:
    from docker.client import DockerClient

RECORDS = r"""
import importlib.metadata as md, json, os
records = {}
for d in md.distributions():
    text = d.read_text("RECORD") or ""
    records[d.metadata["Name"]] = sorted(line.rsplit(",", 2)[0] + "," + line.rsplit(",", 2)[1]
                                         for line in text.splitlines() if line and "__pycache__" not in line)
files = sorted(os.path.relpath(os.path.join(d, f), "/opt/venv") for d, _, fs in os.walk("/opt/venv") for f in fs
               if "__pycache__" not in d)
print(json.dumps({"records": records, "files": files}))
"""
WHY = ("image IDs differ only where BuildKit 0.8 stamps build-time mtimes on the files a RUN creates (compiled .pyc, "
       "versions.json) and creation times into the image config; BuildKit >= 0.13 removes both with the "
       "SOURCE_DATE_EPOCH build argument (and the Dockerfiles' clamp of every RUN's times), which Docker 20.10's "
       "BuildKit does not apply")


def venv_facts(client: DockerClient, image: str) -> dict[str, Any]:
    """Every distribution's RECORD and every file of the venv, read by the image's own Python (no network)."""
    spec = RunSpec(step="venv records", name=f"atom-records-{uuid.uuid4().hex[:12]}",
                   command=("python", "-c", RECORDS), network="none", workdir="/")
    result = engine.run_container(client, image, spec)
    lines = result.logs.strip().splitlines()
    if result.exit_code != 0 or not lines:
        raise StepFailed(f"reading the venv records of {image} failed (exit {result.exit_code}): "
                         f"{lines[-1][:300] if lines else 'no output'}")
    facts: dict[str, Any] = json.loads(lines[-1])  # the script prints one JSON line, last
    return facts


def compare(client: DockerClient, wheels: tuple[str, str], clean: tuple[str, str]) -> dict[str, Any]:
    manifests = [engine.read_file(client, image, "/wheels/manifest.json") for image in wheels]
    venvs = [venv_facts(client, image) for image in clean]
    ids = [engine.image_id(client, image) for image in clean]
    layers = [engine.layers(client, image) for image in clean]
    differing = sorted(name for name in set(venvs[0]["records"]) | set(venvs[1]["records"])
                       if venvs[0]["records"].get(name) != venvs[1]["records"].get(name))
    return {
        "manifests_identical": manifests[0] == manifests[1] and manifests[0] is not None,
        "files_identical": venvs[0]["files"] == venvs[1]["files"],
        "records_identical": not differing, "records_differing": differing,
        "distributions": len(venvs[0]["records"]), "files": len(venvs[0]["files"]),
        "clean_ids_identical": ids[0] == ids[1], "clean_ids": ids,
        "layers_shared": sum(a == b for a, b in zip(*layers, strict=False)), "layers": len(layers[0]),
        "why_ids_differ": None if ids[0] == ids[1] else WHY,
    }


def compare_digests(client: DockerClient, first: dict[str, str], second: dict[str, str]) -> dict[str, Any]:
    """Two builds' images per unit ({unit: image ID}): which are the same, and for each unit whose IDs differ
    what differs (cleanbuild.images.reproduce.first_difference)."""
    units = sorted(set(first) | set(second))
    differing = [u for u in units if first.get(u) != second.get(u)]
    return {"identical": not differing, "units": {u: [first.get(u), second.get(u)] for u in units},
            "differing": {u: first_difference(client, first[u], second[u]) if first.get(u) and second.get(u) else
                          {"why": "built only once"} for u in differing}}


def first_difference(client: DockerClient, a: str, b: str) -> dict[str, Any]:
    """The first layer (bottom first) whose diff ID differs between images a and b (or that only one has), and the
    first file in it whose content, mode, owner or time differs; or the image config, when every layer is the same."""
    la, lb = engine.layers(client, a), engine.layers(client, b)
    index = next((i for i in range(max(len(la), len(lb))) if _at(la, i) != _at(lb, i)), None)
    if index is None:
        return {"layer": None, "why": "every layer is the same: the image config differs (labels, environment, times)"}
    with tempfile.TemporaryDirectory(prefix="atom-build-diff-") as tmp:
        files = [layer_files(engine.save(client, image, Path(tmp) / f"{n}.tar"), index) if index < len(layers) else {}
                 for n, (image, layers) in enumerate(((a, la), (b, lb)))]
    path, what = diff_files(*files)
    return {"layer": index, "diff_ids": [_at(la, index), _at(lb, index)], "file": path, "why": what}


def _at(layers: list[str], index: int) -> str | None:
    return layers[index] if index < len(layers) else None


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
FileFacts = tuple[str, int, int, int, float]  # (content sha256 or what it is, mode, uid, gid, mtime)


def layer_files(saved: Path, index: int) -> dict[str, FileFacts]:
    """{path: (sha256 of content or link target, mode, uid, gid, mtime)} of layer `index` of a `docker save` tar.
    A layer is a tar, plain, gzip or (the reproducible export's, cleanbuild.images.imagestore) zstd: the containerd store
    saves each blob as it holds it."""
    with tarfile.open(saved) as outer:
        manifest = json.loads(_read(outer, "manifest.json"))
        blob = outer.extractfile(manifest[0]["Layers"][index])
        if blob is None:
            raise ValueError(f"layer {index} in {saved.name} is not a regular file")
        zstd = blob.read(4) == ZSTD_MAGIC
        blob.seek(0)
        raw = zstandard.ZstdDecompressor().stream_reader(blob) if zstd else blob
        with tarfile.open(fileobj=raw, mode="r|*") as layer:
            return _facts(layer)


def tar_files(path: Path) -> dict[str, FileFacts]:
    """layer_files of a tar on disk (the stand-in base's, cleanbuild.images.standin)."""
    with tarfile.open(path) as tar:
        return _facts(tar)


def _facts(tar: tarfile.TarFile) -> dict[str, FileFacts]:
    return {m.name: (_content(tar, m), m.mode, m.uid, m.gid, m.mtime) for m in tar}


DIRECTORY = "directory"


def _read(tar: tarfile.TarFile, member: str | tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    if handle is None:  # `docker save` writes manifest.json and every layer's files as regular files
        raise ValueError(f"{member} in {tar.name!r} is not a regular file")
    return handle.read()


def _content(layer: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    if member.isfile():
        return hashlib.sha256(_read(layer, member)).hexdigest()
    return DIRECTORY if member.isdir() else f"{member.type!r}->{member.linkname}"


FIELDS = ("content", "mode", "owner", "group", "mtime")


def diff_files(a: dict[str, FileFacts], b: dict[str, FileFacts]) -> tuple[str | None, str]:
    """The first path present in one layer only or differing in a field, and what differs: files first (a layer
    also holds the folders above each file it adds), each group sorted."""
    def is_dir(path: str) -> bool:
        return (a.get(path) or b[path])[0] == DIRECTORY

    for path in sorted(set(a) | set(b), key=lambda p: (is_dir(p), p)):
        if path not in a or path not in b:
            return path, "only in the " + ("second" if path not in a else "first") + " image"
        if a[path] != b[path]:
            fields = [f for f, x, y in zip(FIELDS, a[path], b[path], strict=True) if x != y]
            return path, ", ".join(fields) + " differ"
    return None, "same files; the layer's archive differs (order or compression)"
