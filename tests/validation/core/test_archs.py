"""validation.core.archs: the one table of arch facts and CK modes, and the modules that read it."""

import ast
import sys
from pathlib import Path

import pytest
import torch

from validation.core import archs
from validation.core.archs import (
    ArchFacts,
    arch_for_fp8_dtype,
    ck_mode_from_env,
    get,
    resolve,
)
from validation.core.device import DeviceInfo, fp8_native

EXPECTED = {
    "gfx942": ArchFacts("gfx942", "float8_e4m3fnuz", 240.0, 65536, {"MI300X": 304, "MI325X": 304, "MI308X": 80},
                        304, "MI300X/MI325X/MI308X", "gfx942", "MI300X"),
    "gfx950": ArchFacts("gfx950", "float8_e4m3fn", 448.0, 163840, {"MI350X": 256, "MI355X": 256}, 256,
                        "MI350X/MI355X", "gfx950", "MI350X"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_mission_facts(name):
    assert get(name) == EXPECTED[name]


@pytest.mark.parametrize(("name", "kib"), [("gfx942", 64), ("gfx950", 160)])
def test_lds_kib(name, kib):
    assert get(name).lds_kib == kib


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fp8_max_is_the_torch_types_max(name):
    facts = get(name)
    assert torch.finfo(getattr(torch, facts.fp8_dtype)).max == facts.fp8_max


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config_prefix_names_aiters_files_at_the_pin(aiter_pkg, name):
    gemm = aiter_pkg / "ops" / "triton" / "configs" / "gemm"
    assert (gemm / f"{get(name).aiter_config_prefix}-GEMM-A16W16.json").is_file()


def test_unknown_arch_names_the_supported_ones():
    with pytest.raises(ValueError, match="supported: gfx942, gfx950"):
        get("gfx90a")


@pytest.mark.parametrize(("dtype", "arch"), [("float8_e4m3fnuz", "gfx942"), ("float8_e4m3fn", "gfx950"),
                                             ("float8_e5m2", None)])
def test_arch_for_fp8_dtype(dtype, arch):
    assert arch_for_fp8_dtype(dtype) == arch


def test_archs_imports_only_the_standard_library():
    tree = ast.parse(Path(archs.__file__).read_text())
    imported = {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported - {"__future__"} <= set(sys.stdlib_module_names)


@pytest.mark.parametrize(("env", "mode"), [
    ({}, None),
    ({"ATOM_BUILD_CK_MODE": "ck"}, "ck"),
    ({"ATOM_BUILD_CK_MODE": "ckfree", "ATOM_CK_FREE": "1"}, "ckfree"),
    ({"ATOM_CK_FREE": "1"}, "ckfree"),
    ({"ATOM_CK_FREE": "0"}, None),
])
def test_ck_mode_from_env(env, mode):
    assert ck_mode_from_env(env) == mode


@pytest.mark.parametrize(("env", "why"), [({"ATOM_BUILD_CK_MODE": "full"}, "not one of ck, ckfree"),
                                          ({"ATOM_BUILD_CK_MODE": "ck", "ATOM_CK_FREE": "1"}, "contradicts")])
def test_a_broken_ck_environment_is_an_error(env, why):
    with pytest.raises(ValueError, match=why):
        ck_mode_from_env(env)


def test_auto_takes_the_devices_arch():
    assert resolve("auto", "gfx950", "MI355X") is get("gfx950")


def test_auto_without_an_amd_gpu_is_an_error():
    with pytest.raises(ValueError, match="--arch auto needs an AMD GPU"):
        resolve("auto", None, "cpu")


@pytest.mark.parametrize(("gcn", "dtype", "native"), [("gfx942", "float8_e4m3fnuz", True),
                                                      ("gfx942", "float8_e4m3fn", False),
                                                      ("gfx950", "float8_e4m3fn", True)])
def test_native_fp8_on_amd_follows_the_table(gcn, dtype, native):
    info = DeviceInfo("cuda", "amd", "MI300X", gcn, 304, None)
    assert fp8_native(dtype, info)[0] is native
