import json
import math

import pytest
import torch

from validation.checks.metrics import COSINE_MIN, compare
from validation.checks.report import FAILED, PASSED, Case, CheckResult, Report


def _pair(seed=0, shape=(32, 48)):
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(*shape, generator=g)
    return ref, ref.to(torch.bfloat16)


def test_bf16_rounding_of_the_reference_passes():
    ref, out = _pair()
    cmp = compare(out, ref)
    assert cmp.passed, cmp
    assert cmp.cosine > 0.99999
    assert cmp.max_abs_err < 0.05
    assert cmp.frac_out_of_tol == 0.0


def test_wrong_result_fails_on_cosine():
    ref, _ = _pair()
    wrong = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1))
    cmp = compare(wrong, ref)
    assert cmp.cosine < COSINE_MIN
    assert not cmp.passed
    assert "cosine" in cmp.why()


def test_nan_is_always_a_failure_even_when_everything_else_matches():
    ref, out = _pair()
    out = out.float()
    out[3, 5] = float("nan")
    cmp = compare(out, ref)
    assert cmp.nan_inf
    assert not cmp.passed
    assert cmp.why() == "NaN/Inf in output"
    assert math.isfinite(cmp.cosine) and math.isfinite(cmp.max_abs_err)


def test_inf_is_caught():
    ref, out = _pair()
    out = out.float()
    out[0, 0] = float("inf")
    assert compare(out, ref).nan_inf


def test_small_share_of_large_errors_fails_on_tolerance_not_cosine():
    ref = torch.randn(100, 100, generator=torch.Generator().manual_seed(2))
    out = ref.clone()
    out.view(-1)[::64] += 0.2  # 1.6% of elements, each off by 0.2: cosine still high
    cmp = compare(out, ref)
    assert cmp.cosine > COSINE_MIN
    assert 0.0155 < cmp.frac_out_of_tol <= 157 / 10_000
    assert not cmp.passed


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape mismatch"):
        compare(torch.zeros(2, 3), torch.zeros(3, 2))


def test_measured_case_carries_the_reason():
    ref, _ = _pair()
    case = Case.measured("x", compare(torch.zeros_like(ref), ref), "b", "note")
    assert case.status == FAILED
    assert case.note.startswith("note; cosine")


def test_check_status_skips_are_never_passes():
    skipped = [Case.skipped("a", "b", "why"), Case.skipped("c", "b", "why")]
    assert CheckResult.from_cases("k", skipped).status == "skipped"
    mixed = [Case.verdict("a", True, "b", ""), Case.skipped("c", "b", "why")]
    res = CheckResult.from_cases("k", mixed)
    assert res.status == PASSED and "1 skipped" in res.reason
    bad = [Case.verdict("a", True, "b", ""), Case.verdict("z", False, "b", "")]
    assert CheckResult.from_cases("k", bad).status == FAILED


def test_report_json_stays_valid_with_non_finite_numbers():
    rep = Report("gfx942", "cpu", "cpu", "t", None, None)
    rep.checks.append(CheckResult("k", FAILED, metrics={"x": float("nan"), "y": float("inf")}))
    data = json.loads(rep.to_json())
    assert data["checks"][0]["metrics"] == {"x": -1.0, "y": 1e308}


def test_check_metrics_summarise_the_worst_measured_case():
    ref, out = _pair()
    good = Case.measured("good", compare(out, ref), "b")
    bad = Case.measured("bad", compare(out.float() * 2, ref), "b")
    res = CheckResult.from_cases("k", [good, bad, Case.verdict("v", True, "b", ""), Case.skipped("s", "b", "x")])
    assert res.metrics["measured_cases"] == 2
    assert res.metrics["max_abs_err"] == bad.max_abs_err > good.max_abs_err
    assert res.metrics["max_frac_out_of_tol"] == bad.frac_out_of_tol > 0.5
