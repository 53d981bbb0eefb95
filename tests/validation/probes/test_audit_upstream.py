"""The probe on the real aiter (79366eb8, and 9e7220b1's older files) and ATOM (181b0f46): unpatched the
pitfalls are PRESENT, after `python -m patches apply` they are ok."""

from __future__ import annotations

import json
from pathlib import Path

from audit_helpers import AITER_OLD_REV, apply_patches, make_context, show

from validation.probes import arch_env, code, prebuilt, runner
from validation.probes.image import OK, PRESENT, UNKNOWN

CK_FREE_ENV = {"ENABLE_CK": "0", "ATOM_CK_FREE": "1"}


def test_unpatched_tuned_gemm_falls_back_to_torch(real_site, fake_root):
    f = code.tuned_gemm_default(make_context(real_site, fake_root))
    assert f.status == PRESENT
    assert f.evidence[0].startswith("patch would apply: ")
    assert f.evidence[0].endswith("(/opt/venv/site-packages/aiter/tuned_gemm.py; patch tuned-gemm-hipblaslt)")
    assert 'libtype "torch"' in f.evidence[0]


def test_unpatched_dispatcher_is_seen_reaching_torch(real_site, fake_root):
    f = code.tuned_gemm_default(make_context(real_site, fake_root))
    assert f.evidence[1] == ("tgemm.mm (ATOM's linear entry) for untuned bfloat16 M=4099 N=4097 K=4096 on gfx942 "
                             "reached torch (F.linear) (executed, aiter's runtime stubbed)")


def test_patched_dispatcher_reaches_hipblaslt_on_both_archs_when_the_arch_is_unknown(patched_site, fake_root):
    f = code.tuned_gemm_default(make_context(patched_site, fake_root, arch=None))
    assert [e.split(" reached ")[1] for e in f.evidence[1:]] == ["hipblaslt (aiter.hipb_mm) (executed, aiter's "
                                                                 "runtime stubbed)"] * 2


def test_a_dispatcher_that_reroutes_to_torch_is_present(patched_site, fake_root):
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "tuned_gemm_reroutes_to_torch.py.txt"
    (patched_site / "aiter/tuned_gemm.py").write_bytes(fixture.read_bytes())
    f = code.tuned_gemm_default(make_context(patched_site, fake_root))
    assert (f.status, f.evidence[-1].split(" reached ")[1]) == (PRESENT, "torch (F.linear) (executed, aiter's "
                                                                          "runtime stubbed)")


def test_patched_tuned_gemm_is_ok(patched_site, fake_root):
    f = code.tuned_gemm_default(make_context(patched_site, fake_root))
    assert (f.status, f.evidence[0].startswith("patched: ")) == (OK, True)


def test_asm_gemm_reachable_on_gfx950_until_patched(real_site, fake_root):
    assert code.asm_gemm_gfx950(make_context(real_site, fake_root, arch="gfx950")).status == PRESENT
    apply_patches(real_site)
    assert code.asm_gemm_gfx950(make_context(real_site, fake_root, arch="gfx950")).status == OK


def test_asm_gemm_is_not_applicable_on_gfx942(real_site, fake_root):
    f = code.asm_gemm_gfx950(make_context(real_site, fake_root, arch="gfx942"))
    assert f.status == OK
    assert f.evidence[0].startswith("not applicable: the target is gfx942")


def test_asm_gemm_with_unknown_arch_is_unknown(real_site, fake_root):
    f = code.asm_gemm_gfx950(make_context(real_site, fake_root, arch=None))
    assert f.status == UNKNOWN
    assert "present only if this image runs on gfx950" in f.evidence[-1]


def test_jit_core_fixed_upstream_is_ok(real_site, fake_root):
    f = code.jit_core(make_context(real_site, fake_root))
    assert f.status == OK
    assert f.evidence[0].startswith("fixed upstream: ")


def test_jit_core_systemexit_is_present_until_patched(real_site, fake_root):
    (real_site / "aiter/jit/core.py").write_bytes(show("aiter", AITER_OLD_REV, "aiter/jit/core.py"))
    assert code.jit_core(make_context(real_site, fake_root)).status == PRESENT
    apply_patches(real_site)
    assert code.jit_core(make_context(real_site, fake_root)).status == OK


