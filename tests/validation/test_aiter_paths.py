"""gemm-hipblaslt's untuned fallback and gemm-asm, read from aiter sources (a stand-in tree here)."""

import textwrap

import pytest

from validation.aiter_source import fallback_libtypes
from validation.checks import gemm_asm, gemm_ck, gemm_hipblaslt

UNPATCHED = textwrap.dedent('''
    def get_GEMM_A16W16_config(M, N, K, bias, dtype, otype, scaleAB=False):
        default_config = {}
        if small:
            return {"libtype": "skinny", "solidx": 2, "kernelName": ""}
        else:
            default_config["libtype"] = "torch"
            default_config["solidx"] = 0
        return default_config
''')


def _tree(tmp_path, tuned_gemm: str, csv_rows: str = ""):
    root = tmp_path / "aiter"
    (root / "configs" / "model_configs").mkdir(parents=True)
    (root / "tuned_gemm.py").write_text(tuned_gemm)
    (root / "configs" / "bf16_tuned_gemm.csv").write_text(
        "gfx,cu_num,M,N,K,bias,dtype,outdtype,scaleAB,bpreshuffle,libtype,solidx,splitK,us,kernelName\n" + csv_rows)
    return root




@pytest.mark.parametrize(("lib", "status"), [("torch", "failed"), ("hipblaslt", "passed")])
def test_untuned_fallback_must_be_hipblaslt(tmp_path, cpu_ctx, monkeypatch, lib, status):
    monkeypatch.delenv("AITER_CONFIG_GEMM_BF16", raising=False)
    root = _tree(tmp_path, UNPATCHED.replace('"torch"', f'"{lib}"'))
    assert fallback_libtypes(root / "tuned_gemm.py") == {lib}
    res = gemm_hipblaslt.run(cpu_ctx(aiter_root=root))
    case = next(c for c in res.cases if c.name == "untuned-shape-fallback")
    assert case.status == status
    assert f"['{lib}']" in case.note
    assert res.status == status


def test_fallback_reader_refuses_a_moved_function(tmp_path):
    path = tmp_path / "tuned_gemm.py"
    path.write_text("def something_else():\n    pass\n")
    with pytest.raises(ValueError, match="no function get_GEMM_A16W16_config"):
        fallback_libtypes(path)


ASM_ROW = "gfx950,256,64,256,5120,False,torch.bfloat16,torch.float32,False,False,asm,5,13,7.9,_ZN5aiter_k\n"


def test_asm_reachable_on_gfx950_without_a_gpu_fails(tmp_path, cpu_ctx, monkeypatch):
    monkeypatch.delenv("AITER_CONFIG_GEMM_BF16", raising=False)
    root = _tree(tmp_path, UNPATCHED.replace('"torch"', '"hipblaslt"'), ASM_ROW)
    res = gemm_asm.run(cpu_ctx("gfx950", aiter_root=root))
    assert res.status == "failed"
    assert res.metrics["asm_rows"] == 1


def test_asm_unreachable_on_gfx950_passes(tmp_path, cpu_ctx, monkeypatch):
    monkeypatch.delenv("AITER_CONFIG_GEMM_BF16", raising=False)
    root = _tree(tmp_path, UNPATCHED.replace('"torch"', '"hipblaslt"'), ASM_ROW.replace(",asm,", ",hipblaslt,"))
    res = gemm_asm.run(cpu_ctx("gfx950", aiter_root=root))
    assert res.status == "passed"
    assert res.cases[0].note.startswith("unreachable")


def test_asm_on_gfx942_without_gpu_is_skipped_not_passed(tmp_path, cpu_ctx, monkeypatch):
    monkeypatch.delenv("AITER_CONFIG_GEMM_BF16", raising=False)
    root = _tree(tmp_path, UNPATCHED, ASM_ROW.replace("gfx950,256", "gfx942,304"))
    res = gemm_asm.run(cpu_ctx("gfx942", aiter_root=root))
    assert res.status == "skipped"
    assert "needs the GPU" in res.reason


def test_without_aiter_asm_and_ck_are_skipped_with_reason(cpu_ctx):
    assert gemm_asm.run(cpu_ctx()).status == "skipped"
    res = gemm_ck.run(cpu_ctx())
    assert res.status == "skipped" and res.reason == "aiter not installed"


@pytest.mark.parametrize(("mode", "source", "reason"), [
    ("ckfree", "--ck-mode", "CK mode ckfree (--ck-mode)"),
    (None, "", "CK mode ckfree (detected: no prebuilt CK GEMM module"),
    ("ck", "ATOM_BUILD_CK_MODE=ck", "CK mode ck (ATOM_BUILD_CK_MODE=ck); aiter kernels need an AMD GPU"),
])
def test_gemm_ck_says_which_source_decided_the_ck_mode(tmp_path, cpu_ctx, mode, source, reason):
    ctx = cpu_ctx(aiter_installed=True, aiter_root=_tree(tmp_path, UNPATCHED), ck_mode=mode, ck_mode_source=source)
    res = gemm_ck.run(ctx)
    assert (res.status, res.reason.startswith(reason)) == ("skipped", True), res.reason
