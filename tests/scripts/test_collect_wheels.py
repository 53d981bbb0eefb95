"""docker/scripts/collect_wheels.py (the wheels stage's checks and records) as a library, on tiny wheels.

The build arguments reach it as environment variables, exactly as Dockerfile.wheels passes them (ARG -> env)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.support.collect_stage import collect
from tests.support.scripts import load_script
from tests.support.upstream import AITER_PIN, ATOM_PIN
from tests.support.wheels import make_wheel

cw = load_script("collect_wheels")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- collect --------------------------------------------------------------------------------------------------

def test_collect_writes_hash_pinned_requirements_per_layer(stage):
    errors, out = collect(stage)
    common = (out / "common" / "requirements.txt").read_text().splitlines()
    atom = (out / "atom" / "requirements.txt").read_text().splitlines()
    arch = (out / "arch" / "requirements.txt").read_text().splitlines()
    wheel = {p.name.split("-")[0]: p for p in stage.rglob("*.whl")}
    assert errors == []
    assert common == [f"{n}=={v} --hash=sha256:{sha256(wheel[d])}" for n, v, d in (
        ("flydsl", "0.2.4", "flydsl"), ("numpy", "2.3.4", "numpy"),
        ("torch", "2.13.0", "torch"), ("triton", "3.6.0", "triton"))]
    assert atom == [f"atom==0.1.1.dev1+g181b0f46d --hash=sha256:{sha256(wheel['atom'])}"]
    assert arch == [f"amd-aiter==0.1.20.dev38+g79366eb81 --hash=sha256:{sha256(wheel['amd_aiter'])}"]


def test_collect_writes_the_manifest(stage):
    errors, out = collect(stage)
    manifest = json.loads((out / "manifest.json").read_text())
    assert errors == []
    assert (manifest["schema"], manifest["arch"], manifest["ck_mode"], manifest["lock_sha256"]) == (
        2, "gfx942", "ckfree", "sha256:" + "ab" * 32)
    assert manifest["component_keys"] == {"torch": "1" * 64, "atom": "2" * 64}
    assert {w["name"]: (w["component"], w["layer"]) for w in manifest["wheels"]} == {
        "amd-aiter": ("aiter", "arch"), "atom": ("atom", "atom"), "flydsl": ("flydsl", "common"),
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


def test_a_wheel_built_from_an_sdist_is_part_of_the_closure_in_the_common_layer(stage):
    make_wheel(stage / "sdists", "zmq", "0.0.0")
    errors, out = collect(stage)
    manifest = json.loads((out / "manifest.json").read_text())
    assert errors == []
    assert {w["name"]: (w["component"], w["layer"]) for w in manifest["wheels"]}["zmq"] == ("deps", "common")


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
    code = cw.main(["collect", "--in", str(stage), "--out", str(stage.parent / "out")])
    assert (code, capsys.readouterr().err.splitlines()) == (1, [
        f"collect_wheels: error: missing wheel for component 'atom' (from git:/local/repos/atom.git@{ATOM_PIN}): "
        "its stage produced none"])


