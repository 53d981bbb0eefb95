"""Execute aiter's own tuned-GEMM lookup (get_GEMM_A16W16_config) for a target arch, with aiter's runtime stubbed.

For hosts where aiter cannot be imported (no ROCm: the offline CI images, the CPU tier). aiter/tuned_gemm.py is
read from the given package folder (an install or an --aiter-src checkout, patched or not) and executed as a
fresh module object, so the config that comes back is decided by aiter's own Python, every branch of it, for
the arch and CU count we name. Nothing of aiter's runtime runs, and no stand-in ever enters sys.modules: the
module's imports go through its own `__import__` (in its own builtins), which answers them as below; the
module itself is not registered either.

- `aiter` and every `aiter.*` module (and relative imports): permissive stand-ins. Their attributes are
  stand-ins too, and a stand-in raises AiterLookupError naming itself only when CALLED: aiter's C++ ops
  (hipb_mm, gemm_a16w16_asm, ...) load at import and need ROCm, and the lookup never calls them. These answer:
  - get_gfx() -> the target arch, get_cu_num() -> the target CU count (aiter asks rocminfo and the device);
  - AITER_CONFIGS.AITER_CONFIG_GEMM_BF16_FILE (and the older module-level AITER_CONFIG_GEMM_BF16_FILE) -> the
    tuned CSV given (several are merged first, as aiter/jit/core.py merges configs/ with model_configs/),
    else a path that cannot exist, so that aiter takes its defaults for every shape;
  - dtypes -> torch's dtypes (validation.aiterpkg.adapter's stand-in; aiter's own table needs JIT-built enums);
  - get_padded_m -> a Python copy of aiter's C++ getPaddedM (csrc/py_itfs_cu/gemm_common.cu at 79366eb8),
    which aiter loads through ctypes from a JIT-built module;
  - is_flydsl_available() -> False (FlyDSL kernels need the GPU; aiter then skips a FlyDSL row, as it does
    where FlyDSL is missing);
  - AITER_LOG_TUNED_CONFIG -> False (logging only); logger -> a recorder (Lookup.log);
  - torch_compile_guard, compile_ops -> identity decorators (they register torch custom ops / C++ bindings).
- `pandas`: the real one. Where it is missing, a stand-in whose DataFrame() is inert (the module builds an
  empty one at import) and whose read_csv raises: aiter calls read_csv only when its tuned CSV exists, so
  without pandas the lookup runs with no tuned CSV (every shape untuned), and load() refuses a tuned CSV.
- everything else (torch, functools, os, ...): the real modules.
"""

from __future__ import annotations

import builtins
import csv
import importlib.util
import inspect
import tempfile
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from validation.aiterpkg.adapter import _dtypes_stand_in
from validation.core.archs import ARCHS

SOURCE = "tuned_gemm.py"
LOOKUP = "get_GEMM_A16W16_config"
BF16 = str(torch.bfloat16)
# /dev/null is a file, so nothing can exist under it: aiter's os.path.exists(tuned_file) is False.
NO_CSV = "/dev/null/no-tuned-csv.csv"
ON_CALL = "<on call>"  # not an identifier: no aiter attribute can be looked up under this key


class AiterLookupError(RuntimeError):
    """The lookup could not be executed, or aiter's code reached something only a real aiter provides."""


def pandas_available() -> bool:
    return importlib.util.find_spec("pandas") is not None


@dataclass
class Log:
    """aiter's `logger`, recorded: the no-asm patch warns through it."""

    records: list[tuple[str, str]] = field(default_factory=list)

    def __getattr__(self, level: str):
        if level.startswith("_"):
            raise AttributeError(level)
        return lambda msg, *args, **kwargs: self.records.append((level, str(msg)))

    def warnings(self) -> list[str]:
        return [m for level, m in self.records if level == "warning"]


