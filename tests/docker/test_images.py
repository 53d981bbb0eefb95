"""Build the wheels and clean images with the offline profile for each arch, then inspect what came out."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.tiny_model import make_tiny_model

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


# What the engine adds to every container's filesystem, not part of the image.
ENGINE_FILES = {".dockerenv", "etc/hosts", "etc/hostname", "etc/resolv.conf"}


@pytest.fixture(scope="session")
def wheels_files(docker_engine, built) -> dict[str, bytes | str]:
    """name -> sha256 (or the manifest's text) of every file under /wheels of the wheels image."""
    container = docker_engine.containers.create(built.wheels_id, command=["/none"])
    try:
        stream, _ = container.get_archive("/")
        files: dict[str, str] = {}
        with tarfile.open(fileobj=_Reader(stream), mode="r|") as tar:
            for member in tar:
                name = member.name.lstrip("/")
                if not member.isfile() or name in ENGINE_FILES or name.startswith("dev/"):
                    continue
                data = tar.extractfile(member)
                if name.endswith("manifest.json"):
                    files[name] = data.read().decode()
                else:
                    digest = hashlib.sha256()
                    for block in iter(lambda d=data: d.read(1 << 20), b""):
                        digest.update(block)
                    files[name] = digest.hexdigest()
        return files
    finally:
        container.remove()


class _Reader(io.RawIOBase):
    """A file object over the SDK's chunk iterator, so tarfile can stream a 500 MB archive."""

    def __init__(self, chunks) -> None:
        self._chunks, self._buf = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, out) -> int:
        while not self._buf:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(out), len(self._buf))
        out[:n], self._buf = self._buf[:n], self._buf[n:]
        return n


INSTALLER_DIR = "wheels/installer/"


def _runtime_wheel(name: str) -> bool:
    """A wheel directly under /wheels (what --find-links /wheels sees); the installer lives in wheels/installer/."""
    return name.endswith(".whl") and "/" not in name.removeprefix("wheels/")


def test_wheels_image_holds_only_wheels_and_manifest(wheels_files):
    names = set(wheels_files)
    assert "wheels/manifest.json" in names
    installer = {n for n in names if n.startswith(INSTALLER_DIR)}
    assert all(n == "wheels/manifest.json" or _runtime_wheel(n) for n in names - installer), names
    assert all(n.removeprefix(INSTALLER_DIR).startswith("uv-") and n.endswith(".whl") for n in installer), installer


def test_manifest_matches_the_wheels(wheels_files, built):
    manifest = json.loads(wheels_files["wheels/manifest.json"])
    listed = {f"wheels/{w['filename']}": w for w in manifest["wheels"]}
    on_disk = {n for n in wheels_files if _runtime_wheel(n)}
    assert set(listed) == on_disk
    for name, entry in listed.items():
        assert entry["sha256"] == wheels_files[name], name
        assert entry["arch"] == built.variant.arch and entry["ck_mode"] == built.variant.ck_mode
        assert entry["name"] and entry["version"] and entry["size"] > 0 and entry["source"]
    components = {w["component"] for w in manifest["wheels"]}
    assert {"torch", "triton", "aiter", "atom", "deps"} <= components
    assert manifest["arch"] == built.variant.arch and manifest["ck_mode"] == built.variant.ck_mode


