"""The CPU tier: aiter's own Triton kernels at the pin, through the adapter, under TRITON_INTERPRET=1."""

import pytest
import torch

from validation.aiterpkg.triton_ops import AiterTriton, Launch
from validation.checks import aiter_gemm_cases, aiter_moe_cases, moe_triton
from validation.checks.aiter_launch import run_case
from validation.core.archs import get as get_arch
from validation.core.device import detect


@pytest.fixture(scope="module")
def results(aiter_pkg, interpreter_runs_aiter):
    """The aiter cases of gemm-triton and moe-triton per arch on the CPU, with the aiter checkout as --aiter-src.
    Built by the checks' own aiter halves: our kernels' cases, 60% of the checks' time, are read by no test here
    (kernels/test_kernels.py checks them, test_cli.py runs both checks whole)."""
    from validation.checks.context import Context

    out = {}
    for arch in ("gfx942", "gfx950"):
        ctx = Context(arch=get_arch(arch), info=detect("cpu"), aiter_root=aiter_pkg, aiter_from_source=True)
        gemm, _ = aiter_gemm_cases.cases(ctx)
        moe, _ = aiter_moe_cases.cases(ctx, moe_triton.CPU_SHAPES, moe_triton._inputs)
        out[arch] = {c.name: c for c in gemm + moe}
    return out


def _aiter(results, arch, prefix):
    return [c for name, c in results[arch].items() if name.startswith(prefix)]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("variant", ["aiter fp8 per-tensor", "aiter fp8 per-token", "aiter fused_moe"])
def test_aiter_kernels_pass_against_the_fp32_reference(results, arch, variant):
    cases = _aiter(results, arch, variant)
    assert cases and {c.status for c in cases} == {"passed"}, [c.note for c in cases]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_every_aiter_result_names_the_adapter_and_the_arch_configs(results, arch):
    labels = {c.backend for c in _aiter(results, arch, "aiter ")}
    assert labels == {f"aiter-triton (adapter, arch configs {arch}, device cpu, Triton interpreter)"}


def test_gfx942_fp8_is_labelled_as_carried_not_native(results):
    notes = [c.note for c in _aiter(results, "gfx942", "aiter fp8 per-token")]
    assert all("carried as e4m3fn, NOT native gfx942 fp8" in n for n in notes)


def test_gfx942_config_comes_from_aiters_gfx942_file(results):
    notes = [c.note for c in _aiter(results, "gfx942", "aiter fp8 per-tensor")]
    assert all("(aiter gfx942-GEMM-A8W8, arch default)" in n for n in notes)


def test_bf16_gemm_is_skipped_with_the_interpreter_reason_never_passed(results):
    cases = _aiter(results, "gfx950", "aiter bf16")
    assert {(c.status, "multiplies bf16 as raw 16-bit integers" in c.note) for c in cases} == {("skipped", True)}


def test_blockscale_stops_on_the_assumption_aiter_breaks(results):
    case = results["gfx950"]["aiter fp8 blockscale down[M=16,N=64,K=128]"]
    assert (case.status, "assumes stride_ck > 0" in case.note) == ("skipped", True)


def test_configs_go_through_the_lds_estimator(results):
    notes = [c.note for c in _aiter(results, "gfx942", "aiter fused_moe")]
    assert all("LDS estimate 16384 B of 65536 B on gfx942" in n for n in notes)


def _cpu_aiter(arch: str) -> AiterTriton:
    return AiterTriton("adapter", get_arch(arch), detect("cpu"), "test", None)


def test_a_wrong_result_from_an_aiter_launch_fails(results):
    at = _cpu_aiter("gfx950")

    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(16, 64, generator=g), torch.randn(32, 64, generator=g)
    qx, qw = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    cfg, _ = at.gemm_config("gemm_a8w8", 16, 32, 64)

    def body():  # the weight scales are wrong by 2x: aiter computes exactly what it was asked, the case fails
        out, launch = at.launch("gemm_a8w8", cfg, lambda f, c: f(qx, qw, torch.ones(16), torch.full((32,), 2.0),
                                                                 dtype=torch.bfloat16, config=c))
        return out, qx.float() @ qw.float().T, launch, "test", ""

    case, _ = run_case(at, "gemm_a8w8", "wrong scales", body, (1, 1))
    assert case.status == "failed"


def test_a_config_over_the_targets_lds_fails_even_when_the_numbers_match():
    ref = torch.ones(4, 4)
    big = {"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "num_stages": 2}
    case, row = run_case(_cpu_aiter("gfx942"), "gemm_a16w16", "big tile",
                         lambda: (ref, ref, Launch(big), "test", ""), (2, 2))
    assert (case.status, row["lds_estimate"]) == ("failed", 131072)