@dataclass(frozen=True)
class Lookup:
    """aiter's lookup function from one execution of tuned_gemm.py, and what it was executed with."""

    source: Path
    arch: str
    cu_num: int
    tuned_csv: str  # what AITER_CONFIG_GEMM_BF16_FILE answered (NO_CSV: none)
    fn: Callable
    log: Log
    module: types.ModuleType | None = None  # the executed tuned_gemm.py (its dispatcher: validation.aiterpkg.gemm_dispatch)

    def accepts(self, param: str) -> bool:
        return accepts(self.fn, param)

    def config(self, M: int, N: int, K: int, **kw) -> dict:
        """The config dict aiter returns; keywords: bias, dtype, otype, scaleAB, bpreshuffle."""
        try:
            return call(self.fn, M, N, K, **kw)
        except AiterLookupError:
            raise
        except Exception as e:  # noqa: BLE001 - aiter's own failure (an assert, a KeyError) is the finding
            raise AiterLookupError(f"{self.source.name}:{LOOKUP}(M={M}, N={N}, K={K}, {kw}) raised "
                                   f"{type(e).__name__}: {e}") from e

    def describe(self) -> str:
        return (f"{LOOKUP} EXECUTED from {self.source} with aiter's runtime stubbed (validation.aiterpkg.tuned_lookup): "
                f"get_gfx()={self.arch}, get_cu_num()={self.cu_num}")


def accepts(fn: Callable, param: str) -> bool:
    """Whether an aiter lookup takes this keyword (its decorators keep the signature: functools.wraps)."""
    return param in inspect.signature(fn).parameters


def call(fn: Callable, M: int, N: int, K: int, *, bias: bool = False, dtype: str = BF16, otype: str = BF16,
         scaleAB: bool = False, bpreshuffle: bool = False) -> dict:
    """Call an aiter lookup (executed here, or aiter's real one) with the keywords its signature takes.

    Older aiter (amd-aiter 0.1.7) has no bpreshuffle: asking it for a pre-shuffled shape is an error.
    """
    wanted = {"M": M, "N": N, "K": K, "bias": bias, "dtype": dtype, "otype": otype, "scaleAB": scaleAB,
              "bpreshuffle": bpreshuffle}
    params = inspect.signature(fn).parameters
    if bpreshuffle and "bpreshuffle" not in params:
        raise AiterLookupError(f"this aiter's {LOOKUP} takes no bpreshuffle")
    return fn(**{k: v for k, v in wanted.items() if k in params})


@contextmanager
def load(aiter_pkg: Path, arch: str, cu_num: int, tuned_csvs: Sequence[Path] = (),
         on_call: Callable | None = None) -> Iterator[Lookup]:
    """aiter_pkg/tuned_gemm.py executed for (arch, cu_num); its lookup reads tuned_csvs (merged), or none.

    A context manager: a merged CSV lives in a temporary folder until the block ends. on_call(name, args,
    kwargs), when given, answers every call of a stand-in (validation.aiterpkg.gemm_dispatch: aiter's kernels).
    """
    src = aiter_pkg / SOURCE
    if not src.is_file():
        raise AiterLookupError(f"{src}: not found (no aiter package there)")
    if tuned_csvs and not pandas_available():
        raise AiterLookupError("pandas is not installed: aiter reads its tuned CSV with pandas.read_csv")
    with tempfile.TemporaryDirectory(prefix="aiter-lookup-") as tmp:
        tuned = merge_csvs(list(tuned_csvs), Path(tmp) / "bf16_tuned_gemm.csv") if tuned_csvs else NO_CSV
        log = Log()
        names = _stand_ins(arch, cu_num, tuned, log)
        if on_call is not None:
            names[ON_CALL] = on_call
        module = _execute(src, names)
        fn = getattr(module, LOOKUP, None)
        if not callable(fn):
            raise AiterLookupError(f"{src}: defines no {LOOKUP}()")
        yield Lookup(src, arch, cu_num, tuned, fn, log, module)


def _execute(src: Path, names: dict) -> types.ModuleType:
    module = types.ModuleType("aiter.tuned_gemm", f"{src}, executed by validation.aiterpkg.tuned_lookup")
    own_builtins = dict(vars(builtins))
    own_builtins["__import__"] = _importer(names)
    module.__dict__.update(__file__=str(src), __package__="aiter", __builtins__=own_builtins)
    try:
        code = compile(src.read_bytes(), str(src), "exec")
        exec(code, module.__dict__)  # noqa: S102 - aiter's own source: executing it is the point
    except AiterLookupError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever aiter's module raises at import is the finding
        raise AiterLookupError(f"executing {src} failed: {type(e).__name__}: {e}") from e
    return module


def _importer(names: dict) -> Callable:
    real_import = builtins.__import__
    pandas_stand_in = None if pandas_available() else _pandas_stand_in()

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A001 - the point
        top = name.partition(".")[0]
        if level > 0 or top == "aiter":
            full = name if level == 0 else f"aiter.{name}".rstrip(".")
            return StandIn(full if fromlist else "aiter", names)
        if top == "pandas" and pandas_stand_in is not None:
            return pandas_stand_in
        return real_import(name, globals, locals, fromlist, level)

    return __import__


