"""Our Triton kernels under the interpreter: right answers pass, deliberately wrong ones fail."""

import pytest
import torch

from validation.checks import fp8
from validation.checks.metrics import compare
from validation.kernels.triton_gemm import scaled_gemm
from validation.kernels.triton_moe import (
    align_by_expert,
    fused_moe,
    reference_moe,
    route,
)


def _ab(M, N, K, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(M, K, generator=g).bfloat16(), (torch.randn(N, K, generator=g) / K**0.5).bfloat16()


@pytest.mark.parametrize(("M", "N", "K"), [(1, 64, 64), (33, 80, 112), (16, 96, 64)])
def test_bf16_gemm_matches_fp32_reference(M, N, K):
    a, w = _ab(M, N, K)
    out, handle = scaled_gemm(a, w)
    assert handle is None  # interpreter: nothing compiled
    assert compare(out, a.float() @ w.float().T).passed


def test_fp8_e4m3fn_gemm_through_interpreter_with_scales():
    a, w = _ab(20, 48, 96)
    qa, sa = fp8.quantise(a, torch.float8_e4m3fn, 448.0)
    qw, sw = fp8.quantise(w, torch.float8_e4m3fn, 448.0)
    out, _ = scaled_gemm(qa, qw, sa, sw)
    ref = fp8.dequantise(qa, sa) @ fp8.dequantise(qw, sw).T
    assert compare(out, ref).passed


def test_gemm_with_a_wrong_scale_fails():
    a, w = _ab(16, 64, 64)
    out, _ = scaled_gemm(a, w, scale_a=torch.tensor([-1.0]))
    assert not compare(out, a.float() @ w.float().T).passed


def test_fnuz_quantise_uses_the_gfx942_max():
    x = torch.tensor([1000.0, -3.0, 0.5])
    q, s = fp8.quantise(x, torch.float8_e4m3fnuz, 240.0)
    assert q.dtype == torch.float8_e4m3fnuz
    assert q.float().abs().max().item() == 240.0
    assert torch.allclose(fp8.dequantise(q, s), x, rtol=0.07)


def _moe_inputs(T=9, H=64, inter=40, E=6, k=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, H, generator=g).bfloat16()
    w1 = (torch.randn(E, 2 * inter, H, generator=g) / H**0.5).bfloat16()
    w2 = (torch.randn(E, H, inter, generator=g) / inter**0.5).bfloat16()
    weights, ids = route(torch.randn(T, E, generator=g), k)
    return x, w1, w2, weights, ids


def test_moe_matches_per_expert_loop():
    x, w1, w2, weights, ids = _moe_inputs()
    assert compare(fused_moe(x, w1, w2, weights, ids), reference_moe(x, w1, w2, weights, ids)).passed


def test_moe_with_wrong_routing_fails():
    x, w1, w2, weights, ids = _moe_inputs()
    wrong_ids = (ids + 1) % w1.shape[0]  # every token sent to the next expert
    out = fused_moe(x, w1, w2, weights, wrong_ids)
    assert not compare(out, reference_moe(x, w1, w2, weights, ids)).passed


def test_route_renormalises_top_k():
    weights, ids = route(torch.randn(5, 8, generator=torch.Generator().manual_seed(3)), 3)
    assert ids.shape == (5, 3)
    assert torch.allclose(weights.sum(-1), torch.ones(5))


def test_align_pads_each_expert_to_the_block():
    ids = torch.tensor([[0, 2], [2, 0], [2, 1]])
    sorted_ids, expert_ids, num_pairs = align_by_expert(ids, num_experts=4, block_m=4)
    assert num_pairs == 6
    assert expert_ids.tolist() == [0, 1, 2]  # expert 3 has no tokens: no block
    blocks = sorted_ids.view(-1, 4).tolist()
    assert blocks[0][:2] == [0, 3] and blocks[0][2:] == [6, 6]  # pairs of expert 0, then padding
    assert blocks[2][:3] == [1, 2, 4]
