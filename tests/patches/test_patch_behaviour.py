"""Run the patched fixture code: the rewrites must do what they say, not just parse."""

from __future__ import annotations

import ast
import importlib.util
import logging
import sys
import types

import pytest
from patch_helpers import ENVS, JIT_CORE, LINEAR, TUNED_GEMM, fixture_bytes, make_root

from patches import engine
from patches.catalog import PATCHES, by_name


class RecordingLogger:
    def __init__(self):
        self.records: list[tuple[str, str]] = []

    def __getattr__(self, level):
        return lambda message, *args: self.records.append((level, str(message)))


def patched(tmp_path, name, files, target):
    root = make_root(tmp_path, files)
    engine.run(root, [by_name()[name]], "apply")
    return (root / target).read_bytes()


def function_from(source: bytes, name: str, env: dict):
    """Execute one module-level function of source with stub globals."""
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    namespace = dict(env)
    exec(compile(ast.Module(body=[node], type_ignores=[]), name, "exec"), namespace)
    return namespace[name]


# --- ATOM -------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [(None, False), ("0", False), ("", False), ("1", True)])
def test_envs_gains_ck_free(tmp_path, monkeypatch, value, expected):
    data = patched(
        tmp_path,
        "atom-ck-free-triton-gemm",
        {LINEAR: "atom/linear_plain.before", ENVS: "atom/envs_without.before"},
        ENVS,
    )
    path = tmp_path / "envs_patched.py"
    path.write_bytes(data)
    spec = importlib.util.spec_from_file_location("envs_patched", path)
    envs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(envs)
    monkeypatch.delenv("ATOM_CK_FREE", raising=False)
    if value is not None:
        monkeypatch.setenv("ATOM_CK_FREE", value)
    assert envs.ATOM_CK_FREE is expected
    assert envs.ATOM_USE_TRITON_GEMM is False  # its neighbours still work


@pytest.mark.parametrize("shape", ["atom/linear_plain", "atom/linear_multiline"])
@pytest.mark.parametrize(
    ("use_triton", "ck_free"), [(False, False), (True, False), (False, True), (True, True)]
)
def test_use_triton_gemm_follows_ck_free(tmp_path, shape, use_triton, ck_free):
    files = {LINEAR: f"{shape}.before", ENVS: "atom/envs_without.before"}
    data = patched(tmp_path, "atom-ck-free-triton-gemm", files, LINEAR)
    envs = types.SimpleNamespace(ATOM_USE_TRITON_GEMM=use_triton, ATOM_CK_FREE=ck_free)
    use_triton_gemm = function_from(data, "use_triton_gemm", {"envs": envs, "prefer_triton": lambda: False})
    assert bool(use_triton_gemm()) is (use_triton or ck_free)


# --- aiter tuned_gemm (a newer-style stand-in) ------------------------------------


