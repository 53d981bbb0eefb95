"""validation.aiterpkg.adapter against the real aiter source at the pin: its three steps, one claim per test.

Loading aiter's source happens in a process of its own (tests/support/aiter_loaded.py says why: aiter's torch ops
break torch's exit hook); the tests read what it found there."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from validation.aiterpkg import adapter

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def loaded(aiter_pkg, tmp_path_factory) -> dict:
    """What loading the checkout (gfx942 set, every kernel module the checks use) leaves in its process."""
    empty = tmp_path_factory.mktemp("second-source")
    (empty / "ops" / "triton").mkdir(parents=True)
    proc = subprocess.run([sys.executable, "-m", "tests.support.aiter_loaded", str(aiter_pkg), str(empty)],  # noqa: S603
                          cwd=REPO, env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_kernel_modules_import_from_the_source(loaded, aiter_pkg):
    assert loaded["files"] and all(f.startswith(str(aiter_pkg)) for f in loaded["files"].values())


def test_aiter_init_never_runs_so_nothing_jit_builds(loaded):
    assert loaded["jit_core_imported"] is False


def test_dtypes_is_the_only_stand_in(loaded):
    assert loaded["stand_ins"] == ["aiter.utility.dtypes"]


def _file_entry(aiter_pkg, arch: str, key: str) -> dict:
    path = aiter_pkg / "ops" / "triton" / "configs" / "gemm" / f"{arch}-GEMM-A16W16.json"
    return json.loads(path.read_text())[key]


@pytest.mark.parametrize(("before", "target"), [("gfx950", "gfx942"), ("gfx942", "gfx950")])
def test_set_arch_makes_aiter_read_the_targets_config_file(loaded, aiter_pkg, before, target):
    config = loaded["configs"][f"{before}>{target}"]
    entry = _file_entry(aiter_pkg, target, "M_LEQ_128")
    assert {k: config[k] for k in entry} == entry


@pytest.mark.parametrize(("arch", "dtype"), [("gfx942", "float8_e4m3fnuz"), ("gfx950", "float8_e4m3fn")])
def test_the_dtypes_stand_in_gives_the_arch_its_fp8(loaded, arch, dtype):
    assert loaded["fp8"][arch] == f"torch.{dtype}"


CONFIG = {"BLOCK_SIZE_M": 64, "num_warps": 4, "num_stages": 2, "waves_per_eu": 2, "matrix_instr_nonkdim": 16,
          "kpack": 2}


@pytest.mark.parametrize("backend", ["cuda", "interpreter"])
def test_amd_only_launch_options_are_dropped_off_hip(backend):
    kept, dropped = adapter.launch_config(CONFIG, backend)
    assert (sorted(dropped), kept) == (["kpack", "matrix_instr_nonkdim", "waves_per_eu"],
                                       {"BLOCK_SIZE_M": 64, "num_warps": 4, "num_stages": 2})


def test_nothing_is_dropped_on_hip():
    assert adapter.launch_config(CONFIG, "hip") == (CONFIG, {})


def test_the_amd_only_names_are_hip_options():
    from triton.backends.amd.compiler import HIPOptions

    assert adapter.amd_only_options() <= set(HIPOptions.__dataclass_fields__)


def test_no_amd_only_name_is_a_cuda_option():
    from triton.backends.nvidia.compiler import CUDAOptions

    assert not adapter.amd_only_options() & set(CUDAOptions.__dataclass_fields__)


def test_a_second_source_is_refused(loaded):
    assert "aiter is already imported in this process" in loaded["second_source"]


def test_a_folder_without_aiter_is_refused(stash_aiter_modules, tmp_path):
    with pytest.raises(adapter.AdapterError, match="no aiter package here"):
        adapter.import_source(tmp_path)
