"""validation.aiter_adapter against the real aiter source at the pin: its three steps, one claim per test."""

import json
import sys

import pytest

from validation import aiter_adapter
from validation.aiter_triton import KERNELS

PIN_MODULES = [k.module for k in KERNELS.values()] + [k.jit_module for k in KERNELS.values()]


@pytest.fixture(scope="module")
def loaded(aiter_pkg):
    """The stand-in package from the checkout, with gfx942 set, and every kernel module the checks use."""
    aiter_adapter.import_source(aiter_pkg)
    aiter_adapter.set_arch("gfx942", interpreting=True)
    return {name: __import__(name, fromlist=["_"]) for name in PIN_MODULES}


def test_kernel_modules_import_from_the_source(loaded, aiter_pkg):
    assert all(m.__file__.startswith(str(aiter_pkg)) for m in loaded.values())


def test_aiter_init_never_runs_so_nothing_jit_builds(loaded):
    assert "aiter.jit.core" not in sys.modules


def test_dtypes_is_the_only_stand_in(loaded, aiter_pkg):
    def from_source(mod) -> bool:
        paths = [getattr(mod, "__file__", None) or "", *getattr(mod, "__path__", [])]
        return any(p.startswith(str(aiter_pkg)) for p in paths if p)

    aiter_mods = {k: v for k, v in sys.modules.items() if k == "aiter" or k.startswith("aiter.")}
    assert sorted(k for k, m in aiter_mods.items() if not from_source(m)) == ["aiter.utility.dtypes"]


def _file_entry(aiter_pkg, arch: str, key: str) -> dict:
    path = aiter_pkg / "ops" / "triton" / "configs" / "gemm" / f"{arch}-GEMM-A16W16.json"
    return json.loads(path.read_text())[key]


@pytest.mark.parametrize(("before", "target"), [("gfx950", "gfx942"), ("gfx942", "gfx950")])
def test_set_arch_makes_aiter_read_the_targets_config_file(loaded, aiter_pkg, before, target):
    lookup = loaded["aiter.ops.triton._triton_kernels.gemm.basic.gemm_a16w16"]._get_config
    aiter_adapter.set_arch(before, interpreting=True)
    lookup(128, 1000, 1000)  # caches the other arch's answer under an arch-free key
    aiter_adapter.set_arch(target, interpreting=True)
    config, _ = lookup(128, 1000, 1000)
    entry = _file_entry(aiter_pkg, target, "M_LEQ_128")
    assert {k: config[k] for k in entry} == entry


@pytest.mark.parametrize(("arch", "dtype"), [("gfx942", "float8_e4m3fnuz"), ("gfx950", "float8_e4m3fn")])
def test_the_dtypes_stand_in_gives_the_arch_its_fp8(loaded, arch, dtype):
    aiter_adapter.set_arch(arch, interpreting=True)
    assert str(sys.modules["aiter"].dtypes.fp8) == f"torch.{dtype}"


CONFIG = {"BLOCK_SIZE_M": 64, "num_warps": 4, "num_stages": 2, "waves_per_eu": 2, "matrix_instr_nonkdim": 16,
          "kpack": 2}


@pytest.mark.parametrize("backend", ["cuda", "interpreter"])
def test_amd_only_launch_options_are_dropped_off_hip(backend):
    kept, dropped = aiter_adapter.launch_config(CONFIG, backend)
    assert (sorted(dropped), kept) == (["kpack", "matrix_instr_nonkdim", "waves_per_eu"],
                                       {"BLOCK_SIZE_M": 64, "num_warps": 4, "num_stages": 2})


def test_nothing_is_dropped_on_hip():
    assert aiter_adapter.launch_config(CONFIG, "hip") == (CONFIG, {})


def test_the_amd_only_names_are_hip_options():
    from triton.backends.amd.compiler import HIPOptions

    assert aiter_adapter.amd_only_options() <= set(HIPOptions.__dataclass_fields__)


def test_no_amd_only_name_is_a_cuda_option():
    from triton.backends.nvidia.compiler import CUDAOptions

    assert not aiter_adapter.amd_only_options() & set(CUDAOptions.__dataclass_fields__)


def test_a_second_source_is_refused(loaded, tmp_path):
    (tmp_path / "ops" / "triton").mkdir(parents=True)
    with pytest.raises(aiter_adapter.AdapterError, match="already imported"):
        aiter_adapter.import_source(tmp_path)


def test_a_folder_without_aiter_is_refused(stash_aiter_modules, tmp_path):
    with pytest.raises(aiter_adapter.AdapterError, match="no aiter package here"):
        aiter_adapter.import_source(tmp_path)