def test_manifest_records_the_installer_apart(wheels_files, tmp_path):
    """uv: one wheel in wheels/installer/, its own manifest entry (hash of that file), never a runtime wheel."""
    from cleanbuild import profiles

    pin = profiles.load("offline").component("installer").fields
    manifest = json.loads(wheels_files["wheels/manifest.json"])
    installer = manifest["installer"]
    on_disk = [n for n in wheels_files if n.startswith(INSTALLER_DIR)]
    assert on_disk == [INSTALLER_DIR + installer["filename"]]
    assert installer["name"] == "uv" and installer["version"] == pin["version"]
    assert installer["sha256"] == wheels_files[on_disk[0]] and installer["size"] > 0 and installer["source"]
    assert not [w for w in manifest["wheels"] if w["name"].lower() == "uv" or w["filename"].startswith("uv-")]
    # What the clean build installs into the venv comes from these files: uv is in neither.
    (tmp_path / "manifest.json").write_text(wheels_files["wheels/manifest.json"])
    script = REPO / "docker" / "scripts" / "collect_wheels.py"
    subprocess.run([sys.executable, str(script), "requirements", "--manifest", str(tmp_path / "manifest.json"),  # noqa: S603
                    "--out", str(tmp_path / "r.txt"), "--constraints", str(tmp_path / "c.txt")], check=True)
    for name in ("r.txt", "c.txt"):
        lines = (tmp_path / name).read_text().splitlines()
        assert len(lines) == len(manifest["wheels"]) and not [ln for ln in lines if ln.lower().startswith("uv==")]


def test_offline_deps_closure_leaves_the_installer_out(offline_context):
    local = offline_context / "local"
    assert [p.name for p in (local / "installer").glob("*.whl")][0].startswith("uv-")
    assert not list((local / "deps").glob("uv-*.whl"))


def test_clean_image_labels_and_environment(docker_engine, built):
    image = docker_engine.images.get(built.clean_id)
    labels, env = image.labels, dict(e.split("=", 1) for e in image.attrs["Config"]["Env"])
    assert labels["io.atom-build.arch"] == built.variant.arch
    assert labels["io.atom-build.ck-mode"] == built.variant.ck_mode
    assert labels["org.opencontainers.image.revision"] == "test"  # passed by the host with --label
    assert env["GPU_ARCHS"] == built.variant.arch and env["PYTORCH_ROCM_ARCH"] == built.variant.arch
    assert env["PATH"].startswith("/opt/venv/bin:")
    if built.variant.enable_ck:
        assert "ATOM_CK_FREE" not in env
    else:
        assert env["ATOM_CK_FREE"] == "1"


def test_build_facts(docker_engine, built, wheels_files, dk):
    versions = dk.image_json(docker_engine, built.clean_id, "/opt/atom-build/versions.json")
    manifest = dk.image_json(docker_engine, built.clean_id, "/opt/atom-build/manifest.json")
    assert manifest == json.loads(wheels_files["wheels/manifest.json"])
    by_component = {w["component"]: w["version"] for w in manifest["wheels"] if w["component"] != "deps"}
    for component in ("torch", "triton", "aiter", "atom"):
        assert versions[component] == by_component[component]
    assert versions["arch"] == built.variant.arch and versions["ck_mode"] == built.variant.ck_mode
    assert versions["python"].startswith("3.") and versions["rocm"] is None  # the stand-in base has no ROCm
    structure = dk.image_json(docker_engine, built.clean_id, "/opt/atom-build/structure.json")
    assert structure["ok"], structure["problems"]


# One script, run with no network, reports everything the image must not have and what pip installed.
AUDIT = r"""
import importlib.metadata as md, json, os, shutil, glob
print(json.dumps({
    "binaries": {b: shutil.which(b) for b in ("git", "gcc", "cc", "c++", "g++", "clang", "make")},
    "caches": sorted(p for p in ("/root/.cache", os.path.expanduser("~/.cache/pip"), os.path.expanduser("~/.cache/uv"))
                     if os.path.exists(p)) + glob.glob("/tmp/pip-*") + glob.glob("/tmp/uv*"),
    "dists": {d.metadata["Name"]: d.version for d in md.distributions()},
    "installed_by": {d.metadata["Name"]: (d.read_text("INSTALLER") or "").strip() for d in md.distributions()},
    # The installer: nothing named uv/uvx on PATH, under /tmp or in the venv's bin (its wheel's scripts).
    "uv": sorted({p for b in ("uv", "uvx") for p in [shutil.which(b)] if p}
                 | {os.path.join(d, f) for d, _, files in os.walk("/tmp") for f in files if f in ("uv", "uvx")}
                 | set(glob.glob("/opt/venv/bin/uv*"))),
    "leftovers": [p for p in ("/wheels", "/opt/atom-build-scripts") if os.path.exists(p) and os.listdir(p)],
    # Only empty bind-mount points may stay in /tmp (this BuildKit keeps them as empty folders).
    "tmp": sorted(os.path.join(d, f) for d, _, files in os.walk("/tmp") for f in files)
           + sorted(e for e in os.listdir("/tmp") if not os.path.isdir(os.path.join("/tmp", e))),
}))
"""


