"""gemm-asm and gemm-ck without aiter, and gemm-ck's CK mode from an aiter tree (a stand-in tree here).

The tuned-GEMM lookup against the real aiter source: tests/validation/aiterpkg/test_tuned_lookup.py.
"""

import textwrap

import pytest

from validation.checks import gemm_asm, gemm_ck

# gemm-ck reads the tree's layout, not this file's logic.
TUNED_GEMM = textwrap.dedent('''
    def get_GEMM_A16W16_config(M, N, K, bias, dtype, otype, scaleAB=False):
        return {"libtype": "torch", "solidx": 0}
''')


def _tree(tmp_path):
    root = tmp_path / "aiter"
    (root / "configs" / "model_configs").mkdir(parents=True)
    (root / "tuned_gemm.py").write_text(TUNED_GEMM)
    (root / "configs" / "bf16_tuned_gemm.csv").write_text(
        "gfx,cu_num,M,N,K,bias,dtype,outdtype,scaleAB,bpreshuffle,libtype,solidx,splitK,us,kernelName\n")
    return root


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
    ctx = cpu_ctx(aiter_installed=True, aiter_root=_tree(tmp_path), ck_mode=mode, ck_mode_source=source)
    res = gemm_ck.run(ctx)
    assert (res.status, res.reason.startswith(reason)) == ("skipped", True), res.reason