@pytest.fixture
def chip(monkeypatch):
    """Stub aiter modules: what `from aiter... import` resolves to while the test runs."""
    state = types.SimpleNamespace(gfx="gfx942", logger=RecordingLogger())
    chip_info = types.ModuleType("aiter.jit.utils.chip_info")
    chip_info.get_gfx = lambda: state.gfx
    chip_info.get_cu_num = lambda: 256
    aiter = types.ModuleType("aiter")
    aiter.logger = state.logger
    for name, module in {
        "aiter": aiter,
        "aiter.jit": types.ModuleType("aiter.jit"),
        "aiter.jit.utils": types.ModuleType("aiter.jit.utils"),
        "aiter.jit.utils.chip_info": chip_info,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    return state


def load_tuned_gemm(data: bytes):
    namespace: dict = {"__name__": "tuned_gemm_under_test"}
    exec(compile(data, "tuned_gemm", "exec"), namespace)
    return namespace["get_GEMM_A16W16_config"]


@pytest.fixture
def new_style_both(tmp_path):
    root = make_root(tmp_path, {TUNED_GEMM: "aiter/tuned_gemm_new.before"})
    engine.run(root, PATCHES[:2], "apply")
    return (root / TUNED_GEMM).read_bytes()


BF16 = ("torch.bfloat16", "torch.bfloat16")


@pytest.mark.parametrize(
    ("gfx", "shape", "bpreshuffle", "libtype", "solidx"),
    [
        ("gfx942", (512, 4096, 4096), False, "hipblaslt", -1),  # untuned: hipBLASLt, not torch
        ("gfx950", (512, 4096, 4096), True, "hipblaslt", -1),  # bpreshuffle asm default: not on gfx950
        ("gfx942", (512, 4096, 4096), True, "hipblaslt", -1),  # upstream's gfx942 case, unchanged
        ("gfx1250", (512, 4096, 4096), True, "asm", 0),  # asm stays where it is not banned
        ("gfx1250", (1, 128, 128), False, "triton", 0),  # upstream's gfx1250 Triton route
        ("gfx1250", (1, 64, 64), False, "torch", 0),  # upstream's gfx1250 skinny special case
        ("gfx942", (2, 64, 64), False, "skinny", 2),
    ],
)
def test_new_style_selection(chip, new_style_both, gfx, shape, bpreshuffle, libtype, solidx):
    chip.gfx = gfx
    config = load_tuned_gemm(new_style_both)(*shape, False, *BF16, bpreshuffle=bpreshuffle)
    assert (config["libtype"], config["solidx"]) == (libtype, solidx)


def test_unpatched_stand_in_really_chose_torch_and_asm(chip):
    get_config = load_tuned_gemm(fixture_bytes("aiter/tuned_gemm_new.before"))
    assert get_config(512, 4096, 4096, False, *BF16)["libtype"] == "torch"
    chip.gfx = "gfx950"
    assert get_config(256, 4096, 4096, False, *BF16, bpreshuffle=True)["libtype"] == "asm"


def test_gfx950_asm_ban_warns_once(chip, new_style_both):
    chip.gfx = "gfx950"
    get_config = load_tuned_gemm(new_style_both)
    for m in (64, 128, 256):
        assert get_config(m, 4096, 4096, False, *BF16, bpreshuffle=True)["libtype"] == "hipblaslt"
    warnings = [msg for level, msg in chip.logger.records if level == "warning"]
    assert len(warnings) == 1
    assert "gfx950" in warnings[0]


# --- aiter jit/core ---------------------------------------------------------------


def build_module_from(data: bytes):
    def jit_compile(md_name):
        raise OSError(f"hipcc failed for {md_name}")

    env = {"logger": logging.getLogger("test"), "_jit_compile": jit_compile}
    return function_from(data, "build_module", env)


def test_failed_build_is_an_exception_callers_can_catch(tmp_path):
    data = patched(tmp_path, "jit-core-runtime-error", {JIT_CORE: "aiter/core_old.before"}, JIT_CORE)
    with pytest.raises(RuntimeError) as info:  # an Exception: what a CK-free fallback's `except Exception` sees
        build_module_from(data)("module_gemm")
    assert isinstance(info.value.__cause__, OSError)


def test_unpatched_build_failure_escapes_except_exception():
    with pytest.raises(SystemExit):
        try:
            build_module_from(fixture_bytes("aiter/core_old.before"))("module_gemm")
        except Exception:
            pytest.fail("SystemExit should not be an Exception")


# --- the shapes upstream may move to (fixtures), executed after patching ----------------

UNTUNED_CALL = {"M": 512, "N": 4096, "K": 4096, "bias": False, "dtype": BF16[0], "otype": BF16[1]}
# fixture, gfx, call overrides, (libtype, solidx) after tuned-gemm-hipblaslt
SHAPE_CHOICES = [
    ("aiter/tuned_gemm_else_branch.before", "gfx942", {}, ("hipblaslt", -1)),
    ("aiter/tuned_gemm_else_branch.before", "gfx950", {}, ("hipblaslt", -1)),
    ("aiter/tuned_gemm_else_branch.before", "gfx1250", {}, ("triton", 0)),  # the Triton branch stays
    ("aiter/tuned_gemm_else_branch.before", "gfx1250", {"scaleAB": True}, ("hipblaslt", -1)),
    ("aiter/tuned_gemm_elif.before", "gfx950", {}, ("hipblaslt", -1)),
    ("aiter/tuned_gemm_elif.before", "gfx90a", {"M": 1}, ("torch", 0)),  # MI250's own case stays
    ("aiter/tuned_gemm_elif.before", "gfx1250", {}, ("triton", 0)),
    ("aiter/tuned_gemm_negated.before", "gfx942", {}, ("hipblaslt", -1)),
    ("aiter/tuned_gemm_negated.before", "gfx1250", {}, ("triton", 0)),
    ("aiter/tuned_gemm_helper.before", "gfx942", {}, ("hipblaslt", -1)),
    ("aiter/tuned_gemm_helper.before", "gfx1250", {"M": 1}, ("torch", 0)),  # helper called only for gfx1250
    ("aiter/tuned_gemm_helper.before", "gfx1250", {}, ("triton", 0)),
    ("aiter/tuned_gemm_match.before", "gfx950", {}, ("hipblaslt", -1)),
    ("aiter/tuned_gemm_match.before", "gfx1250", {}, ("triton", 0)),
]


@pytest.mark.parametrize(
    ("fixture", "gfx", "call", "expected"),
    SHAPE_CHOICES,
    ids=[
        f"{f.split('/')[1].removesuffix('.before')}-{g}-{'-'.join(c) or 'untuned'}"
        for f, g, c, _ in SHAPE_CHOICES
    ],
)
def test_shape_selection_after_patch(tmp_path, chip, fixture, gfx, call, expected):
    chip.gfx = gfx
    data = patched(tmp_path, "tuned-gemm-hipblaslt", {TUNED_GEMM: fixture}, TUNED_GEMM)
    config = load_tuned_gemm(data)(**{**UNTUNED_CALL, **call})
    assert (config["libtype"], config["solidx"]) == expected


@pytest.mark.parametrize(
    "fixture", ["aiter/core_sys_exit.before", "aiter/core_unnamed_handler.before", "aiter/core_helper.before"]
)
def test_every_exit_shape_becomes_a_chained_runtime_error(tmp_path, fixture):
    data = patched(tmp_path, "jit-core-runtime-error", {JIT_CORE: fixture}, JIT_CORE)
    namespace: dict = {"__name__": "core_under_test"}
    exec(compile(data, "core", "exec"), namespace)  # noqa: S102 (a fixture)
    with pytest.raises(RuntimeError) as info:
        namespace["build_module"]("module_gemm")
    assert isinstance(info.value.__cause__, OSError)


def test_bare_reraise_is_catchable_as_is():
    """Why core_bare_raise counts as fixed upstream: the build error itself reaches `except Exception`."""
    build_module = build_module_from(fixture_bytes("aiter/core_bare_raise"))
    with pytest.raises(OSError, match="hipcc failed for module_gemm"):
        build_module("module_gemm")


@pytest.mark.parametrize("shape", ["atom/linear_two_returns", "atom/linear_alias"])
@pytest.mark.parametrize(
    ("use_triton", "ck_free"), [(False, False), (True, False), (False, True), (True, True)]
)
def test_use_triton_gemm_shapes_follow_ck_free(tmp_path, shape, use_triton, ck_free):
    files = {LINEAR: f"{shape}.before", ENVS: "atom/envs_without.before"}
    data = patched(tmp_path, "atom-ck-free-triton-gemm", files, LINEAR)
    envs = types.SimpleNamespace(ATOM_USE_TRITON_GEMM=use_triton, ATOM_CK_FREE=ck_free)
    use_triton_gemm = function_from(data, "use_triton_gemm", {"envs": envs, "atom_envs": envs})
    assert bool(use_triton_gemm()) is (use_triton or ck_free)