def test_ck_free_image_whose_atom_ignores_atom_ck_free(real_site, fake_root):
    f = prebuilt.ck_free(make_context(real_site, fake_root, env=CK_FREE_ENV))
    assert f.status == PRESENT
    assert f.evidence[0] == "ATOM_CK_FREE=1 but use_triton_gemm() ignores it"
    assert f.evidence[-1].startswith("patch would apply: ")
    assert f.evidence[-1].endswith("(/opt/venv/site-packages/atom/model_ops/linear.py; patch atom-ck-free-triton-gemm)")


def test_ck_free_image_after_the_patch_is_ok(patched_site, fake_root):
    f = prebuilt.ck_free(make_context(patched_site, fake_root, env=CK_FREE_ENV))
    assert f.status == OK


def test_fp8_from_the_live_gpu_ignores_gpu_archs(real_site, fake_root):
    """aiter 79366eb8 picks fp8 by get_gfx_runtime(): a GPU_ARCHS list does not change the dtype."""
    ctx = make_context(real_site, fake_root, env={"GPU_ARCHS": "gfx942;gfx950"})
    f = arch_env.fp8_dtype(ctx)
    assert f.status == OK
    assert f.evidence[0].startswith("dtypes.fp8 = float8_e4m3fnuz: get_gfx_runtime() asks the live GPU")


def test_fp8_from_gpu_archs_last_entry_is_present_on_gfx942(real_site, fake_root):
    """aiter 9e7220b1 picks fp8 by get_gfx(), which takes GPU_ARCHS's last entry."""
    (real_site / "aiter/utility/dtypes.py").write_bytes(show("aiter", AITER_OLD_REV, "aiter/utility/dtypes.py"))
    ctx = make_context(real_site, fake_root, env={"GPU_ARCHS": "gfx942;gfx950"})
    f = arch_env.fp8_dtype(ctx)
    assert f.status == PRESENT
    assert f.evidence[0].startswith("dtypes.fp8 = float8_e4m3fn: get_gfx() takes GPU_ARCHS's last entry 'gfx950'")
    assert f.evidence[1] == "gfx942 needs float8_e4m3fnuz"


def test_fp8_from_gpu_archs_single_entry_is_ok(real_site, fake_root):
    (real_site / "aiter/utility/dtypes.py").write_bytes(show("aiter", AITER_OLD_REV, "aiter/utility/dtypes.py"))
    f = arch_env.fp8_dtype(make_context(real_site, fake_root, arch="gfx950", env={"GPU_ARCHS": "gfx950"}))
    assert (f.status, f.evidence[0].startswith("dtypes.fp8 = float8_e4m3fn: ")) == (OK, True)


def test_gpu_archs_list_names_aiters_line(real_site, fake_root):
    f = arch_env.gpu_archs(make_context(real_site, fake_root, env={"GPU_ARCHS": "gfx942;gfx950"}))
    assert f.status == PRESENT
    line = arch_env.last_entry_line(real_site / "aiter/jit/utils/chip_info.py")
    assert line is not None
    assert "GPU_ARCHS='gfx942;gfx950' lists 2 archs; aiter runs gfx950 (" in f.evidence[0]
    assert f"aiter/jit/utils/chip_info.py:{line} takes the last entry" in f.evidence[0]


def test_prebuilt_kernels_absent_without_rocm_is_unknown(real_site, fake_root):
    f = prebuilt.prebuilt_kernels(make_context(real_site, fake_root))
    assert f.status == UNKNOWN
    assert "no ROCm in this image" in f.evidence[-1]


def test_whole_audit_of_the_unpatched_packages(real_site, fake_root):
    report = runner.audit(make_context(real_site, fake_root, arch="gfx950", env=CK_FREE_ENV))
    present = {f["id"] for f in report["findings"] if f["status"] == PRESENT}
    assert present == {"tuned-gemm-default", "asm-gemm-gfx950", "ck-free"}
    assert report["packages"]["aiter"]["dist"] == "amd-aiter 0.1.20.dev0+g79366eb8"
    json.dumps(report)  # the host reads it as JSON


def test_whole_audit_after_the_patches(patched_site, fake_root):
    report = runner.audit(make_context(patched_site, fake_root, arch="gfx950", env=CK_FREE_ENV))
    assert [f["id"] for f in report["findings"] if f["status"] == PRESENT] == []
    assert report["present"] == 0
