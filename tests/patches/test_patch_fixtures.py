"""Hand-written fixtures: (before, after) pairs, byte-identical no-ops, drift."""

from __future__ import annotations

import io
import tokenize

import pytest
from patch_helpers import (
    ACTIVATION,
    ENVS,
    JIT_CORE,
    LAYERNORM,
    LINEAR,
    MOE,
    TOPK,
    TUNED_GEMM,
    fixture_bytes,
    make_root,
    snapshot,
)

from patches import engine
from patches.catalog import PATCHES, by_name

# patch name, {target: (before fixture, after fixture)}
PAIRS = [
    (
        "atom-ck-free-triton-gemm",
        {
            LINEAR: ("atom/linear_plain.before", "atom/linear_plain.after"),
            ENVS: ("atom/envs_without.before", "atom/envs_without.after"),
        },
    ),
    (
        "atom-ck-free-triton-gemm",
        {
            LINEAR: ("atom/linear_multiline.before", "atom/linear_multiline.after"),
            ENVS: ("atom/envs_last_entry.before", "atom/envs_last_entry.after"),
        },
    ),
    (
        "atom-ck-free-triton-gemm",
        {
            LINEAR: ("atom/linear_fixed", "atom/linear_fixed"),
            ENVS: ("atom/envs_without.before", "atom/envs_without.after"),
        },
    ),
    (
        "tuned-gemm-hipblaslt",
        {TUNED_GEMM: ("aiter/tuned_gemm_new.before", "aiter/tuned_gemm_new.after-hipblaslt")},
    ),
    (
        "no-asm-gemm-gfx950",
        {TUNED_GEMM: ("aiter/tuned_gemm_new.before", "aiter/tuned_gemm_new.after-no-asm")},
    ),
    ("no-asm-gemm-gfx950", {TUNED_GEMM: ("aiter/tuned_gemm_fixed", "aiter/tuned_gemm_fixed.after-no-asm")}),
    ("jit-core-runtime-error", {JIT_CORE: ("aiter/core_old.before", "aiter/core_old.after")}),
    # Shapes upstream can move to without changing meaning (see patches/README.md).
    (
        "tuned-gemm-hipblaslt",
        {TUNED_GEMM: ("aiter/tuned_gemm_else_branch.before", "aiter/tuned_gemm_else_branch.after-hipblaslt")},
    ),
    ("tuned-gemm-hipblaslt", {TUNED_GEMM: ("aiter/tuned_gemm_elif.before", "aiter/tuned_gemm_elif.after")}),
    (
        "tuned-gemm-hipblaslt",
        {TUNED_GEMM: ("aiter/tuned_gemm_negated.before", "aiter/tuned_gemm_negated.after")},
    ),
    (
        "tuned-gemm-hipblaslt",
        {TUNED_GEMM: ("aiter/tuned_gemm_helper.before", "aiter/tuned_gemm_helper.after")},
    ),
    ("tuned-gemm-hipblaslt", {TUNED_GEMM: ("aiter/tuned_gemm_match.before", "aiter/tuned_gemm_match.after")}),
    (
        "tuned-gemm-hipblaslt",
        {TUNED_GEMM: ("aiter/tuned_gemm_annotated.before", "aiter/tuned_gemm_annotated.after")},
    ),
    (
        "no-asm-gemm-gfx950",
        {TUNED_GEMM: ("aiter/tuned_gemm_elif.before", "aiter/tuned_gemm_elif.after-no-asm")},
    ),
    ("jit-core-runtime-error", {JIT_CORE: ("aiter/core_sys_exit.before", "aiter/core_sys_exit.after")}),
    (
        "jit-core-runtime-error",
        {JIT_CORE: ("aiter/core_unnamed_handler.before", "aiter/core_unnamed_handler.after")},
    ),
    ("jit-core-runtime-error", {JIT_CORE: ("aiter/core_helper.before", "aiter/core_helper.after")}),
    (
        "atom-ck-free-triton-gemm",
        {
            LINEAR: ("atom/linear_two_returns.before", "atom/linear_two_returns.after"),
            ENVS: ("atom/envs_without.before", "atom/envs_without.after"),
        },
    ),
    (
        "atom-ck-free-triton-gemm",
        {
            LINEAR: ("atom/linear_alias.before", "atom/linear_alias.after"),
            ENVS: ("atom/envs_module_level_fixed", "atom/envs_module_level_fixed"),
        },
    ),
    ("atom-ck-free-triton-moe", {MOE: ("atom/moe_plain.before", "atom/moe_plain.after")}),
    ("atom-ck-free-triton-norm", {LAYERNORM: ("atom/layernorm_plain.before", "atom/layernorm_plain.after")}),
    ("atom-ck-free-native-act", {ACTIVATION: ("atom/activation_plain.before", "atom/activation_plain.after")}),
    ("atom-ck-free-native-topk", {TOPK: ("atom/topk_plain.before", "atom/topk_plain.after")}),
]
PAIR_IDS = [f"{name}:{'+'.join(before for before, _ in files.values())}" for name, files in PAIRS]

