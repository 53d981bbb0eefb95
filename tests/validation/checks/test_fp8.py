"""fp8 blocks and carrying gfx942's e4m3fnuz values in e4m3fn, the claim the gfx942 label makes, checked."""

import pytest
import torch

from validation.checks import fp8
from validation.checks.aiter_gemm_cases import fp8_carrier

FNUZ, FN = torch.float8_e4m3fnuz, torch.float8_e4m3fn
ODD = [k * 2.0**-10 for k in (1, 3, 5, 7, 9, 11, 13, 15)]


def test_only_sixteen_tiny_fnuz_values_are_not_exact_in_fn():
    assert fp8.inexact_values(FNUZ, FN) == sorted([-v for v in ODD] + ODD)


def test_every_inexact_value_lies_below_fns_smallest_normal():
    assert max(abs(v) for v in fp8.inexact_values(FNUZ, FN)) < 2.0**-6


def test_gfx942s_max_survives_the_carrier():
    q = torch.tensor([240.0, -240.0, 1.0]).to(FNUZ)
    assert fp8.carry(q, FN)[1] == 0


def test_the_carrier_counts_the_values_it_rounds():
    q = torch.tensor([2.0**-10, 3 * 2.0**-10, 2.0**-9, 1.0]).to(FNUZ)
    assert fp8.carry(q, FN)[1] == 2


def test_the_gfx942_label_states_the_checked_claim(cpu_ctx):
    _, note = fp8_carrier(cpu_ctx("gfx942"))
    assert "every e4m3fnuz value but ±{1, 3, 5, 7, 9, 11, 13, 15}·2^-10 is exact in e4m3fn" in note


def test_gfx950_runs_its_own_type(cpu_ctx):
    assert fp8_carrier(cpu_ctx("gfx950"))[0] is FN


@pytest.mark.parametrize(("rows", "cols", "scale_shape"), [(1, 200, (33, 1)), (1, 128, (33, 2)),
                                                           (128, 128, (1, 2)), (33, 200, (1, 1))])
def test_block_scales_have_one_entry_per_block(rows, cols, scale_shape):
    x = torch.randn(33, 200, generator=torch.Generator().manual_seed(0))
    assert tuple(fp8.quantise_blocks(x, FN, 448.0, rows, cols)[1].shape) == scale_shape


def test_block_quantisation_round_trips_within_e4m3_precision():
    x = torch.randn(33, 200, generator=torch.Generator().manual_seed(0))
    q, s = fp8.quantise_blocks(x, FNUZ, 240.0, 1, 128)
    rel = (fp8.dequantise_blocks(q, s, 1, 128) - x).abs() / x.abs().clamp(min=1e-3)
    assert float(rel[x.abs() > 0.1].max()) <= 2**-4  # 3 mantissa bits: half an ulp is 1/16
