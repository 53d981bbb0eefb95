"""`python -m patches` end to end, as people and the Dockerfile stage run it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from patch_helpers import (
    ACTIVATION,
    ENVS,
    JIT_CORE,
    LAYERNORM,
    LINEAR,
    MOE,
    REPO,
    TOPK,
    TUNED_GEMM,
    make_root,
    snapshot,
)

NAMES = [
    "tuned-gemm-hipblaslt",
    "no-asm-gemm-gfx950",
    "jit-core-runtime-error",
    "atom-ck-free-triton-gemm",
    "atom-ck-free-triton-moe",
    "atom-ck-free-triton-norm",
    "atom-ck-free-native-act",
    "atom-ck-free-native-topk",
]
OUTCOMES = {"applied", "already-applied", "upstream-fixed", "not-present", "drifted"}


def cli(*args):
    cmd = [sys.executable, "-m", "patches", *map(str, args)]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)  # noqa: S603


def one_line_error(proc, *words):
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("patches: error: ")
    assert all(word in lines[0] for word in words), lines[0]


@pytest.fixture
def full_root(tmp_path):
    return make_root(
        tmp_path,
        {
            TUNED_GEMM: "aiter/tuned_gemm_new.before",
            JIT_CORE: "aiter/core_fixed",
            LINEAR: "atom/linear_plain.before",
            ENVS: "atom/envs_without.before",
            MOE: "atom/moe_plain.before",
            LAYERNORM: "atom/layernorm_plain.before",
            ACTIVATION: "atom/activation_plain.before",
            TOPK: "atom/topk_plain.before",
        },
    )


def assert_schema(report, root, mode, exit_code):
    assert list(report) == ["root", "mode", "exit_code", "patches"]
    assert (report["root"], report["mode"], report["exit_code"]) == (str(root), mode, exit_code)
    for entry in report["patches"]:
        assert list(entry) == ["name", "target", "outcome", "detail", "diff"]
        assert all(isinstance(value, str) for value in entry.values())
        assert entry["outcome"] in OUTCOMES


def test_list_names_every_patch():
    proc = cli("list")
    assert proc.returncode == 0
    assert all(name in proc.stdout for name in NAMES)
    assert "atom/utils/envs.py" in proc.stdout


def test_check_apply_check(full_root):
    before = snapshot(full_root)
    check = cli("check", "--root", full_root)
    assert check.returncode == 1
    assert "would apply" in check.stdout and "--- a/aiter/tuned_gemm.py" in check.stdout
    assert snapshot(full_root) == before

    apply = cli("apply", "--root", full_root, "--json")
    report = json.loads(apply.stdout)
    assert_schema(report, full_root, "apply", 0)
    assert apply.returncode == 0
    assert [p["name"] for p in report["patches"]] == NAMES
    assert [p["outcome"] for p in report["patches"]] == ["applied", "applied", "upstream-fixed", *["applied"] * 5]
    assert report["patches"][3]["target"] == LINEAR
    assert "+++ b/atom/utils/envs.py" in report["patches"][3]["diff"]
    patched = snapshot(full_root)

    again = cli("check", "--root", full_root, "--json")
    assert again.returncode == 0
    assert_schema(json.loads(again.stdout), full_root, "check", 0)
    assert cli("apply", "--root", full_root).returncode == 0
    assert snapshot(full_root) == patched


def test_drift_exits_2_and_writes_nothing(tmp_path):
    root = make_root(
        tmp_path, {TUNED_GEMM: "aiter/tuned_gemm_new.before", JIT_CORE: "aiter/core_drift_two_exits"}
    )
    before = snapshot(root)
    proc = cli("apply", "--root", root, "--json")
    assert proc.returncode == 2
    report = json.loads(proc.stdout)
    assert_schema(report, root, "apply", 2)
    drifted = [p for p in report["patches"] if p["outcome"] == "drifted"]
    assert [p["detail"] for p in drifted] == [
        "jit-core-runtime-error: aiter/jit/core.py:5: expected one `raise SystemExit(...)` in "
        "build_module(), found 2 (lines 5, 7)"
    ]
    assert "patches: drift: jit-core-runtime-error: aiter/jit/core.py:5:" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(root) == before
    assert cli("check", "--root", root).returncode == 2


def test_only_selects_and_keeps_catalog_order(full_root):
    proc = cli(
        "check", "--root", full_root, "--json", "--only", "jit-core-runtime-error", "tuned-gemm-hipblaslt"
    )
    report = json.loads(proc.stdout)
    assert [p["name"] for p in report["patches"]] == ["tuned-gemm-hipblaslt", "jit-core-runtime-error"]
    assert proc.returncode == 1


def test_only_unknown_patch_lists_the_known_ones(full_root):
    one_line_error(cli("apply", "--root", full_root, "--only", "no-such-patch"), "no-such-patch", *NAMES)


def test_only_patch_with_absent_target(tmp_path):
    root = make_root(tmp_path, {JIT_CORE: "aiter/core_fixed"})
    one_line_error(
        cli("apply", "--root", root, "--only", "tuned-gemm-hipblaslt"), "tuned-gemm-hipblaslt", TUNED_GEMM
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("apply",), ("--root",)),
        (("check", "--root", "/nonexistent/root"), ("not a directory",)),
        (("bogus",), ("bogus",)),
    ],
)
def test_usage_errors_are_one_line(args, words):
    one_line_error(cli(*args), *words)


def test_root_without_aiter_or_atom(tmp_path):
    one_line_error(cli("check", "--root", tmp_path), "neither aiter/ nor atom/")
