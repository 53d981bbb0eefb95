"""Run functions of upstream files (patched or not) with small stubs for torch,
pandas, the GPU and aiter's internals.

Only the function under test and the module-level helpers it calls are
executed, from the file's own text. What they read from the module's globals
comes from an explicit stub table; a global the table does not provide becomes
an `Unstubbed` placeholder that raises `UnstubbedError` naming it when the
executed path touches it, so a test can skip that version with the reason
instead of failing for something unrelated to the patch.
"""

from __future__ import annotations

import ast
import builtins
import csv
import functools
import inspect
import itertools
import multiprocessing
import os
import re
import shlex
import shutil
import symtable
import sys
import time
import traceback
import types
from pathlib import Path

from packaging.version import Version, parse


class UnstubbedError(Exception):
    """The executed code needs a global the stubs do not provide."""


class Unstubbed:
    """Stands in for a module global nobody stubbed; any use says which one."""

    def __init__(self, name: str):
        self._name = name

    def _fail(self, *args, **kwargs):
        raise UnstubbedError(f"needs `{self._name}`, which the stubs do not provide")

    __call__ = __getattr__ = __bool__ = __iter__ = __index__ = __int__ = __str__ = _fail
    __eq__ = __lt__ = __le__ = __gt__ = __ge__ = __contains__ = _fail
    __hash__ = object.__hash__


class RecordingLogger:
    def __init__(self):
        self.records: list[tuple[str, str]] = []

    def __getattr__(self, level):
        return lambda message, *args, **kwargs: self.records.append((level, str(message)))

    def warnings(self) -> list[str]:
        return [message for level, message in self.records if level == "warning"]


def functions_from(source: bytes, names: list[str], stubs: dict) -> dict:
    """Execute the module-level defs `names` of source, plus every module-level
    def they call that `stubs` does not replace (transitively), in file order.
    Returns the namespace they run in."""
    code, unstubbed = _compiled(source, tuple(names), frozenset(stubs))
    namespace = {"__name__": "under_test", **stubs, **{name: Unstubbed(name) for name in unstubbed}}
    exec(code, namespace)  # noqa: S102 (the file under test)
    return namespace


@functools.lru_cache(maxsize=256)
def _compiled(source: bytes, names: tuple[str, ...], stubbed: frozenset[str]):
    """The chosen defs compiled, and the globals they read that nothing provides
    (parsing is the costly part, and the sweep asks for the same file often)."""
    tree = ast.parse(source)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    chosen = _closure(defs, list(names), stubbed)
    module = ast.Module(body=[n for n in tree.body if n in chosen], type_ignores=[])
    wanted = _free_globals(module) - stubbed - {n.name for n in chosen}
    bound = _bound_names(tree)
    # The file's own binding wins over a builtin of the same name (aiter vs builtins.aiter).
    unstubbed = {name for name in wanted if not hasattr(builtins, name) or name in bound}
    return compile(module, "under_test", "exec"), frozenset(unstubbed)


def _closure(defs: dict, names: list[str], stubbed: frozenset[str]) -> list[ast.FunctionDef]:
    chosen, todo = [], list(names)
    while todo:
        name = todo.pop()
        node = defs.get(name)
        if node is None or node in chosen or name in stubbed:
            continue
        chosen.append(node)
        used = itertools.chain(ast.walk(node), *(ast.walk(d) for d in node.decorator_list))
        todo.extend(sub.id for sub in used if isinstance(sub, ast.Name) and sub.id in defs)
    return chosen


def _free_globals(module: ast.Module) -> set[str]:
    found: set[str] = set()
    tables = [symtable.symtable(ast.unparse(module), "under_test", "exec")]
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        if table.get_type() != "module":
            found |= {s.get_name() for s in table.get_symbols() if s.is_global() and s.is_referenced()}
    # Decorators are evaluated in the module scope.
    decorators = [d for n in module.body for d in getattr(n, "decorator_list", [])]
    found |= {sub.id for d in decorators for sub in ast.walk(d) if isinstance(sub, ast.Name)}
    return found


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the file binds anywhere (imports and assignments)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    return bound


# --- aiter/tuned_gemm.py -----------------------------------------------------------------


