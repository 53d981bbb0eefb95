"""invoke audit on the images this repo really builds: the clean image before the patch layer has the pitfalls
the patches exist for (exit 1), the patched candidate has none (exit 0). Derived images (two tritons, a GPU_ARCHS
list) are in tests/validation/probes/test_audit_docker.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cleanbuild.commands import audit_image
from cleanbuild.gpuhost.arch import Arch
from tests.support.builds import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def statuses(result) -> dict[str, str]:
    return {f["id"]: f["status"] for f in result.findings}


def test_the_clean_image_before_the_patch_layer_has_the_pitfalls(docker_engine, offline_builds, tmp_path):
    built = offline_builds["gfx950-ckfree"]
    result = audit_image.audit(built.clean, arch=Arch.GFX950, model="llama3-8b", tp=(1,), report_dir=tmp_path, device=False,
                         client=docker_engine)
    found = statuses(result)
    assert result.exit_code == 1
    assert found["tuned-gemm-default"] == "PRESENT" and found["asm-gemm-gfx950"] == "PRESENT"
    assert found["ck-free"] == "PRESENT"  # ATOM_CK_FREE=1 but ATOM's use_triton_gemm() ignores it, unpatched
    assert found["jit-systemexit"] == "ok"  # aiter 79366eb8 already raises RuntimeError
    assert found["gpu-archs"] == "ok" and found["duplicate-dists"] == "ok" and found["nvidia-packages"] == "ok"
    assert found["installer-caches"] == "ok" and found["secrets"] == "ok"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["image"] == built.clean and (tmp_path / "report.md").read_text().startswith("# Audit report")


def test_the_patched_candidate_has_only_the_route_it_cannot_serve(docker_engine, offline_builds):
    """Every pitfall the patches exist for is ok; what is left is true at the pins: a CK-free image cannot serve
    Qwen3-30B-A3B (the model its cache was warmed for), whose experts reach aiter's CK 2-stage MoE."""
    built = offline_builds["gfx950-ckfree"]
    result = audit_image.audit(built.candidate, arch=Arch.GFX950, model=None, tp=(1,), report_dir=None, device=False,
                         client=docker_engine)
    assert [f["id"] for f in result.present] == ["route"]
    evidence = result.present[0]["evidence"]
    assert "cannot serve qwen3-30b-a3b" in evidence[0]
    assert any("model.layers.mlp.experts [FusedMoE] lacks" in e and "module_moe_ck2stages" in e for e in evidence)
    assert result.exit_code == 1
    assert statuses(result)["tuned-gemm-default"] == "ok"


def test_the_offline_ck_image_is_told_to_lack_ck(docker_engine, offline_builds):
    """Offline, aiter is built Triton-only (no ROCm, no CK submodule): the gfx942 CK image says CK but has no CK
    kernel. The audit names exactly that, and nothing else."""
    built = offline_builds["gfx942-ck"]
    result = audit_image.audit(built.candidate, arch=Arch.GFX942, model=None, tp=(1,), report_dir=None, device=False,
                         client=docker_engine)
    assert [f["id"] for f in result.present] == ["ck-free"]
    assert "aiter has no CK kernels or sources" in result.present[0]["evidence"][0]


def test_the_cli_exits_1_and_prints_one_table(offline_builds):
    built = offline_builds["gfx950-ckfree"]
    result = subprocess.run([sys.executable, "-m", "invoke", "audit", built.clean, "--arch", "gfx950"], cwd=REPO,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "tuned-gemm-default" in result.stderr and "PRESENT" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_image_of_another_arch_is_named(docker_engine, offline_builds):
    built = offline_builds["gfx950-ckfree"]
    result = audit_image.audit(built.candidate, arch=Arch.GFX942, model=None, tp=(1,), report_dir=None, device=False,
                         client=docker_engine)
    assert "gpu-archs" in [f["id"] for f in result.present]
