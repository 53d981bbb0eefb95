"""GPU_ARCHS, aiter's get_gfx()/dtypes.fp8 and the arch's fp8 dtype, on a CPU host."""

import dataclasses
import sys
import textwrap

import pytest

from validation.checks import arch_consistency


def _case(result, name):
    return next(c for c in result.cases if c.name == name)


def test_cpu_skips_the_device_part_but_checks_the_rest(cpu_ctx, monkeypatch):
    monkeypatch.delenv("GPU_ARCHS", raising=False)
    res = arch_consistency.run(cpu_ctx("gfx942"))
    assert _case(res, "device-arch").status == "skipped"
    assert "not an AMD GPU" in _case(res, "device-arch").note
    assert _case(res, "fp8-dtype").status == "passed"
    assert res.status == "passed"


def test_two_arch_gpu_archs_fails_and_names_the_last_entry(cpu_ctx, monkeypatch):
    monkeypatch.setenv("GPU_ARCHS", "gfx942;gfx950")
    res = arch_consistency.run(cpu_ctx("gfx942"))
    case = _case(res, "GPU_ARCHS")
    assert case.status == "failed"
    assert "LAST (gfx950)" in case.note
    assert res.status == "failed"


@pytest.mark.parametrize(("env", "arch", "status"), [("gfx950", "gfx950", "passed"), ("gfx950", "gfx942", "failed"),
                                                      ("gfx942;", "gfx942", "passed")])
def test_single_entry_gpu_archs(cpu_ctx, monkeypatch, env, arch, status):
    monkeypatch.setenv("GPU_ARCHS", env)
    assert _case(arch_consistency.run(cpu_ctx(arch)), "GPU_ARCHS").status == status


@pytest.mark.parametrize(("arch", "dtype", "fmax"), [("gfx942", "float8_e4m3fnuz", "240"),
                                                     ("gfx950", "float8_e4m3fn", "448")])
def test_fp8_dtype_and_max_per_arch(cpu_ctx, arch, dtype, fmax):
    case = _case(arch_consistency.run(cpu_ctx(arch)), "fp8-dtype")
    assert case.status == "passed"
    assert case.note.startswith(f"{dtype} finfo.max {fmax}")


@pytest.fixture
def fake_aiter(tmp_path, monkeypatch, stash_aiter_modules):
    """A stand-in aiter whose get_gfx() takes GPU_ARCHS' last entry, as the real one does."""
    pkg = tmp_path / "aiter"
    (pkg / "jit" / "utils").mkdir(parents=True)
    (pkg / "utility").mkdir()
    for d in (pkg, pkg / "jit", pkg / "jit" / "utils", pkg / "utility"):
        (d / "__init__.py").write_text("")
    (pkg / "jit" / "utils" / "chip_info.py").write_text(textwrap.dedent("""
        import os
        def get_gfx():
            return os.environ.get("GPU_ARCHS", "gfx942").split(";")[-1]
    """))
    (pkg / "utility" / "dtypes.py").write_text(textwrap.dedent("""
        import torch
        from ..jit.utils.chip_info import get_gfx
        fp8 = {"gfx942": torch.float8_e4m3fnuz, "gfx950": torch.float8_e4m3fn}[get_gfx()]
    """))
    monkeypatch.syspath_prepend(str(tmp_path))


def test_multi_arch_image_makes_aiter_pick_gfx950_on_a_gfx942_target(cpu_ctx, monkeypatch, fake_aiter):
    monkeypatch.setenv("GPU_ARCHS", "gfx942;gfx950")
    res = arch_consistency.run(cpu_ctx("gfx942", aiter_installed=True))
    assert _case(res, "aiter.get_gfx").status == "failed"
    assert "get_gfx() = gfx950" in _case(res, "aiter.get_gfx").note
    assert _case(res, "aiter.dtypes.fp8").status == "failed"
    assert "float8_e4m3fn," in _case(res, "aiter.dtypes.fp8").note


def test_consistent_aiter_passes(cpu_ctx, monkeypatch, fake_aiter):
    monkeypatch.setenv("GPU_ARCHS", "gfx950")
    res = arch_consistency.run(cpu_ctx("gfx950", aiter_installed=True))
    assert [c.status for c in res.cases if c.name.startswith("aiter")] == ["passed", "passed"]
    assert res.status == "passed"


def test_aiter_that_needs_rocm_is_a_skip_off_amd_and_a_failure_on_amd(cpu_ctx, monkeypatch, fake_aiter, tmp_path):
    # The real aiter raises at import when /opt/rocm is absent: on a CPU host that is a reasoned skip.
    (tmp_path / "aiter" / "jit" / "utils" / "chip_info.py").write_text(
        'raise RuntimeError("ROCm version file not found")\n')
    monkeypatch.setenv("GPU_ARCHS", "gfx942")
    ctx = cpu_ctx("gfx942", aiter_installed=True)
    res = arch_consistency.run(ctx)
    case = _case(res, "aiter.get_gfx")
    assert case.status == "skipped" and "ROCm version file not found" in case.note
    assert res.status == "passed"
    amd = dataclasses.replace(ctx, info=dataclasses.replace(ctx.info, vendor="amd"))
    for name in [m for m in sys.modules if m == "aiter" or m.startswith("aiter.")]:
        del sys.modules[name]
    assert _case(arch_consistency.run(amd), "aiter.get_gfx").status == "failed"