class DType:
    """A torch dtype as tuned_gemm sees it: eval("torch.bfloat16") and str() round-trip."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__


BF16, FP16, FP32 = DType("torch.bfloat16"), DType("torch.float16"), DType("torch.float32")
CU_NUM = {"gfx942": 304, "gfx950": 256, "gfx1250": 256}
TUNED_COLUMNS = "gfx,cu_num,M,N,K,bias,dtype,outdtype,scaleAB,bpreshuffle,libtype,solidx,splitK,us,kernelName"


class FakeFrame:
    """Just the pandas calls get_GEMM_A16W16_config_() makes."""

    def __init__(self, rows):
        self.rows, self.index = rows, []

    def drop_duplicates(self):
        return self

    def set_index(self, columns):
        self.index = columns
        return self

    def to_dict(self, orient):
        assert orient == "index"
        return {
            tuple(row[c] for c in self.index): {k: v for k, v in row.items() if k not in self.index}
            for row in self.rows
        }


def _cell(text):
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_csv(path):
    with open(path, newline="") as fh:
        return FakeFrame([{k: _cell(v) for k, v in row.items()} for row in csv.DictReader(fh)])


def tuned_gemm_stubs(gfx: str, tuned_csv: Path, logger: RecordingLogger) -> dict:
    """Globals of aiter/tuned_gemm.py, for every version since 2026-01 (and the 0.1.7 wheel)."""
    return {
        "functools": functools,
        "os": os,
        "pd": types.SimpleNamespace(read_csv=read_csv),
        "torch": types.SimpleNamespace(bfloat16=BF16, float16=FP16, float32=FP32),
        "dtypes": types.SimpleNamespace(bf16=BF16, fp16=FP16, fp32=FP32),
        "AITER_CONFIGS": types.SimpleNamespace(AITER_CONFIG_GEMM_BF16_FILE=str(tuned_csv)),
        "AITER_CONFIG_GEMM_BF16_FILE": str(tuned_csv),
        "AITER_LOG_TUNED_CONFIG": True,
        "get_cu_num": lambda: CU_NUM[gfx],
        "get_gfx": lambda: gfx,
        "get_padded_m": lambda M, N, K, gl: M,
        "is_flydsl_available": lambda: False,
        "logger": logger,
    }


def write_tuned_csv(path: Path, gfx: str, rows: list[dict]) -> Path:
    """A tuned CSV in aiter's column layout, every row for this gfx and its CU count."""
    lines = [TUNED_COLUMNS]
    for row in rows:
        values = {"gfx": gfx, "cu_num": CU_NUM[gfx], "bias": False, "scaleAB": False, "splitK": 0, "us": 1.0}
        values.update(row)
        lines.append(",".join(str(values.get(column, "")) for column in TUNED_COLUMNS.split(",")))
    path.write_text("\n".join(lines) + "\n")
    return path


def chip_info_modules(gfx: str) -> dict[str, types.ModuleType]:
    """What `from aiter.jit.utils.chip_info import get_gfx` (inside the no-asm helper) resolves to."""
    chip_info = types.ModuleType("aiter.jit.utils.chip_info")
    chip_info.get_gfx = lambda: gfx
    chip_info.get_cu_num = lambda: CU_NUM[gfx]
    modules = {name: types.ModuleType(name) for name in ("aiter", "aiter.jit", "aiter.jit.utils")}
    modules["aiter.jit.utils.chip_info"] = chip_info
    return modules


# --- aiter/jit/core.py ----------------------------------------------------------------------


class BuildFailed(OSError):
    """What the stub compiler raises; a test finds it again as the chained cause."""


def build_module_stubs(tmp: Path, logger: RecordingLogger) -> dict:
    """Globals of build_module() for every version since 2026-01 (and the 0.1.7 wheel)."""

    def jit_compile(md_name, *args, **kwargs):
        raise BuildFailed(f"hipcc: error: cannot build {md_name}")

    def mp_lock(lockPath=None, MainFunc=None, FinalFunc=None, **kwargs):
        MainFunc()
        if FinalFunc:
            FinalFunc()

    build_dir = tmp / "jit"
    return {
        "os": os,
        "re": re,
        "sys": sys,
        "time": time,
        "shutil": shutil,
        "shlex": shlex,
        "traceback": traceback,
        "multiprocessing": multiprocessing,
        "parse": parse,
        "Version": Version,
        "logger": logger,
        "bd_dir": str(build_dir),
        "this_dir": str(tmp),
        "AITER_REBUILD": 0,
        "AITER_LOG_MORE": 0,
        "AITER_DISABLE_KERNARG_PRELOAD": False,
        "PY": sys.executable,
        "AITER_ROOT_DIR": str(tmp),
        "AITER_CSRC_DIR": str(tmp / "csrc"),
        "CK_HELPER_DIR": str(tmp / "ck_helper"),
        "CK_3RDPARTY_DIR": str(tmp / "ck"),  # absent: the CK-free path
        "HIP_KITTENS_DIR": str(tmp / "hipkittens"),
        "rm_module": lambda md_name: None,
        "clear_build": lambda md_name: None,
        "get_user_jit_dir": lambda: str(build_dir),
        "rename_cpp_to_cu": lambda *args, **kwargs: [],
        "get_hip_version": lambda: "HIP version: 6.4.43482-0f2d60242",
        "get_gfx": lambda: "gfx942",
        "validate_and_update_archs": lambda: ["gfx942"],
        "hip_flag_checker": lambda flag: True,
        "check_and_set_ninja_worker": lambda: None,
        "check_LLVM_MAIN_REVISION": lambda: 0,
        "clone_3rdparty": lambda name: None,
        "_jit_compile": jit_compile,
        "mp_lock": mp_lock,
    }


BUILD_ARGS = {
    "md_name": "module_gemm_a16w16",
    "srcs": [],
    "flags_extra_cc": [],
    "flags_extra_hip": [],
    "blob_gen_cmd": "",
    "extra_include": [],
    "extra_ldflags": None,
    "verbose": False,
    "is_python_module": True,
    "is_standalone": False,
    "torch_exclude": True,  # no `import torch` on this path
    "third_party": [],
}


def call_build_module(build_module) -> None:
    """Call build_module with the arguments its signature asks for, by name."""
    params = inspect.signature(build_module).parameters.values()
    required = [p.name for p in params if p.default is inspect.Parameter.empty]
    missing = [name for name in required if name not in BUILD_ARGS]
    if missing:
        raise UnstubbedError(f"build_module() takes {missing}, which the stubs do not provide")
    build_module(**{name: BUILD_ARGS[name] for name in required})


# --- atom ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def module_from(source: bytes, name: str) -> types.ModuleType:
    """source executed as a module of its own (atom/utils/envs.py needs only the
    standard library and reads the environment at call time, so one per content will do)."""
    module = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)  # noqa: S102 (the file under test)
    return module
