"""On a GPU (the H200 here): the compiled path, full shapes, and the estimator against the compiler."""

import json

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU: torch.cuda.is_available() is False")


def test_compiled_kernels_and_estimator(tmp_path, run_cli):
    out = tmp_path / "r.json"
    proc = run_cli("--arch", "gfx950", "--device", "cuda", "--only", "gemm-triton", "moe-triton", "lds-budget",
                   "--json-file", str(out), env={"TRITON_INTERPRET": "0"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    checks = {c["name"]: c for c in json.loads(out.read_text())["checks"]}
    own = [c for c in checks["gemm-triton"]["cases"] if c["backend"].startswith("triton")]
    assert own and all(c["backend"] == "triton(compiled)" and c["status"] == "passed" for c in own)
    assert any("M=4096" in c["name"] or "K=4096" in c["name"] for c in own)  # full shapes on the GPU
    rows = checks["lds-budget"]["metrics"]["compiler"]
    assert rows and all(r["compiler_shared"] > 0 for r in rows)


def test_aiter_kernels_through_the_adapter_compile_and_pass(tmp_path, run_cli, aiter_checkout):
    out = tmp_path / "r.json"
    proc = run_cli("--arch", "gfx950", "--device", "cuda", "--aiter-src", str(aiter_checkout), "--only",
                   "gemm-triton", "moe-triton", "--json-file", str(out), env={"TRITON_INTERPRET": "0"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    launches = [r for c in json.loads(out.read_text())["checks"] for r in c["metrics"]["aiter_launches"]]
    assert launches and all(r["compile_shared"] for r in launches)
