"""The patches against the real amd-aiter 0.1.7.post2.dev18 wheel from PyPI.

Its files are the pre-fix code: the torch fallback in tuned_gemm.py and
SystemExit in jit/core.py. Patched functions are also executed, with small
stubs standing in for torch, pandas and the GPU.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import subprocess
import sys
import types

import pytest
from patch_helpers import JIT_CORE, REPO, TUNED_GEMM, snapshot
from patch_stubs import RecordingLogger, build_module_stubs, call_build_module, read_csv

from patches import engine
from patches.catalog import PATCHES

pytestmark = pytest.mark.network

EXPECTED_FIRST_RUN = {
    "tuned-gemm-hipblaslt": "applied",
    "no-asm-gemm-gfx950": "applied",
    "jit-core-runtime-error": "applied",
    "atom-ck-free-triton-gemm": "not-present",
    "atom-ck-free-triton-moe": "not-present",
    "atom-ck-free-triton-norm": "not-present",
    "atom-ck-free-native-act": "not-present",
    "atom-ck-free-native-topk": "not-present",
}


def outcomes(report):
    return {r.name: r.outcome for r in report.results}


def test_apply_reapply_and_check(aiter_root):
    pristine = snapshot(aiter_root)
    check = engine.run(aiter_root, PATCHES, "check")
    assert (outcomes(check), check.exit_code) == (EXPECTED_FIRST_RUN, 1)
    assert snapshot(aiter_root) == pristine

    first = engine.run(aiter_root, PATCHES, "apply")
    assert (outcomes(first), first.exit_code) == (EXPECTED_FIRST_RUN, 0)
    assert sorted(first.written) == [JIT_CORE, TUNED_GEMM]
    patched = snapshot(aiter_root)

    again = engine.run(aiter_root, PATCHES, "apply")
    assert set(outcomes(again).values()) == {"already-applied", "not-present"}
    assert (again.written, snapshot(aiter_root)) == ([], patched)
    assert engine.run(aiter_root, PATCHES, "check").exit_code == 0


def test_diffs_change_only_the_anchored_lines(aiter_root):
    diffs = {r.name: r.diff for r in engine.run(aiter_root, PATCHES, "apply").results}
    removed = {
        name: [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
        for name, diff in diffs.items()
    }
    assert removed["tuned-gemm-hipblaslt"] == [
        '-            default_config["libtype"] = "torch"',
        '-            default_config["solidx"] = 0',
    ]
    assert removed["no-asm-gemm-gfx950"] == []  # a decorator and a helper, nothing removed
    assert removed["jit-core-runtime-error"] == ["-            raise SystemExit("]
    assert "+@_atom_build_no_asm_gfx950\n def get_GEMM_A16W16_config(" in diffs["no-asm-gemm-gfx950"]


def test_cli_end_to_end_on_the_wheel(aiter_root):
    def cli(*args):
        cmd = [sys.executable, "-m", "patches", *args, "--root", str(aiter_root), "--json"]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)  # noqa: S603
        return proc.returncode, json.loads(proc.stdout)

    code, report = cli("apply")
    assert code == report["exit_code"] == 0
    assert {p["name"]: p["outcome"] for p in report["patches"]} == EXPECTED_FIRST_RUN
    code, report = cli("check")
    assert code == 0
    assert all(p["diff"] == "" for p in report["patches"])


# --- executing the patched tuned_gemm lookup -----------------------------------------

CSV_HEADER = (
    "M,N,K,bias,dtype,outdtype,scaleAB,cu_num,libtype,solidx,splitK,us,kernelName,err_ratio,tflops,bw"
)
CSV_ROWS = [
    "64,256,5120,False,torch.bfloat16,torch.float32,False,256,asm,1,10,8.3,_ZN5aiter_fake_asm_64E,0.0,20.0,400.0",
    "80,256,5120,False,torch.bfloat16,torch.float32,False,256,asm,2,10,8.8,_ZN5aiter_fake_asm_80E,0.0,23.0,400.0",
    "96,256,5120,False,torch.bfloat16,torch.float32,False,256,hipblaslt,7,0,9.1,,0.0,22.0,390.0",
]


@pytest.fixture
def tuned_env(tmp_path, monkeypatch):
    """Globals for the lookup functions, plus the stub chip_info the patch imports."""
    tuned_csv = tmp_path / "bf16_tuned_gemm.csv"
    tuned_csv.write_text("\n".join([CSV_HEADER, *CSV_ROWS]) + "\n")
    state = types.SimpleNamespace(gfx="gfx942", warnings=[])
    chip_info = types.ModuleType("aiter.jit.utils.chip_info")
    chip_info.get_gfx = lambda: state.gfx
    for name in ("aiter", "aiter.jit", "aiter.jit.utils"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "aiter.jit.utils.chip_info", chip_info)
    logger = types.SimpleNamespace(info=lambda msg: None, warning=state.warnings.append)
    state.globals = {
        "functools": functools,
        "os": os,
        "pd": types.SimpleNamespace(read_csv=read_csv),
        "AITER_CONFIG_GEMM_BF16_FILE": str(tuned_csv),
        "AITER_LOG_TUNED_CONFIG": True,
        "get_cu_num": lambda: 256,
        "get_padded_m": lambda M, N, K, gl: M,
        "dtypes": types.SimpleNamespace(fp16=object(), bf16=object()),
        "logger": logger,
    }
    return state


def lookup_from(data: bytes, env: dict):
    """The module's lookup functions (and the patch's helper, when present), in file order."""
    wanted = {"get_GEMM_A16W16_config_", "_atom_build_no_asm_gfx950", "get_GEMM_A16W16_config"}
    tree = ast.parse(data)
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    namespace = dict(env)
    exec(compile(ast.Module(body=body, type_ignores=[]), "tuned_gemm", "exec"), namespace)
    return namespace["get_GEMM_A16W16_config"], namespace["get_GEMM_A16W16_config_"]


def bf16_f32(M, N=256, K=5120):
    return {"M": M, "N": N, "K": K, "bias": False, "dtype": "torch.bfloat16", "otype": "torch.float32"}


def test_harness_sees_upstream_behaviour(aiter_root, tuned_env):
    get_config, _ = lookup_from((aiter_root / TUNED_GEMM).read_bytes(), tuned_env.globals)
    assert get_config(**bf16_f32(4096, 4096, 4096))["libtype"] == "torch"
    tuned_env.gfx = "gfx950"
    assert get_config(**bf16_f32(64))["libtype"] == "asm"


def test_untuned_shape_gets_hipblaslt(aiter_root, tuned_env):
    engine.run(aiter_root, PATCHES, "apply")
    get_config, _ = lookup_from((aiter_root / TUNED_GEMM).read_bytes(), tuned_env.globals)
    config = get_config(**bf16_f32(4096, 4096, 4096))
    assert (config["libtype"], config["solidx"]) == ("hipblaslt", -1)


def test_asm_rows_are_not_used_on_gfx950(aiter_root, tuned_env):
    engine.run(aiter_root, PATCHES, "apply")
    get_config, get_table = lookup_from((aiter_root / TUNED_GEMM).read_bytes(), tuned_env.globals)
    tuned_env.gfx = "gfx950"
    for m in (64, 80):
        config = get_config(**bf16_f32(m))
        assert (config["libtype"], config["solidx"], config["kernelName"]) == ("hipblaslt", -1, "")
    assert get_config(**bf16_f32(96))["solidx"] == 7  # a tuned hipBLASLt row is kept as tuned
    assert len(tuned_env.warnings) == 1
    table_row = get_table()[(256, 64, 256, 5120, False, "torch.bfloat16", "torch.float32", False)]
    assert table_row["libtype"] == "asm"  # the cached CSV table itself is not rewritten


def test_asm_rows_stay_on_gfx942(aiter_root, tuned_env):
    engine.run(aiter_root, PATCHES, "apply")
    get_config, _ = lookup_from((aiter_root / TUNED_GEMM).read_bytes(), tuned_env.globals)
    config = get_config(**bf16_f32(64))
    assert (config["libtype"], config["kernelName"]) == ("asm", "_ZN5aiter_fake_asm_64E")
    assert tuned_env.warnings == []


# --- executing the patched build_module -----------------------------------------------


def build_module_from(data: bytes, tmp_path):
    """build_module from core.py, with the shared stubs (patch_stubs): its compiler fails like a broken hipcc."""
    tree = ast.parse(data)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "build_module")
    namespace = build_module_stubs(tmp_path, RecordingLogger())
    exec(compile(ast.Module(body=[node], type_ignores=[]), "core", "exec"), namespace)
    return lambda: call_build_module(namespace["build_module"])


def test_failed_build_raises_runtime_error(aiter_root, tmp_path):
    engine.run(aiter_root, PATCHES, "apply")
    build = build_module_from((aiter_root / JIT_CORE).read_bytes(), tmp_path)
    with pytest.raises(RuntimeError) as info:  # an Exception: the `except Exception` of a CK-free fallback sees it
        build()
    assert isinstance(info.value.__cause__, OSError)


def test_unpatched_failed_build_escapes_except_exception(aiter_root, tmp_path):
    build = build_module_from((aiter_root / JIT_CORE).read_bytes(), tmp_path)
    with pytest.raises(SystemExit):
        try:
            build()
        except Exception:
            pytest.fail("SystemExit should not be an Exception")