@pytest.fixture(scope="session")
def audit(docker_engine, built, dk) -> dict:
    return json.loads(dk.run_in(docker_engine, built.clean_id, ["python", "-c", AUDIT]))


def test_no_compiler_git_or_pip_cache(audit):
    assert {b: p for b, p in audit["binaries"].items() if p} == {}
    assert audit["caches"] == []
    assert audit["leftovers"] == []
    assert audit["tmp"] == []


def test_no_installer_left_in_the_clean_image(audit):
    assert audit["uv"] == []
    assert "uv" not in {name.lower() for name in audit["dists"]}


def test_installed_exactly_the_manifest(audit, docker_engine, built, dk):
    manifest = dk.image_json(docker_engine, built.clean_id, "/opt/atom-build/manifest.json")
    dists = {name.lower().replace("_", "-"): v for name, v in audit["dists"].items()}
    for wheel in manifest["wheels"]:
        assert dists.get(wheel["name"].lower().replace("_", "-")) == wheel["version"], wheel["name"]
    assert not [d for d in dists if d.startswith("nvidia-")]
    # Nothing beyond the manifest but the venv's own pip.
    assert set(dists) - {w["name"].lower().replace("_", "-") for w in manifest["wheels"]} <= {"pip"}
    # The manifest's installer (uv) did the install: every runtime wheel says so in its INSTALLER record.
    if manifest.get("installer"):
        by = {name.lower().replace("_", "-"): i for name, i in audit["installed_by"].items()}
        assert {w["name"]: by[w["name"].lower().replace("_", "-")] for w in manifest["wheels"]} == {
            w["name"]: "uv" for w in manifest["wheels"]}


def test_smoke_generates_ten_tokens(docker_engine, built, tmp_path_factory, dk):
    model = make_tiny_model(tmp_path_factory.mktemp("tiny-model"))
    out = dk.run_in(docker_engine, built.clean_id,
                 ["python", "/opt/atom-build/smoke.py", "--model", "/model", "--min-tokens", "10", "--",
                  "python", "-m", "atom.examples.simple_inference", "--model", "/model", "--max-tokens", "10",
                  "--temperature", "0"],
                 volumes={str(model): {"bind": "/model", "mode": "ro"}})
    line = next(ln for ln in out.splitlines() if ln.startswith("SMOKE_RESULT "))
    result = json.loads(line.removeprefix("SMOKE_RESULT "))
    assert result["returncode"] == 0 and result["new_tokens"] == 10, result
    assert result["counted_by"] == "whitespace"  # no transformers in this image


def _context_without(offline_context: Path, tmp: Path, empty: str) -> Path:
    """A copy of the offline context (hard links, no data copied) whose local/<empty>/ is empty."""
    context = tmp / "context"
    shutil.copytree(offline_context, context, copy_function=_link)
    for item in (context / "local" / empty).iterdir():
        item.unlink()
    return context


def _link(src: str, dst: str) -> None:
    Path(dst).hardlink_to(src)


def test_missing_wheel_fails_naming_the_component(offline_context, standin_base, tmp_path, dk):
    context = _context_without(offline_context, tmp_path, "aiter")
    with pytest.raises(dk.BuildError) as info:
        dk.build_wheels(context, standin_base, dk.Variant("gfx942", False))
    assert "missing wheel for component 'aiter'" in info.value.output


def test_prebuilt_kernels_asked_but_absent_fails(offline_context, standin_base, dk):
    with pytest.raises(dk.BuildError) as info:
        dk.build_wheels(offline_context, standin_base, dk.Variant("gfx950", False), PREBUILD_KERNELS="1")
    assert "component 'aiter': PREBUILD_KERNELS=1" in info.value.output
    assert "no compiled aiter/jit/*.so for gfx950" in info.value.output


