"""aiter's GEMM dispatcher (tgemm.mm, what ATOM's linear layers call) EXECUTED on the CPU with aiter's runtime
stubbed at the kernel boundary (validation.aiterpkg.gemm_dispatch): which backend entry point each call reaches, from
the real aiter at the pin (unpatched and patched) and from two hand-written dispatchers (tests/validation/fixtures).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from validation import cli
from validation.aiterpkg import gemm_dispatch, tuned_lookup
from validation.aiterpkg.gemm_dispatch import Call
from validation.checks import gemm_asm, gemm_hipblaslt

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CU = {"gfx942": 304, "gfx950": 256}
FP8 = {"gfx942": torch.float8_e4m3fnuz, "gfx950": torch.float8_e4m3fn}
UNTUNED = Call(4099, 4097, 4096)
PRESHUFFLED = Call(4099, 4096, 4096, preshuffled=True)


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch):
    monkeypatch.delenv("AITER_CONFIG_GEMM_BF16", raising=False)


def reached(pkg: Path, arch: str, call: Call) -> list[tuple[str, str]]:
    kernels = gemm_dispatch.StubbedKernels()
    with tuned_lookup.load(pkg, arch, CU[arch], on_call=kernels) as lookup:
        return gemm_dispatch.run_stubbed(lookup.module, kernels, call).reached


def fixture_tree(tmp_path: Path, name: str) -> Path:
    pkg = tmp_path / "aiter"
    (pkg / "configs").mkdir(parents=True)
    shutil.copyfile(FIXTURES / f"{name}.py.txt", pkg / "tuned_gemm.py")
    return pkg


def hipblaslt_json(tmp_path: Path, capsys, pkg: Path, arch: str = "gfx942") -> tuple[int, dict]:
    out = tmp_path / "report.json"
    code = cli.main(["--arch", arch, "--device", "cpu", "--aiter-src", str(pkg), "--json-file", str(out),
                     "--only", "gemm-hipblaslt"])
    capsys.readouterr()
    return code, json.loads(out.read_text())["checks"][0]


# --- the real aiter at the pin ------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_unpatched_pin_dispatches_untuned_shapes_to_torch(aiter_pkg, arch):
    assert reached(aiter_pkg, arch, UNTUNED) == [("torch", "F.linear")]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_unpatched_pin_dispatches_untuned_fp8_to_torch_scaled_mm(aiter_pkg, arch):
    call = Call(4099, 4096, 4096, dtype=FP8[arch], scaled=True)
    assert reached(aiter_pkg, arch, call)[0] == ("torch", "torch._scaled_mm")


def test_unpatched_pin_dispatches_preshuffled_default_to_asm_on_gfx950(aiter_pkg):
    assert reached(aiter_pkg, "gfx950", PRESHUFFLED) == [("asm", "aiter.gemm_a16w16_asm")]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("call", [UNTUNED, PRESHUFFLED, Call(4099, 4096, 4096, scaled=True)], ids=str)
def test_patched_pin_dispatches_untuned_shapes_to_hipblaslt(pin_patched, arch, call):
    if call.scaled:
        call = Call(call.M, call.N, call.K, dtype=FP8[arch], scaled=True)
    assert reached(pin_patched, arch, call) == [("hipblaslt", "aiter.hipb_mm")]


def test_skinny_shapes_reach_the_skinny_kernel(pin_patched):
    assert reached(pin_patched, "gfx942", Call(1, 64, 64)) == [("skinny", "aiter.wv_splitk_small_fp16_bf16")]


def test_every_dispatch_case_names_the_backend_it_reached(pin_patched, cpu_ctx):
    cases = gemm_hipblaslt.dispatch_cases(cpu_ctx("gfx950", aiter_root=pin_patched))
    assert {c.backend for c in cases} == {"aiter-dispatch:hipblaslt"}


def test_patched_pin_passes_gemm_hipblaslt(tmp_path, capsys, pin_patched):
    code, check = hipblaslt_json(tmp_path, capsys, pin_patched)
    assert (code, check["status"]) == (0, "passed")


def test_unpatched_pin_fails_gemm_hipblaslt_naming_torch(tmp_path, capsys, aiter_pkg):
    _, check = hipblaslt_json(tmp_path, capsys, aiter_pkg)
    assert check["reason"].startswith("failed: untuned bfloat16 M=4099 N=4097 K=4096: reached torch (F.linear), "
                                      "not hipblaslt")


def test_asm_dispatch_on_gfx950_fails_unpatched(aiter_pkg, cpu_ctx):
    case = gemm_asm.run(cpu_ctx("gfx950", aiter_root=aiter_pkg)).cases[-1]
    assert (case.name, case.status) == ("asm-dispatch", "failed")
    assert case.note.startswith("asm reached by bfloat16 M=4099 N=4096 K=4096 bpreshuffle and 20 more")


def test_asm_dispatch_on_gfx950_passes_patched(pin_patched, cpu_ctx):
    case = gemm_asm.run(cpu_ctx("gfx950", aiter_root=pin_patched)).cases[-1]
    assert (case.name, case.status, case.backend) == ("asm-dispatch", "passed", "aiter-dispatch:hipblaslt")


# --- a dispatcher that reroutes to torch (hand-written) -----------------------------------------


def test_rerouting_dispatcher_fails_gemm_hipblaslt_with_one_line_naming_torch(tmp_path, capsys):
    code, check = hipblaslt_json(tmp_path, capsys, fixture_tree(tmp_path, "tuned_gemm_reroutes_to_torch"))
    assert code == 1
    assert check["reason"].startswith("failed: untuned bfloat16 M=4099 N=4097 K=4096: reached torch (F.linear), "
                                      "not hipblaslt")
    assert "\n" not in check["reason"]


def test_rerouting_dispatcher_still_passes_the_lookup_alone(tmp_path):
    with tuned_lookup.load(fixture_tree(tmp_path, "tuned_gemm_reroutes_to_torch"), "gfx942", 304) as lookup:
        assert lookup.config(*gemm_hipblaslt.UNTUNED)["libtype"] == "hipblaslt"


def test_honest_fixture_dispatcher_passes(tmp_path, capsys):
    code, check = hipblaslt_json(tmp_path, capsys, fixture_tree(tmp_path, "tuned_gemm_honest"))
    assert (code, check["status"]) == (0, "passed")


# --- the verdict ---------------------------------------------------------------------------------


def _trace(*backends):
    return gemm_dispatch.Trace([(b, f"entry:{b}") for b in backends])


@pytest.mark.parametrize(("config", "untuned", "backend", "status"), [
    ({"libtype": "skinny", "solidx": 2}, False, "skinny", "passed"),  # aiter's own default for tiny N
    ({"libtype": "skinny", "solidx": 2}, True, "skinny", "failed"),  # the untuned probes must reach hipBLASLt
    ({"libtype": "torch", "solidx": 0}, False, "torch", "failed"),  # the 570x default, on a model layer
    ({"libtype": "torch", "solidx": 0, "us": 3.0}, False, "torch", "passed"),  # a tuned row that chose torch
    ({"libtype": "hipblaslt", "solidx": -1}, False, "torch", "failed"),  # config and kernel disagree
], ids=["skinny default", "untuned probe skinny", "torch default", "torch tuned row", "rerouted"])
def test_judge(cpu_ctx, config, untuned, backend, status):
    case = gemm_hipblaslt.judge(cpu_ctx("gfx942"), "c", Call(1, 64, 64), config, _trace(backend), untuned)
    assert case.status == status


def test_judge_fails_asm_on_gfx950_even_where_the_config_says_asm(cpu_ctx):
    case = gemm_hipblaslt.judge(cpu_ctx("gfx950"), "c", Call(64, 256, 5120), {"libtype": "asm", "us": 1.0},
                                _trace("asm"), False)
    assert (case.status, case.note.startswith("reached asm (entry:asm) on gfx950")) == ("failed", True)


# --- the pieces -------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "backend"), [
    ("aiter.hipb_mm", "hipblaslt"), ("aiter.gemm_a16w16_asm", "asm"), ("aiter.wvSpltK", "skinny"),
    ("aiter.ops.triton.gemm.basic.gemm_a16w16.gemm_a16w16", "triton"), ("aiter.gemm_a16w16_ck", "ck"),
    ("aiter.ops.opus.gemm_op_a16w16.opus_gemm_a16w16_tune", "opus"), ("aiter.hipb_create_extension", None),
    ("aiter.something_else", None),
])
def test_backend_of_names_each_entry_point(name, backend):
    assert gemm_dispatch.backend_of(name) == backend


def test_an_unknown_aiter_call_is_an_error_not_a_backend():
    with pytest.raises(tuned_lookup.AiterLookupError, match="no GEMM entry point this check knows"):
        gemm_dispatch.StubbedKernels()("aiter.some_new_op", (), {})


def test_torch_gemms_are_recorded_however_they_are_spelt():
    trace = gemm_dispatch.Trace()
    a = torch.ones(2, 3)
    with gemm_dispatch._TorchGemms(trace):
        _ = a @ a.T
        torch.mm(a, a.T)
    assert [e for _, e in trace.reached] == ["Tensor.matmul", "torch.mm"]  # `@` arrives as Tensor.matmul


def test_installed_path_wraps_entry_points_and_puts_them_back(pin_patched):
    kernels = gemm_dispatch.StubbedKernels()
    with tuned_lookup.load(pin_patched, "gfx950", 256, on_call=kernels) as lookup:
        before = lookup.module.hipb_mm
        kernels.out = (UNTUNED.M, UNTUNED.N, torch.bfloat16)
        trace, out, _ = gemm_dispatch.run_installed(lookup.module, UNTUNED, "meta")
        assert trace.backends() == ["hipblaslt"]
        assert lookup.module.hipb_mm is before