class StandIn(types.ModuleType):
    """An aiter module, function or value the lookup does not need: fine to import, an error to call."""

    def __init__(self, name: str, names: dict):
        super().__init__(name)
        self._names = names

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if attr in self._names:
            return self._names[attr]
        return StandIn(f"{self.__name__}.{attr}", self._names)

    def __call__(self, *args, **kwargs):
        if ON_CALL in self._names:
            return self._names[ON_CALL](self.__name__, args, kwargs)
        raise AiterLookupError(f"aiter's code called `{self.__name__}`, a stand-in here: aiter's runtime is "
                               "stubbed (validation.aiterpkg.tuned_lookup), only its tuned-GEMM lookup runs")


def _stand_ins(arch: str, cu_num: int, tuned_csv: str, log: Log) -> dict:
    dtypes = _dtypes_stand_in()
    if arch in ARCHS:
        dtypes.fp8 = getattr(torch, ARCHS[arch].fp8_dtype)
    configs = StandIn("aiter.jit.core.AITER_CONFIGS", {})
    configs.AITER_CONFIG_GEMM_BF16_FILE = tuned_csv
    return {
        "get_gfx": lambda: arch,
        "get_cu_num": lambda: cu_num,
        "AITER_CONFIGS": configs,
        "AITER_CONFIG_GEMM_BF16_FILE": tuned_csv,
        "AITER_LOG_TUNED_CONFIG": False,
        "dtypes": dtypes,
        "logger": log,
        "get_padded_m": padded_m,
        "is_flydsl_available": lambda: False,
        "torch_compile_guard": _identity_decorator,
        "compile_ops": _identity_decorator,
    }


def _identity_decorator(*args, **kwargs):
    """@deco and @deco(...) alike: the function comes back unchanged."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


def padded_m(M: int, N: int, K: int, gl: int) -> int:
    """aiter's getPaddedM (csrc/py_itfs_cu/gemm_common.cu at 79366eb8): the M a tuned row may be keyed on."""
    if gl == 0:
        step = 16 if M <= 256 else 32 if M <= 1024 else 64 if M <= 4096 else 128
        return (M + step - 1) // step * step
    if gl == 1:
        if M > 8192 and N > 4096:
            return 8192
        return 1 if M <= 1 else 1 << (M - 1).bit_length()
    return M


def _pandas_stand_in() -> types.ModuleType:
    pd = types.ModuleType("pandas", "stand-in: pandas is not installed here (validation.aiterpkg.tuned_lookup)")

    def read_csv(*args, **kwargs):
        raise AiterLookupError("pandas is not installed: aiter reads its tuned CSV with pandas.read_csv")

    pd.DataFrame = lambda *args, **kwargs: StandIn("pandas.DataFrame(...)", {})
    pd.read_csv = read_csv
    return pd


def merge_csvs(paths: list[Path], dest: Path) -> str:
    """One CSV for AITER_CONFIG_GEMM_BF16_FILE, as aiter/jit/core.py's update_config_files builds it.

    One file is used as it is. Several: the union of their columns (the first file's order), rows
    concatenated; missing files are skipped, as aiter skips them. A row without gfx (a legacy CSV) gets the
    arch of its cu_num, as aiter's gfx_from_cu_num gives it. Duplicate shapes stay: aiter's own read then
    fails ("index must be unique"), where the real merge would refuse them too.
    """
    existing = [p for p in paths if p.is_file()]
    if not existing:
        raise AiterLookupError(f"no tuned CSV exists among {', '.join(map(str, paths))}")
    if len(existing) == 1:
        return str(existing[0])
    columns: list[str] = []
    rows: list[dict[str, str]] = []
    for path in existing:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            columns += [c for c in reader.fieldnames or [] if c not in columns]
            rows += list(reader)
    arch_of_cu = {cu: a.name for a in ARCHS.values() for cu in a.cu_counts.values()}
    if "gfx" in columns:
        for row in rows:
            if not row.get("gfx") and (row.get("cu_num") or "").strip().isdigit():
                row["gfx"] = arch_of_cu.get(int(row["cu_num"]), "")
    with dest.open("w", newline="") as f:
        writer = csv.DictWriter(f, columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    return str(dest)
