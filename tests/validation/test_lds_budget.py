import json

import pytest

from validation.checks import lds_budget
from validation.lds import configs_in, dtype_bytes, estimate, lds_buffers


def test_estimator_by_hand():
    # bf16 128x128x64, 2 stages: one LDS buffer on AMD, two on NVIDIA.
    assert estimate(128, 128, 64, 2, 2, 2, "amd") == (128 * 64 + 64 * 128) * 2
    assert estimate(128, 128, 64, 2, 2, 2, "nvidia") == (128 * 64 + 64 * 128) * 2 * 2
    assert estimate(64, 64, 64, 1, 1, 1, "nvidia") == 8192  # unpipelined: A+B once
    assert lds_buffers(3, "amd") == 2 and lds_buffers(1, "amd") == 1
    # Unpipelined on AMD: the larger tile (aiter's MI300X 64x256x128 bf16 stages=1 config fits 64 KiB).
    assert estimate(64, 256, 128, 2, 2, 1, "amd") == 64 * 1024


@pytest.mark.parametrize(("name", "sizes"), [("MI300X-GEMM-A16W16.json", (2, 2)), ("MI350X-GEMM-A8WFP4.json", (1, 0.5)),
                                             ("MI350X-GEMM-A16W8_BLOCKSCALE.json", (2, 1)), ("MI300X-MOE.json", None)])
def test_dtype_from_file_name(name, sizes):
    assert dtype_bytes(name) == sizes


def test_configs_found_at_any_depth():
    doc = {"small": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64},
           "nested": {"gemm1": {"BLOCK_SIZE_M": 1, "BLOCK_SIZE_N": 2, "BLOCK_SIZE_K": 3}}, "other": 1}
    assert [k for k, _ in configs_in(doc)] == ["small", "nested.gemm1"]


def _aiter_tree(tmp_path, files: dict):
    gemm = tmp_path / "aiter" / "ops" / "triton" / "configs" / "gemm"
    gemm.mkdir(parents=True)
    for name, doc in files.items():
        (gemm / name).write_text(json.dumps(doc))
    return tmp_path / "aiter"


def _cfg(bm, bn, bk, stages):
    return {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "num_stages": stages}


def test_config_over_the_gfx942_budget_fails(tmp_path, cpu_ctx):
    root = _aiter_tree(tmp_path, {"MI300X-GEMM-A16W16.json": {"ok": _cfg(128, 128, 64, 2),
                                                              "big": _cfg(256, 256, 64, 3)},
                                  "MI350X-GEMM-A16W16.json": {"big": _cfg(256, 256, 64, 3)}})
    res = lds_budget.run(cpu_ctx("gfx942", aiter_root=root))
    assert res.status == "failed"
    assert res.metrics["over_budget"] == ["MI300X-GEMM-A16W16.json:big=128KiB"]
    # The same config fits gfx950's 160 KiB, and only MI350X files are read for it.
    res = lds_budget.run(cpu_ctx("gfx950", aiter_root=root))
    assert res.status == "passed" and res.metrics["files"] == 1


def test_no_config_files_for_the_arch_fails(tmp_path, cpu_ctx):
    root = _aiter_tree(tmp_path, {"MI350X-GEMM-A8W8.json": {"any": _cfg(64, 64, 64, 2)}})
    res = lds_budget.run(cpu_ctx("gfx942", aiter_root=root))
    assert res.status == "failed"
    assert "no MI300X-*.json" in res.reason or "no MI300X-*.json" in res.cases[0].note


def test_without_aiter_our_own_configs_are_checked_and_compiler_part_skipped(cpu_ctx):
    res = lds_budget.run(cpu_ctx("gfx942"))
    assert res.status == "passed"
    assert "own kernels" in res.metrics["source"]
    skipped = [c for c in res.cases if c.status == "skipped"]
    assert [c.name for c in skipped] == ["estimate-vs-compiler"]