# Code that already does the right thing its own way: must come back byte-identical.
UPSTREAM_FIXED = [
    ("atom-ck-free-triton-gemm", {LINEAR: "atom/linear_fixed", ENVS: "atom/envs_fixed"}),
    ("tuned-gemm-hipblaslt", {TUNED_GEMM: "aiter/tuned_gemm_fixed"}),
    ("jit-core-runtime-error", {JIT_CORE: "aiter/core_fixed"}),
    ("tuned-gemm-hipblaslt", {TUNED_GEMM: "aiter/tuned_gemm_fixed_arch_torch"}),
    ("jit-core-runtime-error", {JIT_CORE: "aiter/core_bare_raise"}),
    ("jit-core-runtime-error", {JIT_CORE: "aiter/core_reraise_name"}),
    ("jit-core-runtime-error", {JIT_CORE: "aiter/core_custom_error"}),
    ("atom-ck-free-triton-moe", {MOE: "atom/moe_fixed"}),
    ("atom-ck-free-triton-norm", {LAYERNORM: "atom/layernorm_fixed"}),
    ("atom-ck-free-native-act", {ACTIVATION: "atom/activation_fixed"}),
    ("atom-ck-free-native-topk", {TOPK: "atom/topk_fixed"}),
]

# patch, files, where (FILE:LINE), what the message must say
DRIFTS = [
    (
        "tuned-gemm-hipblaslt",
        {TUNED_GEMM: "aiter/tuned_gemm_drift_two_defaults"},
        "aiter/tuned_gemm.py:10",
        "found 2 (lines 10, 13)",
    ),
    (
        "tuned-gemm-hipblaslt",
        {TUNED_GEMM: "aiter/tuned_gemm_drift_renamed"},
        "aiter/tuned_gemm.py:1",
        "module-level `def get_GEMM_A16W16_config`",
    ),
    (
        "no-asm-gemm-gfx950",
        {TUNED_GEMM: "aiter/tuned_gemm_drift_renamed"},
        "aiter/tuned_gemm.py:1",
        "module-level `def get_GEMM_A16W16_config`",
    ),
    (
        "jit-core-runtime-error",
        {JIT_CORE: "aiter/core_drift_two_exits"},
        "aiter/jit/core.py:5",
        "found 2 (lines 5, 7)",
    ),
    ("jit-core-runtime-error", {JIT_CORE: "aiter/core_drift_no_raise"}, "aiter/jit/core.py:1", "SystemExit"),
    (
        "jit-core-runtime-error",
        {JIT_CORE: "aiter/core_drift_bare_except"},
        "aiter/jit/core.py:5",
        "`except <type> [as <name>]:` block",
    ),
    (
        "tuned-gemm-hipblaslt",
        {TUNED_GEMM: "aiter/tuned_gemm_drift_ifexp"},
        "aiter/tuned_gemm.py:5",
        "found none (libtype set by an expression at line 7)",
    ),
    (
        "tuned-gemm-hipblaslt",
        {TUNED_GEMM: "aiter/tuned_gemm_drift_no_solidx"},
        "aiter/tuned_gemm.py:7",
        "one constant `solidx`",
    ),
    (
        "tuned-gemm-hipblaslt",
        {TUNED_GEMM: "aiter/tuned_gemm_drift_one_line"},
        "aiter/tuned_gemm.py:6",
        "on a line of its own",
    ),
    (
        "atom-ck-free-triton-gemm",
        {LINEAR: "atom/linear_drift_one_line", ENVS: "atom/envs_without.before"},
        "atom/model_ops/linear.py:4",
        "body on lines of its own",
    ),
    (
        "atom-ck-free-triton-gemm",
        {LINEAR: "atom/linear_drift_no_envs", ENVS: "atom/envs_without.before"},
        "atom/model_ops/linear.py:1",
        "from atom.utils import envs",
    ),
    (
        "atom-ck-free-triton-gemm",
        {LINEAR: "atom/linear_plain.before", ENVS: "atom/envs_drift_no_table"},
        "atom/utils/envs.py:1",
        "environment_variables",
    ),
    ("atom-ck-free-triton-gemm", {LINEAR: "atom/linear_plain.before"}, "atom/utils/envs.py", "to exist"),
    ("atom-ck-free-triton-moe", {MOE: "atom/moe_drift_positional"}, "atom/model_ops/moe.py:13", "not positionally"),
    ("atom-ck-free-triton-norm", {LAYERNORM: "atom/layernorm_drift_half"}, "atom/model_ops/layernorm.py:5",
     "or neither"),
    ("atom-ck-free-native-act", {ACTIVATION: "atom/activation_drift_no_native"}, "atom/model_ops/activation.py:5",
     "SiluAndMul.forward_native"),
    ("atom-ck-free-native-topk", {TOPK: "atom/topk_drift_no_shared"}, "atom/model_ops/topK.py:2",
     "num_fused_shared_experts"),
]


