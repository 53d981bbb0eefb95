"""Against the real aiter wheel from PyPI (pre-fix code: torch fallback, MI300X/MI350X Triton configs)."""

import csv
import shutil

import pytest

from validation.aiterpkg.tuned_csv import UNTUNED_COLUMNS
from validation.checks import gemm_asm, gemm_hipblaslt, lds_budget, tuned_csv_coverage

pytestmark = pytest.mark.network


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch):
    monkeypatch.delenv("AITER_CONFIG_GEMM_BF16", raising=False)


def test_mi350x_configs_fit_gfx950_lds(aiter_wheel_root, cpu_ctx):
    res = lds_budget.run(cpu_ctx("gfx950", aiter_root=aiter_wheel_root))
    assert res.status == "passed", res.reason
    assert res.metrics["files"] > 50 and res.metrics["configs"] > 300
    assert res.metrics["max_estimate"] <= 160 * 1024


def test_mi300x_configs_fit_gfx942_lds_exactly_at_the_top(aiter_wheel_root, cpu_ctx):
    # The fused FF configs (64x256x128 and 128x256x128 bf16, unpipelined) need their larger tile, 64 KiB:
    # exactly gfx942's LDS. Under an A+B rule they would need 80/96 KiB, yet aiter ships them for MI300X.
    res = lds_budget.run(cpu_ctx("gfx942", aiter_root=aiter_wheel_root))
    assert res.status == "passed", res.metrics.get("over_budget")
    assert res.metrics["max_estimate"] == 64 * 1024 and res.metrics["over_budget"] == []


def test_unpatched_wheel_falls_back_to_torch(aiter_wheel_root, cpu_ctx):
    res = gemm_hipblaslt.run(cpu_ctx("gfx942", aiter_root=aiter_wheel_root))
    case = next(c for c in res.cases if c.name == "untuned bfloat16 M=4099 N=4097 K=4096")
    assert (case.status, case.backend) == ("failed", "aiter-dispatch:torch")
    assert case.note.startswith("reached torch (F.linear), not hipblaslt; aiter's lookup said 'torch'")


def test_hipblaslt_fallback_passes_once_patched(aiter_wheel_root, cpu_ctx, tmp_path):
    copy = tmp_path / "aiter"
    shutil.copytree(aiter_wheel_root, copy, ignore=shutil.ignore_patterns("ops"))
    src = copy / "tuned_gemm.py"
    text = src.read_text()
    assert text.count('default_config["libtype"] = "torch"') == 1
    src.write_text(text.replace('default_config["libtype"] = "torch"', 'default_config["libtype"] = "hipblaslt"'))
    res = gemm_hipblaslt.run(cpu_ctx("gfx942", aiter_root=copy))
    assert next(c for c in res.cases if c.name == "untuned bfloat16 M=4099 N=4097 K=4096").status == "passed"


def test_coverage_against_the_wheel_csvs_and_untuned_format(aiter_wheel_root, cpu_ctx, tmp_path):
    out = tmp_path / "untuned.csv"
    res = tuned_csv_coverage.run(cpu_ctx("gfx942", aiter_root=aiter_wheel_root, model="llama3-8b", tp=[1, 8],
                                         cu_num=80, write_untuned=out))
    assert res.status == "warning"  # 0 of 70 shapes: below the threshold, not "passed"
    assert res.metrics["csv"][0].endswith("configs/bf16_tuned_gemm.csv")
    assert res.metrics["rows_for_target"] == 8  # this wheel's CSV: 8 rows, all MI308X (cu_num 80)
    assert res.metrics["tp1"]["covered"] == 0  # those rows are fp32-out shapes no Llama layer has
    with (aiter_wheel_root / "configs" / "bf16_untuned_gemm.csv").open() as f:
        wheel_header = next(csv.reader(f))
    with out.open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == wheel_header == list(UNTUNED_COLUMNS)
    assert len(rows) - 1 == res.metrics["missing"] > 0


def test_asm_rows_of_the_wheel(aiter_wheel_root, cpu_ctx):
    gfx950 = gemm_asm.run(cpu_ctx("gfx950", aiter_root=aiter_wheel_root))
    assert gfx950.status == "passed" and gfx950.metrics["asm_rows"] == 0
    gfx942 = gemm_asm.run(cpu_ctx("gfx942", aiter_root=aiter_wheel_root, cu_num=80))
    assert gfx942.metrics["asm_rows"] == 8
    assert gfx942.status == "skipped"
