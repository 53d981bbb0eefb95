"""tuned-csv-coverage against small hand-written CSVs: coverage, gaps, untuned output, clear failures."""

import csv
import tracemalloc

import pytest

from validation.aiterpkg.tuned_csv import UNTUNED_COLUMNS, index
from validation.checks import tuned_csv_coverage
from validation.core.models import M_BUCKETS

HEADER = "gfx,cu_num,M,N,K,bias,dtype,outdtype,scaleAB,bpreshuffle,libtype,solidx,splitK,us,kernelName\n"


def _row(gfx, cu, m, n, k, lib="hipblaslt"):
    return f"{gfx},{cu},{m},{n},{k},False,torch.bfloat16,torch.bfloat16,False,False,{lib},1,0,1.0,\n"


@pytest.fixture
def small_model(tmp_path):
    """Five distinct (N, K): qkv 256x128, o_proj 128x128, gate_up 512x128, down 128x256, lm_head 1000x128."""
    cfg = {"hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 2, "num_key_value_heads": 1,
           "head_dim": 64, "vocab_size": 1000}
    (tmp_path / "config.json").write_text(__import__("json").dumps(cfg))
    return str(tmp_path / "config.json")


def test_coverage_counts_only_rows_of_the_target_gfx_and_cu(tmp_path, cpu_ctx, small_model):
    rows = [_row("gfx942", 304, m, 256, 128) for m in M_BUCKETS]  # qkv_proj fully tuned
    rows += [_row("gfx950", 304, 1, 128, 128), _row("gfx942", 80, 1, 128, 128)]  # wrong gfx / wrong cu
    path = tmp_path / "tuned.csv"
    path.write_text(HEADER + "".join(rows))
    untuned = tmp_path / "out" / "untuned.csv"
    ctx = cpu_ctx("gfx942", model=small_model, tp=[1], tuned_csv=[str(path)], write_untuned=untuned)
    res = tuned_csv_coverage.run(ctx)
    shapes = 5 * len(M_BUCKETS)  # lm_head, qkv, o_proj, gate_up, down
    assert res.metrics["tp1"] == {"shapes": shapes, "covered": 14, "coverage": round(14 / shapes, 4),
                                  "status": "warning"}
    with untuned.open() as f:
        got = list(csv.reader(f))
    assert tuple(got[0]) == UNTUNED_COLUMNS
    assert len(got) - 1 == shapes - 14
    assert ["1", "128", "128", "False", "torch.bfloat16", "torch.bfloat16", "False"] in got
    assert not any(r[1:3] == ["256", "128"] for r in got[1:])


def test_old_csv_without_gfx_column_keys_on_cu_num(tmp_path, cpu_ctx, small_model):
    path = tmp_path / "tuned.csv"
    path.write_text("M,N,K,bias,dtype,outdtype,scaleAB,cu_num,libtype,solidx,splitK,us,kernelName\n"
                    "1,128,128,False,torch.bfloat16,torch.bfloat16,False,256,asm,1,0,1.0,k\n")
    res = tuned_csv_coverage.run(cpu_ctx("gfx950", model=small_model, tp=[1], tuned_csv=[str(path)]))
    assert res.metrics["tp1"]["covered"] == 1


def test_min_coverage_fails_the_check(tmp_path, cpu_ctx, small_model):
    path = tmp_path / "tuned.csv"
    path.write_text(HEADER)
    res = tuned_csv_coverage.run(cpu_ctx(model=small_model, tp=[1], tuned_csv=[str(path)], min_coverage=0.5))
    assert res.status == "failed"
    assert res.cases[0].note.startswith("0/70 shapes covered")


def test_missing_csv_is_a_clear_failure(tmp_path, cpu_ctx):
    res = tuned_csv_coverage.run(cpu_ctx(tuned_csv=[str(tmp_path / "nope.csv")]))
    assert res.status == "failed"
    assert "tuned CSV not found" in res.reason


@pytest.mark.parametrize(("text", "why"), [("M,N,K\n1,2,3\n", "missing columns cu_num, libtype"),
                                            (HEADER + "gfx942,304,one,2,3,False,x,x,False,False,torch,0,0,1,\n",
                                             "malformed row"),
                                            ("", "missing columns")])
def test_malformed_csv_is_a_clear_failure(tmp_path, cpu_ctx, text, why):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    res = tuned_csv_coverage.run(cpu_ctx(tuned_csv=[str(path)]))
    assert res.status == "failed"
    assert why in res.reason


def test_env_override_is_read_like_aiter(tmp_path, cpu_ctx, monkeypatch, small_model):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(HEADER + _row("gfx942", 304, 1, 256, 128))
    b.write_text(HEADER + _row("gfx942", 304, 2, 256, 128))
    monkeypatch.setenv("AITER_CONFIG_GEMM_BF16", f"{a}:{b}")
    res = tuned_csv_coverage.run(cpu_ctx(model=small_model, tp=[1]))
    assert res.metrics["source"] == "AITER_CONFIG_GEMM_BF16"
    assert res.metrics["tp1"]["covered"] == 2


def test_without_aiter_or_csv_it_is_skipped(cpu_ctx, monkeypatch):
    monkeypatch.delenv("AITER_CONFIG_GEMM_BF16", raising=False)
    res = tuned_csv_coverage.run(cpu_ctx())
    assert res.status == "skipped"
    assert "aiter not installed" in res.reason


def test_a_large_csv_costs_its_target_rows_not_its_size(tmp_path):
    # aiter's merged tuned CSVs reach 110 MB; read whole, one took ~2 GB. 20k rows of another arch (2 MB) plus 100
    # target rows: the reader may hold the target rows (about 170 kB), never the file (a quarter of it at most).
    other = "gfx950,256,{m},7168,2048,False,torch.bfloat16,torch.bfloat16,False,False,asm,12,0,13.37,_ZN5aiter_k\n"
    path = tmp_path / "big.csv"
    with path.open("w") as f:
        f.write(HEADER)
        block = "".join(other.format(m=m) for m in range(1000))
        f.writelines(block for _ in range(20))
        f.writelines(_row("gfx942", 304, m, 4096, 4096) for m in range(1, 101))
    tracemalloc.start()
    try:
        table = index([path], "gfx942", 304)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    size = path.stat().st_size
    assert (len(table), size > 2_000_000, peak < size // 4) == (100, True, True), f"peak {peak} B of a {size} B file"