def run_one(root, name, mode="apply"):
    report = engine.run(root, [by_name()[name]], mode)
    return report, report.results[0]


def side(files, index):
    return {target: pair[index] for target, pair in files.items()}


def crlf(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


def comments(data: bytes) -> list[str]:
    tokens = tokenize.tokenize(io.BytesIO(data).readline)
    return [tok.string for tok in tokens if tok.type == tokenize.COMMENT]


@pytest.mark.parametrize(("name", "files"), PAIRS, ids=PAIR_IDS)
def test_before_becomes_after(tmp_path, name, files):
    root = make_root(tmp_path, side(files, 0))
    report, result = run_one(root, name)
    assert (result.outcome, report.exit_code) == ("applied", 0), result.detail
    assert snapshot(root) == {t: fixture_bytes(after) for t, after in side(files, 1).items()}
    assert result.diff.startswith("--- a/")


@pytest.mark.parametrize(("name", "files"), PAIRS, ids=PAIR_IDS)
def test_after_is_already_applied_byte_for_byte(tmp_path, name, files):
    root = make_root(tmp_path, side(files, 1))
    before = snapshot(root)
    report, result = run_one(root, name)
    assert result.outcome == "already-applied"
    assert (report.written, result.diff, snapshot(root)) == ([], "", before)


@pytest.mark.parametrize(("name", "files"), PAIRS, ids=PAIR_IDS)
def test_crlf_files_stay_crlf(tmp_path, name, files):
    befores = {t: crlf(fixture_bytes(f)) for t, f in side(files, 0).items()}
    root = make_root(tmp_path, befores)
    _, result = run_one(root, name)
    assert result.outcome == "applied", result.detail
    assert snapshot(root) == {t: crlf(fixture_bytes(f)) for t, f in side(files, 1).items()}
    assert run_one(root, name)[1].outcome == "already-applied"


@pytest.mark.parametrize(("name", "files"), PAIRS, ids=PAIR_IDS)
def test_every_comment_survives(tmp_path, name, files):
    for before, after in files.values():
        kept = comments(fixture_bytes(after))
        assert all(comment in kept for comment in comments(fixture_bytes(before)))


@pytest.mark.parametrize(
    ("name", "files"), UPSTREAM_FIXED, ids=[f"{n}:{'+'.join(f.values())}" for n, f in UPSTREAM_FIXED]
)
def test_upstream_fixed_code_is_left_alone(tmp_path, name, files):
    root = make_root(tmp_path, files)
    before = snapshot(root)
    for mode in ("check", "apply"):
        report, result = run_one(root, name, mode)
        assert (result.outcome, report.exit_code, result.diff) == ("upstream-fixed", 0, "")
        assert "upstream" in result.detail
    assert snapshot(root) == before


@pytest.mark.parametrize(("name", "files", "where", "says"), DRIFTS, ids=[d[0] + ":" + d[2] for d in DRIFTS])
def test_drift_names_patch_file_and_line(tmp_path, name, files, where, says):
    root = make_root(tmp_path, files)
    before = snapshot(root)
    report, result = run_one(root, name)
    assert (result.outcome, report.exit_code) == ("drifted", 2)
    assert result.detail.startswith(f"{name}: {where}: expected ")
    assert says in result.detail
    assert snapshot(root) == before


def test_one_drift_stops_every_write(tmp_path):
    root = make_root(
        tmp_path,
        {
            TUNED_GEMM: "aiter/tuned_gemm_new.before",
            JIT_CORE: "aiter/core_drift_two_exits",
            LINEAR: "atom/linear_plain.before",
            ENVS: "atom/envs_without.before",
        },
    )
    before = snapshot(root)
    report = engine.run(root, PATCHES, "apply")
    outcomes = [r.outcome for r in report.results]
    assert outcomes == ["applied", "applied", "drifted", "applied", *["not-present"] * 4]
    assert (report.exit_code, report.written, snapshot(root)) == (2, [], before)
    assert report.results[0].detail.startswith("not written (another patch drifted): ")


def test_both_aiter_patches_share_one_file(tmp_path):
    root = make_root(tmp_path, {TUNED_GEMM: "aiter/tuned_gemm_new.before"})
    aiter_patches = PATCHES[:2]
    first = engine.run(root, aiter_patches, "apply")
    assert [r.outcome for r in first.results] == ["applied", "applied"]
    assert first.written == [TUNED_GEMM]
    patched = (root / TUNED_GEMM).read_bytes()
    assert b"'hipblaslt'" in patched and b"@_atom_build_no_asm_gfx950" in patched
    again = engine.run(root, aiter_patches, "apply")
    assert [r.outcome for r in again.results] == ["already-applied", "already-applied"]
    assert (root / TUNED_GEMM).read_bytes() == patched


def test_check_reports_without_writing(tmp_path):
    root = make_root(tmp_path, {JIT_CORE: "aiter/core_old.before"})
    before = snapshot(root)
    report, result = run_one(root, "jit-core-runtime-error", "check")
    assert (result.outcome, report.exit_code, report.written) == ("applied", 1, [])
    assert "+            raise RuntimeError(" in result.diff
    assert snapshot(root) == before


def test_missing_target_is_not_present(tmp_path):
    root = make_root(tmp_path, {JIT_CORE: "aiter/core_fixed"})
    report = engine.run(root, PATCHES, "apply")
    outcomes = {r.name: r.outcome for r in report.results}
    assert outcomes["tuned-gemm-hipblaslt"] == "not-present"
    assert outcomes["atom-ck-free-triton-gemm"] == "not-present"
    assert report.exit_code == 0
