import json

import pytest

from validation.aiterpkg.config_lds import (
    configs_in,
    dtype_bytes,
    estimate,
    lds_buffers,
)
from validation.checks import lds_budget


def test_estimator_by_hand():
    # bf16 128x128x64, 2 stages: one LDS buffer on AMD, two on NVIDIA.
    assert estimate(128, 128, 64, 2, 2, 2, "amd") == (128 * 64 + 64 * 128) * 2
    assert estimate(128, 128, 64, 2, 2, 2, "nvidia") == (128 * 64 + 64 * 128) * 2 * 2
    assert estimate(64, 64, 64, 1, 1, 1, "nvidia") == 8192  # unpipelined: A+B once
    assert lds_buffers(3, "amd") == 2 and lds_buffers(1, "amd") == 1
    # Unpipelined on AMD: the larger tile (aiter's MI300X 64x256x128 bf16 stages=1 config fits 64 KiB).
    assert estimate(64, 256, 128, 2, 2, 1, "amd") == 64 * 1024


@pytest.mark.parametrize(("name", "sizes"), [("MI300X-GEMM-A16W16.json", (2, 2)), ("MI350X-GEMM-A8WFP4.json", (1, 0.5)),
                                             ("MI350X-GEMM-A16W8_BLOCKSCALE.json", (2, 1)), ("MI300X-MOE.json", None),
                                             ("gfx950-GEMM-AFP8WFP8.json", (1, 1))])
def test_dtype_from_file_name(name, sizes):
    assert dtype_bytes(name) == sizes


def test_configs_found_at_any_depth():
    doc = {"small": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64},
           "nested": {"gemm1": {"BLOCK_SIZE_M": 1, "BLOCK_SIZE_N": 2, "BLOCK_SIZE_K": 3}}, "other": 1}
    assert [k for k, _ in configs_in(doc)] == ["small", "nested.gemm1"]


def _aiter_tree(tmp_path, files: dict):
    """files: path under ops/triton/configs/ -> document (a bare name goes under gemm/)."""
    configs = tmp_path / "aiter" / "ops" / "triton" / "configs"
    for name, doc in files.items():
        path = configs / (name if "/" in name else f"gemm/{name}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))
    return tmp_path / "aiter"


def _cfg(bm, bn, bk, stages):
    return {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "num_stages": stages}


def test_config_over_the_gfx942_budget_fails(tmp_path, cpu_ctx):
    root = _aiter_tree(tmp_path, {"gfx942-GEMM-A16W16.json": {"ok": _cfg(128, 128, 64, 2),
                                                              "big": _cfg(256, 256, 64, 3)},
                                  "gfx950-GEMM-A16W16.json": {"big": _cfg(256, 256, 64, 3)}})
    res = lds_budget.run(cpu_ctx("gfx942", aiter_root=root))
    assert (res.status, res.metrics["over_budget"]) == ("failed", ["gfx942-GEMM-A16W16.json:big=128KiB"])


def test_the_same_config_fits_gfx950_and_only_gfx950_files_are_read(tmp_path, cpu_ctx):
    root = _aiter_tree(tmp_path, {"gfx942-GEMM-A16W16.json": {"big": _cfg(256, 256, 64, 3)},
                                  "gfx950-GEMM-A16W16.json": {"big": _cfg(256, 256, 64, 3)}})
    res = lds_budget.run(cpu_ctx("gfx950", aiter_root=root))
    assert (res.status, res.metrics["files"]) == ("passed", 1)


def test_the_per_arch_triton_folder_is_read_too(tmp_path, cpu_ctx):
    root = _aiter_tree(tmp_path, {"gfx950-GEMM-A16W16.json": {"a": _cfg(64, 64, 64, 2)},
                                  "gfx950/triton/gemm/GEMM-AFP4WFP4.json": {"b": _cfg(256, 256, 256, 2)}})
    res = lds_budget.run(cpu_ctx("gfx950", aiter_root=root))
    assert (res.metrics["files"], res.metrics["max_estimate"]) == (2, 65536)


def test_aiter_before_2026_named_its_files_by_device(tmp_path, cpu_ctx):
    root = _aiter_tree(tmp_path, {"MI300X-GEMM-A16W16.json": {"a": _cfg(64, 64, 64, 2)}})
    res = lds_budget.run(cpu_ctx("gfx942", aiter_root=root))
    assert res.metrics["source"] == "aiter configs gemm/MI300X-*.json (aiter before 2026-01)"


def test_no_config_files_for_the_arch_fails(tmp_path, cpu_ctx):
    root = _aiter_tree(tmp_path, {"gfx950-GEMM-A8W8.json": {"any": _cfg(64, 64, 64, 2)}})
    res = lds_budget.run(cpu_ctx("gfx942", aiter_root=root))
    assert (res.status, res.cases[0].note.startswith("no gemm/gfx942-*.json")) == ("failed", True)


def test_every_config_of_the_pinned_aiter_fits_its_arch(aiter_pkg, cpu_ctx):
    results = {a: lds_budget.run(cpu_ctx(a, aiter_root=aiter_pkg)) for a in ("gfx942", "gfx950")}
    assert {a: r.metrics["over_budget"] for a, r in results.items()} == {"gfx942": [], "gfx950": []}


def test_without_aiter_our_own_configs_are_checked_and_compiler_part_skipped(cpu_ctx):
    res = lds_budget.run(cpu_ctx("gfx942"))
    assert res.status == "passed"
    assert "own kernels" in res.metrics["source"]
    skipped = [c for c in res.cases if c.status == "skipped"]
    assert [c.name for c in skipped] == ["estimate-vs-compiler"]