def test_clean_refuses_a_list_of_archs(offline_context, standin_base, built, dk):
    if built.variant.name != "gfx942-ckfree":
        pytest.skip("checked on one variant")
    with pytest.raises(dk.BuildError) as info:
        dk.buildx_build(dk.DOCKER_DIR / "Dockerfile.clean", offline_context, target="clean",
                     build_args={"WHEELS_IMAGE": built.wheels_tag, "BASE_IMAGE": standin_base,
                                 "GPU_ARCH": "gfx942;gfx950", "ENABLE_CK": "0"}, what="clean two archs (must fail)")
    assert "GPU_ARCH must be one arch" in info.value.output


@pytest.mark.parametrize("tampered", ["runtime", "installer"])
def test_clean_refuses_a_tampered_hash(docker_engine, standin_base, built, wheels_files, tmp_path, dk, tampered):
    """A manifest hash that does not match its wheel stops the install: uv for a runtime wheel, pip for uv itself."""
    if built.variant.name != "gfx942-ckfree":
        pytest.skip("checked on one variant")
    manifest = json.loads(wheels_files["wheels/manifest.json"])
    entry = manifest["installer"] if tampered == "installer" else next(
        w for w in manifest["wheels"] if w["name"] == "numpy")
    entry["sha256"] = "0" * 64
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "Dockerfile").write_text(f"FROM {built.wheels_tag}\nCOPY manifest.json /wheels/manifest.json\n")
    tag = f"atom-build/wheels:tampered-{tampered}-test"
    dk.buildx_build(tmp_path / "Dockerfile", tmp_path, tags=[tag], what=f"wheels tampered {tampered}")
    try:
        with pytest.raises(dk.BuildError) as info:
            dk.buildx_build(dk.DOCKER_DIR / "Dockerfile.clean", REPO, target="clean",
                            build_args={"WHEELS_IMAGE": tag, "BASE_IMAGE": standin_base, "GPU_ARCH": "gfx942",
                                        "ENABLE_CK": "0"}, what=f"clean tampered {tampered} (must fail)")
        if tampered == "installer":
            assert "THESE PACKAGES DO NOT MATCH THE HASHES" in info.value.output
        else:
            assert "Hash mismatch for `numpy==" in info.value.output
    finally:
        docker_engine.images.remove(tag, force=True)


@pytest.mark.skipif(not (REPO / "patches" / "__main__.py").is_file(), reason="patches/ is not written yet")
def test_patch_layer_applies(docker_engine, built, tmp_path, dk):
    if built.variant.name != "gfx942-ckfree":
        pytest.skip("the patch layer is built on one variant")
    context = tmp_path / "context"
    shutil.copytree(REPO / "patches", context / "patches", ignore=shutil.ignore_patterns("__pycache__"))
    patched = dk.buildx_build(dk.DOCKER_DIR / "Dockerfile.patch", context, build_args={"IMAGE": built.clean_tag},
                           what="patch gfx942-ckfree")
    try:
        report = dk.image_json(docker_engine, patched, "/opt/atom-build/patches.json")
        assert report["exit_code"] == 0 and report["patches"]
        assert "drifted" not in {p["outcome"] for p in report["patches"]}
        assert {p["name"]: p["outcome"] for p in report["patches"]}["atom-ck-free-triton-gemm"] == "applied"
        listing = dk.run_in(docker_engine, patched, ["sh", "-c", "ls -A /tmp; python -c 'import patches' 2>&1 || true"])
        assert "atom-build-patches" not in listing and "No module named 'patches'" in listing
        linear = dk.run_in(docker_engine, patched, ["python", "-c",
                        "import atom.model_ops.linear as m, inspect; print(inspect.getsource(m))"])
        assert "ATOM_CK_FREE" in linear
    finally:
        docker_engine.images.remove(patched, force=True)
