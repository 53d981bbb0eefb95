"""The offline images, built for real (real aiter and ATOM at the pins, real BuildKit), and what they must hold."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from cleanbuild.core import engine, metadata
from cleanbuild.core.errors import BuildFailed
from cleanbuild.images.plan import build_spec
from cleanbuild.upstream import profiles
from tests.support.builds import build_with
from tests.support.tiny_model import make_tiny_model

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ENGINE_FILES = {".dockerenv", "etc/hosts", "etc/hostname", "etc/resolv.conf"}
PINS = profiles.load("offline")
AITER_REF = PINS.component("aiter").ref
ATOM_REF = PINS.component("atom").ref


@pytest.fixture(scope="module", params=["gfx950-ckfree", "gfx942-ck"])
def built(request, offline_builds):
    return offline_builds[request.param]


def wheels_files(client, image: str) -> dict[str, str]:
    """path -> sha256 of every file of the wheels image (the manifest and requirement files: their text)."""
    container = client.containers.create(image, command=["/none"])
    try:
        stream, _ = container.get_archive("/")
        files = {}
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream)), mode="r") as tar:
            for member in tar:
                name = member.name.lstrip("/")
                if not member.isfile() or name in ENGINE_FILES or name.startswith("dev/"):
                    continue
                data = tar.extractfile(member).read()
                files[name] = data.decode() if name.endswith((".json", ".txt")) else hashlib.sha256(data).hexdigest()
        return files
    finally:
        container.remove()


def run_in(client, image: str, command: list[str], mounts: dict[str, str] | None = None) -> str:
    from docker.types import Mount

    out = client.containers.run(image, command, network_mode="none", remove=True, stdout=True, stderr=True,
                             mounts=[Mount(t, s, type="bind", read_only=True) for s, t in (mounts or {}).items()])
    return out.decode()


def image_json(client, image: str, path: str) -> dict:
    return json.loads(engine.read_file(client, image, path))


def test_wheels_image_holds_only_wheels_requirements_and_manifest(docker_engine, built):
    files = set(wheels_files(docker_engine, built.wheels))
    assert "wheels/manifest.json" in files
    listed = {"wheels/manifest.json", "wheels/common/requirements.txt", "wheels/atom/requirements.txt",
              "wheels/arch/requirements.txt", "wheels/common/installer.txt"}
    assert listed <= files
    others = files - listed
    assert others and all(f.endswith(".whl") for f in others), others
    assert [f for f in others if f.startswith("wheels/common/installer/")] == [
        f for f in others if "/uv-" in f]


def test_manifest_matches_the_wheels_and_names_the_real_pins(docker_engine, built):
    files = wheels_files(docker_engine, built.wheels)
    manifest = json.loads(files["wheels/manifest.json"])
    for wheel in manifest["wheels"]:
        path = f"wheels/{wheel['layer']}/{wheel['filename']}"
        assert files[path] == wheel["sha256"], path
    by_name = {w["name"]: w for w in manifest["wheels"]}
    assert by_name["amd-aiter"]["layer"] == "arch" and by_name["atom"]["layer"] == "atom"
    # The real packages at the pinned commits, with versions setuptools_scm derived from their history.
    assert by_name["amd-aiter"]["version"].startswith("0.1.20.dev38+g79366eb8")
    assert "+g181b0f46" in by_name["atom"]["version"] and by_name["atom"]["version"] != "0.0.0"
    assert manifest["sources"]["aiter"]["sha"] == AITER_REF and manifest["sources"]["atom"]["sha"] == ATOM_REF
    assert manifest["sources"]["aiter"]["describe"] == "v0.1.19-38-g79366eb"
    assert manifest["arch"] == built.variant.arch and manifest["ck_mode"] == built.variant.ck_mode
    assert manifest["aiter_triton_only"] is True and manifest["prebuild_kernels"] is False


def test_requirement_files_pin_every_wheel_by_hash(docker_engine, built):
    files = wheels_files(docker_engine, built.wheels)
    manifest = json.loads(files["wheels/manifest.json"])
    for layer in ("common", "atom", "arch"):
        lines = files[f"wheels/{layer}/requirements.txt"].splitlines()
        want = sorted(f"{w['name']}=={w['version']} --hash=sha256:{w['sha256']}" for w in manifest["wheels"]
                      if w["layer"] == layer)
        assert sorted(lines) == want
    installer = manifest["installer"]
    assert files["wheels/common/installer.txt"].strip() == f"uv=={installer['version']} --hash=sha256:{installer['sha256']}"
    assert not [w for w in manifest["wheels"] if w["name"].lower() == "uv"]  # the installer is never a runtime wheel


def test_the_locked_closure_is_exactly_the_lock(docker_engine, built):
    from cleanbuild.upstream import lock

    manifest = json.loads(wheels_files(docker_engine, built.wheels)["wheels/manifest.json"])
    locked = lock.packages(lock.lock_paths(PINS)[0])
    deps = {w["name"].lower().replace("_", "-"): w["version"] for w in manifest["wheels"]
            if w["component"] in ("deps", "flydsl")}
    assert deps == {name.replace("_", "-"): version for name, version in locked.items()}
    assert manifest["lock_sha256"] == lock.digest(PINS)


def test_clean_image_labels_and_environment(docker_engine, built):
    image = docker_engine.images.get(built.record.clean_id)
    labels, env = image.labels, dict(e.split("=", 1) for e in image.attrs["Config"]["Env"])
    assert labels["io.atom-build.arch"] == built.variant.arch
    assert labels["io.atom-build.ck-mode"] == built.variant.ck_mode
    assert labels["io.atom-build.commit.aiter"].startswith(AITER_REF)
    assert labels["io.atom-build.lock-digest"].startswith("sha256:")
    assert env["GPU_ARCHS"] == built.variant.arch and env["PYTORCH_ROCM_ARCH"] == built.variant.arch
    assert env["ATOM_BUILD_CK_MODE"] == built.variant.ck_mode
    assert env["PATH"].startswith("/opt/venv/bin:")
    assert ("ATOM_CK_FREE" in env) is built.variant.ck_free
    # ATOM's own switch, set where it moves fp8 block-scale linears to a kernel a CK-free image has (Triton)
    assert env.get("ATOM_FP8_BLOCKSCALE_WEIGHT_PRESHUFFLE") == ("0" if built.variant.ck_free else None)


def test_versions_json_names_versions_and_full_shas(docker_engine, built):
    raw = image_json(docker_engine, built.record.clean_id, metadata.VERSIONS_PATH)
    facts = metadata.read_versions(raw, built.clean)
    manifest = image_json(docker_engine, built.record.clean_id, metadata.MANIFEST_PATH)
    by_name = {w["name"]: w["version"] for w in manifest["wheels"]}
    assert facts.packages["aiter"] == by_name["amd-aiter"] and facts.packages["atom"] == by_name["atom"]
    assert facts.sources["aiter"].sha == AITER_REF and facts.sources["atom"].sha == ATOM_REF
    assert facts.arch == built.variant.arch and facts.ck_mode == built.variant.ck_mode
    assert facts.rocm is None  # the stand-in base has no ROCm: the report says so, the tag says rocmna
    structure = image_json(docker_engine, built.record.clean_id, "/opt/atom-build/structure.json")
    assert structure["ok"], structure["problems"]


AUDIT = r"""
import importlib.metadata as md, json, os, shutil, glob
print(json.dumps({
    "binaries": {b: shutil.which(b) for b in ("git", "gcc", "cc", "c++", "g++", "clang", "make")},
    "caches": sorted(p for p in ("/root/.cache", os.path.expanduser("~/.cache/pip"), os.path.expanduser("~/.cache/uv"))
                     if os.path.exists(p)) + glob.glob("/tmp/pip-*") + glob.glob("/tmp/uv*"),
    "dists": {d.metadata["Name"]: d.version for d in md.distributions()},
    "installed_by": {d.metadata["Name"]: (d.read_text("INSTALLER") or "").strip() for d in md.distributions()},
    "uv": sorted({p for b in ("uv", "uvx") for p in [shutil.which(b)] if p} | {p for p in ("/opt/venv/bin/uv", "/opt/venv/bin/uvx") if os.path.exists(p)}),
    "leftovers": [p for p in ("/wheels", "/opt/atom-build-scripts") if os.path.exists(p) and os.listdir(p)],
    "tmp": sorted(os.path.join(d, f) for d, _, files in os.walk("/tmp") for f in files),
}))
"""


@pytest.fixture(scope="module")
def inside(docker_engine, built) -> dict:
    return json.loads(run_in(docker_engine, built.record.clean_id, ["python", "-c", AUDIT]))


def test_no_compiler_git_pip_cache_or_leftovers(inside):
    assert {b: p for b, p in inside["binaries"].items() if p} == {}
    assert inside["caches"] == [] and inside["leftovers"] == [] and inside["tmp"] == []


def test_no_installer_left_in_the_clean_image(inside):
    assert inside["uv"] == []
    assert "uv" not in {name.lower() for name in inside["dists"]}


def test_installed_exactly_the_manifest_by_uv(inside, docker_engine, built):
    manifest = image_json(docker_engine, built.record.clean_id, metadata.MANIFEST_PATH)
    dists = {name.lower().replace("_", "-"): v for name, v in inside["dists"].items()}
    for wheel in manifest["wheels"]:
        assert dists.get(wheel["name"].lower().replace("_", "-")) == wheel["version"], wheel["name"]
    assert not [d for d in dists if d.startswith("nvidia-")]
    assert set(dists) - {w["name"].lower().replace("_", "-") for w in manifest["wheels"]} <= {"pip"}
    by = {name.lower().replace("_", "-"): i for name, i in inside["installed_by"].items()}
    assert {by[w["name"].lower().replace("_", "-")] for w in manifest["wheels"]} == {"uv"}


def test_one_venv_layer_serves_every_arch_and_ck_mode(docker_engine, offline_builds):
    """The arch-independent closure is ONE layer, the same digest in gfx950 CK-free and gfx942 CK: stored once."""
    images = [b.record.clean_id for b in offline_builds.values()]
    a, b = (engine.layers(docker_engine, image) for image in images)
    assert a[:3] == b[:3]  # the stand-in base, the venv layer and ATOM's: the same digests, in the same place
    assert a[3:] != b[3:]  # above them, each arch's own layers (aiter)
    oldest_first = list(reversed(docker_engine.api.history(images[0])))
    venv = next(h for h in oldest_first if "install.sh /wheels/common /wheels/common/requirements.txt" in h["CreatedBy"])
    assert venv["Size"] == max(h["Size"] for h in oldest_first)  # and it is the big one (torch and the closure)


def test_patches_applied_to_the_real_files_in_the_image(docker_engine, built):
    report = image_json(docker_engine, built.record.candidate_id, metadata.PATCHES_PATH)
    outcomes = {p["name"]: p["outcome"] for p in report["patches"]}
    assert outcomes == {"tuned-gemm-hipblaslt": "applied", "no-asm-gemm-gfx950": "applied",
                        "jit-core-runtime-error": "upstream-fixed", "atom-ck-free-triton-gemm": "applied",
                        "atom-ck-free-triton-moe": "applied", "atom-ck-free-triton-norm": "applied",
                        "atom-ck-free-native-act": "applied", "atom-ck-free-native-topk": "applied"}
    site = run_in(docker_engine, built.record.candidate_id,
                  ["python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    linear = run_in(docker_engine, built.record.candidate_id, ["cat", f"{site}/atom/model_ops/linear.py"])
    tuned = run_in(docker_engine, built.record.candidate_id, ["cat", f"{site}/aiter/tuned_gemm.py"])
    moe = run_in(docker_engine, built.record.candidate_id, ["cat", f"{site}/atom/model_ops/moe.py"])
    assert "# atom-build(atom-ck-free-triton-gemm):" in linear and "envs.ATOM_CK_FREE" in linear
    norm = run_in(docker_engine, built.record.candidate_id, ["cat", f"{site}/atom/model_ops/layernorm.py"])
    assert "# atom-build(atom-ck-free-triton-moe):" in moe and "def ck_free_triton_experts(" in moe
    assert "# atom-build(atom-ck-free-triton-norm):" in norm and "def ck_free_rmsnorm_with_add(" in norm
    assert "# atom-build(tuned-gemm-hipblaslt):" in tuned and "@_atom_build_no_asm_gfx950" in tuned
    listing = run_in(docker_engine, built.record.candidate_id, ["sh", "-c", "ls -A /tmp; python -c 'import patches' 2>&1 || true"])
    assert "atom-build-patches" not in listing and "No module named 'patches'" in listing


def test_cpu_smoke_generates_ten_token_ids(docker_engine, built, tmp_path_factory):
    model = make_tiny_model(tmp_path_factory.mktemp("tiny-model"))
    out = run_in(docker_engine, built.record.candidate_id,
                 ["python", "/opt/atom-build/smoke.py", "cpu", "--model", "/model", "--min-tokens", "10"],
                 {str(model): "/model"})
    result = json.loads(next(ln for ln in out.splitlines() if ln.startswith("SMOKE_RESULT ")).removeprefix("SMOKE_RESULT "))
    assert result["passed"] and result["new_tokens"] == 10, result
    assert result["atom_entry_ok"] and "ATOM's engine generating" in result["not_proved"][0]


# ---- failures that must stop a build, each with the line that names why ------------------------------------

def test_prebuilt_kernels_asked_but_absent_fails(offline_builds):
    built = offline_builds["gfx950-ckfree"]
    with pytest.raises(BuildFailed) as info:
        build_with(built.plan.wheels, built.plan.options, PREBUILD_KERNELS="1")
    assert "holds no compiled aiter/jit/*.so for gfx950" in str(info.value)


def test_clean_refuses_a_list_of_archs(offline_builds):
    built = offline_builds["gfx950-ckfree"]
    with pytest.raises(BuildFailed) as info:
        build_with(built.plan.clean, built.plan.options, GPU_ARCH="gfx942;gfx950")
    assert "GPU_ARCH must be one arch" in Path(str(info.value).rsplit("Full log: ", 1)[1]).read_text()


@pytest.mark.parametrize("tampered", ["runtime", "installer"])
def test_clean_refuses_a_tampered_hash(docker_engine, offline_builds, tmp_path, tampered):
    """A hash that does not match its wheel stops the install: uv for a runtime wheel, pip for uv itself."""
    built = offline_builds["gfx950-ckfree"]
    files = wheels_files(docker_engine, built.wheels)
    name = "installer.txt" if tampered == "installer" else "requirements.txt"
    text = files[f"wheels/common/{name}"]
    line = next(ln for ln in text.splitlines() if ln.startswith(("numpy==", "uv==")))
    (tmp_path / name).write_text(text.replace(line, line.split("--hash=sha256:")[0] + "--hash=sha256:" + "0" * 64))
    (tmp_path / "Dockerfile").write_text(f"FROM {built.wheels}\nCOPY {name} /wheels/common/{name}\n")
    tag = f"atom-build/wheels:tampered-{tampered}-test"
    from cleanbuild.core.spec import BuildSpec

    build_with(BuildSpec("tamper", tmp_path / "Dockerfile", tmp_path, None, (), tag), built.plan.options)
    try:
        venv = build_spec(built.plan.unit("venv"))  # the layer that installs /wheels/common
        with pytest.raises(BuildFailed) as info:
            build_with(replace(venv, image=f"atom-build/layer-venv:tampered-{tampered}"), built.plan.options,
                       WHEELS_IMAGE=tag)
        log = Path(str(info.value).rsplit("Full log: ", 1)[1]).read_text()
        assert ("THESE PACKAGES DO NOT MATCH THE HASHES" in log) if tampered == "installer" else ("Hash mismatch" in log)
    finally:
        docker_engine.images.remove(tag, force=True)


def test_missing_local_torch_names_the_component(offline_builds, tmp_path):
    built = offline_builds["gfx950-ckfree"]
    context = tmp_path / "context"
    shutil.copytree(built.plan.prepare.context, context, copy_function=lambda s, d: Path(d).hardlink_to(s))
    for wheel in (context / "local" / "torch").glob("*.whl"):
        wheel.unlink()
    with pytest.raises(BuildFailed) as info:
        build_with(replace(build_spec(built.plan.unit("torch")), context=context), built.plan.options)
    assert "torch: no wheel in the build context's local/torch/" in Path(str(info.value).rsplit("Full log: ", 1)[1]).read_text()
