"""docker/scripts/collect_wheels.py (the wheels stage's checks and records) as a library, on tiny wheels.

The build arguments reach it as environment variables, exactly as Dockerfile.wheels passes them (ARG -> env)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cleanbuild.profiles import PROFILE_DIR
from tests.support.scripts import load_script
from tests.support.upstream import AITER_HEAD, AITER_PIN, ATOM_PIN
from tests.support.wheels import make_wheel

ARGS = {"GPU_ARCH": "gfx942", "ENABLE_CK": "0", "PREBUILD_KERNELS": "0", "AITER_TRITON_ONLY": "1",
        "TORCH_SOURCE": "local", "TORCH_VERSION": "2.13.0", "TRITON_SOURCE": "pypi", "TRITON_PACKAGE": "triton",
        "TRITON_VERSION": "3.6.0", "MORI_SOURCE": "none", "AITER_REPO": "/local/repos/aiter.git", "AITER_REF": AITER_PIN,
        "ATOM_REPO": "/local/repos/atom.git", "ATOM_REF": ATOM_PIN, "INSTALLER_SOURCE": "none"}
UNSET = ("TORCHVISION_VERSION", "TORCHAUDIO_VERSION", "TORCH_INDEX_URL", "MORI_PACKAGE", "MORI_VERSION", "MORI_REPO",
         "MORI_REF", "INSTALLER_PACKAGE", "INSTALLER_VERSION")




cw = load_script("collect_wheels")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def stage(tmp_path, monkeypatch) -> Path:
    """/in as the collect stage mounts it: one folder per component stage, each with its wheels; and /lock."""
    for key, value in ARGS.items():
        monkeypatch.setenv(key, value)
    for key in UNSET:
        monkeypatch.delenv(key, raising=False)
    root = tmp_path / "in"
    make_wheel(root / "torch", "torch", "2.13.0", {"torch/__init__.py": b"# torch\n"})
    make_wheel(root / "triton", "triton", "3.6.0", {"triton/__init__.py": b"# triton\n"})
    make_wheel(root / "deps", "numpy", "2.3.4")
    make_wheel(root / "deps", "flydsl", "0.2.4")
    make_wheel(root / "atom", "atom", "0.1.1.dev1+g181b0f46d")
    make_wheel(root / "aiter", "amd-aiter", "0.1.20.dev38+g79366eb81", {"aiter/__init__.py": b"", "aiter/jit/core.py": b""})
    for name, sha in (("aiter", AITER_PIN), ("atom", ATOM_PIN)):
        (root / name / "SOURCE.json").write_text(json.dumps({"sha": sha, "date": "2026-08-03T00:00:00+00:00",
                                                             "describe": "v0", "repo": f"/local/repos/{name}.git"}))
    for name in ("mori", "mori-arch", "installer"):
        (root / name).mkdir()
    lock = tmp_path / "lock"
    lock.mkdir()
    (lock / "runtime.txt").write_text("numpy==2.3.4\n")
    (lock / "build.txt").write_text("wheel==0.45.1\n")
    return root


def collect(stage: Path) -> tuple[list[str], Path]:
    out = stage.parent / "collected"
    return cw.collect(stage, out, stage.parent / "lock"), out


# ---- collect --------------------------------------------------------------------------------------------------

def test_collect_writes_hash_pinned_requirements_per_layer(stage):
    errors, out = collect(stage)
    common = (out / "common" / "requirements.txt").read_text().splitlines()
    arch = (out / "arch" / "requirements.txt").read_text().splitlines()
    wheel = {p.name.split("-")[0]: p for p in stage.rglob("*.whl")}
    assert errors == []
    assert common == [f"{n}=={v} --hash=sha256:{sha256(wheel[d])}" for n, v, d in (
        ("atom", "0.1.1.dev1+g181b0f46d", "atom"), ("flydsl", "0.2.4", "flydsl"), ("numpy", "2.3.4", "numpy"),
        ("torch", "2.13.0", "torch"), ("triton", "3.6.0", "triton"))]
    assert arch == [f"amd-aiter==0.1.20.dev38+g79366eb81 --hash=sha256:{sha256(wheel['amd_aiter'])}"]


def test_collect_writes_the_manifest(stage):
    errors, out = collect(stage)
    manifest = json.loads((out / "manifest.json").read_text())
    lock_digest = "sha256:" + hashlib.sha256(b"numpy==2.3.4\nwheel==0.45.1\n").hexdigest()
    assert errors == []
    assert (manifest["schema"], manifest["arch"], manifest["ck_mode"], manifest["lock_sha256"]) == (
        2, "gfx942", "ckfree", lock_digest)
    assert {w["name"]: (w["component"], w["layer"]) for w in manifest["wheels"]} == {
        "amd-aiter": ("aiter", "arch"), "atom": ("atom", "common"), "flydsl": ("flydsl", "common"),
        "numpy": ("deps", "common"), "torch": ("torch", "common"), "triton": ("triton", "common")}
    assert (manifest["sources"]["aiter"]["sha"], manifest["sources"]["atom"]["sha"]) == (AITER_PIN, ATOM_PIN)
    assert manifest["expected"]["aiter"] == f"git:/local/repos/aiter.git@{AITER_PIN}"


def test_a_missing_component_is_named_with_where_it_comes_from(stage):
    next((stage / "atom").glob("*.whl")).unlink()
    errors, out = collect(stage)
    assert errors == [f"missing wheel for component 'atom' (from git:/local/repos/atom.git@{ATOM_PIN}): "
                      "its stage produced none"]
    assert not out.exists()


def test_a_component_the_arguments_leave_out_is_not_expected(stage, monkeypatch):
    monkeypatch.setenv("TRITON_SOURCE", "none")
    next((stage / "triton").glob("*.whl")).unlink()
    assert collect(stage)[0] == []


def test_torchvision_is_expected_when_its_version_is_given(stage, monkeypatch):
    monkeypatch.setenv("TORCHVISION_VERSION", "0.26.0")
    assert collect(stage)[0] == ["missing wheel for component 'torchvision' (from local:local/torch torchvision): "
                                 "its stage produced none"]


def test_the_same_project_twice_is_refused(stage):
    make_wheel(stage / "deps", "numpy", "2.2.0", {"numpy2/__init__.py": b""})
    errors, _ = collect(stage)
    assert errors == ["project 'numpy' comes twice: numpy-2.2.0-py3-none-any.whl and numpy-2.3.4-py3-none-any.whl"]


def test_two_distributions_owning_one_file_are_refused_naming_both(stage):
    make_wheel(stage / "deps", "alpha", "1.0", {"shared/util.py": b"a"})
    make_wheel(stage / "deps", "beta", "1.0", {"shared/util.py": b"b"})
    errors, _ = collect(stage)
    assert len(errors) == 1 and errors[0].startswith("alpha and beta both install shared/util.py")


def test_two_tritons_owning_triton_are_refused_naming_both(stage):
    make_wheel(stage / "deps", "triton-rocm", "3.6.0", {"triton/__init__.py": b"# rocm\n"})
    errors, _ = collect(stage)
    assert [e for e in errors if e.startswith("triton and triton-rocm both install triton/__init__.py")]
    assert "two tritons in the closure: triton and triton-rocm. To fix, keep exactly one (components.triton)" in errors


def test_prebuilt_kernels_must_be_in_the_aiter_wheel(stage, monkeypatch):
    monkeypatch.setenv("PREBUILD_KERNELS", "1")
    errors, _ = collect(stage)
    assert len(errors) == 1
    assert errors[0].startswith("component 'aiter': PREBUILD_KERNELS=1 but amd_aiter-0.1.20.dev38+g79366eb81-py3-none-any"
                                ".whl") and "holds no compiled aiter/jit/*.so for gfx942" in errors[0]


def test_prebuilt_kernels_of_another_arch_do_not_count(stage, monkeypatch):
    monkeypatch.setenv("PREBUILD_KERNELS", "1")
    aiter = next((stage / "aiter").glob("*.whl"))
    aiter.unlink()
    make_wheel(stage / "aiter", "amd-aiter", "0.1.20", {"aiter/jit/module_gemm.so": b"\x7fELF amdgcn-amd-amdhsa--gfx950"})
    assert "holds no compiled aiter/jit/*.so for gfx942" in collect(stage)[0][0]


def test_prebuilt_kernels_for_the_arch_pass(stage, monkeypatch):
    monkeypatch.setenv("PREBUILD_KERNELS", "1")
    next((stage / "aiter").glob("*.whl")).unlink()
    make_wheel(stage / "aiter", "amd-aiter", "0.1.20", {"aiter/jit/module_gemm.so": b"\x7fELF amdgcn-amd-amdhsa--gfx942:xnack-"})
    errors, out = collect(stage)
    assert errors == [] and json.loads((out / "manifest.json").read_text())["prebuild_kernels"] is True


def test_an_unreadable_wheel_is_named(stage):
    (stage / "deps" / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    assert collect(stage)[0][0].startswith("unreadable wheel broken-1.0-py3-none-any.whl (deps)")


# ---- the lock -------------------------------------------------------------------------------------------------

def test_lock_check_accepts_the_lock_made_for_these_refs():
    assert cw.lock_check(PROFILE_DIR / "offline.lock", AITER_PIN, ATOM_PIN) == []


def test_lock_check_refuses_a_lock_made_for_other_refs():
    problems = cw.lock_check(PROFILE_DIR / "offline.lock", AITER_HEAD, ATOM_PIN)
    assert problems == [f"the lock was made for aiter {AITER_PIN}, the profile pins {AITER_HEAD}. "
                        "To fix, run `invoke lock` and commit the lock with the pin"]


def test_lock_check_refuses_a_file_without_the_header(tmp_path):
    lock = tmp_path / "runtime.txt"
    lock.write_text("numpy==2.3.4\n")
    with pytest.raises(SystemExit, match="has no atom-build-lock header"):
        cw.lock_check(lock, AITER_PIN, ATOM_PIN)


def test_split_lock_puts_the_sdist_block_apart_with_its_hashes(tmp_path):
    binary, source = tmp_path / "binary.txt", tmp_path / "source.txt"
    cw.split_lock(PROFILE_DIR / "offline.lock", {"zmq"}, binary, source)
    assert source.read_text() == ("zmq==0.0.0 \\\n"
                                  "    --hash=sha256:6b1a1de53338646e8c8405803cffb659e8eb7bb02fff4c9be62a7acfac8370c9\n")


def test_split_lock_keeps_every_other_block_for_the_binary_download(tmp_path):
    binary, source = tmp_path / "binary.txt", tmp_path / "source.txt"
    lock = PROFILE_DIR / "offline.lock"
    cw.split_lock(lock, {"zmq"}, binary, source)
    names = [line.split("==")[0] for line in lock.read_text().splitlines() if line[:1].isalnum()]
    kept = [line.split("==")[0] for line in binary.read_text().splitlines() if line[:1].isalnum()]
    assert kept == [n for n in names if n != "zmq"] and "pyzmq" in kept
    assert binary.read_text().count("--hash=sha256:") == lock.read_text().count("--hash=sha256:") - 1


def test_split_lock_refuses_a_build_name_the_lock_lacks(tmp_path):
    with pytest.raises(SystemExit, match="DEPS_BUILD names not-in-lock, which the lock lacks"):
        cw.split_lock(PROFILE_DIR / "offline.lock", {"zmq", "not-in-lock"}, tmp_path / "b", tmp_path / "s")


# ---- torch's triton -------------------------------------------------------------------------------------------

def test_torch_triton_reads_the_torch_wheels_requirement(tmp_path):
    make_wheel(tmp_path, "torch", "2.11.0+rocm7.2", requires=(
        "filelock", 'triton-rocm==3.6.0; platform_system == "Linux" and platform_machine == "x86_64"',
        'triton==3.5.0; extra == "old"', "sympy>=1.13.3"))
    assert cw.torch_triton(tmp_path) == "triton-rocm==3.6.0"


def test_torch_triton_reads_the_old_parenthesised_form(tmp_path):
    make_wheel(tmp_path, "torch", "2.6.0+rocm6.2", requires=('pytorch-triton-rocm (==3.2.0) ; platform_system == "Linux"',))
    assert cw.torch_triton(tmp_path) == "pytorch-triton-rocm==3.2.0"


def test_torch_without_a_triton_requirement_is_an_error(tmp_path):
    make_wheel(tmp_path, "torch", "2.13.0", requires=("filelock",))
    with pytest.raises(SystemExit, match="requires no triton. To fix, set components.triton source to pypi"):
        cw.torch_triton(tmp_path)


def test_command_line_collect_exits_1_with_one_line_per_problem(stage, capsys):
    next((stage / "atom").glob("*.whl")).unlink()
    code = cw.main(["collect", "--in", str(stage), "--out", str(stage.parent / "out"), "--lock", str(stage.parent / "lock")])
    assert (code, capsys.readouterr().err.splitlines()) == (1, [
        f"collect_wheels: error: missing wheel for component 'atom' (from git:/local/repos/atom.git@{ATOM_PIN}): "
        "its stage produced none"])
