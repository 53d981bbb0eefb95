"""Which backend aiter's GEMM dispatcher really reaches for a linear layer, not only the config it looks up.

ATOM's LinearBase.forward (atom/model_ops/linear.py at the pin) calls `tgemm.mm(x, weight, bias, otype=...)`
for bf16 weights and, for fp8 per-tensor weights without ATOM's Triton GEMM, `tgemm.mm(..., scale_a=x_scale,
scale_b=w_scale)`. aiter's dispatcher (tuned_gemm.py: tgemm.mm -> gemm_a16w16 -> solMap[libtype]) takes the
looked-up config and may route it elsewhere; this module calls it as ATOM does and records every backend entry
point it reaches:

- aiter's kernel boundary: `aiter.hipb_mm` (hipBLASLt), `aiter.gemm_a16w16_asm` (asm), `aiter.wvSpltK` /
  `LLMM1` / `wv_splitk_small_fp16_bf16` (skinny), `aiter.ops.triton.*` (Triton), `aiter.ops.flydsl.*`,
  `aiter.ops.opus.*`, CK entry points (`*_ck*`);
- torch's own GEMMs (F.linear, matmul, mm, addmm, _scaled_mm, `@`), through a TorchFunctionMode.

Two ways to run it. `stubbed`: tuned_gemm.py executed by validation.aiterpkg.tuned_lookup with aiter's runtime stubbed
at the kernel boundary (each entry point records itself and returns an empty output of the right shape) and
tensors on torch's meta device, so model-sized shapes cost nothing and no GPU is needed. `installed`: the
importable aiter's own module (an AMD GPU), its entry points wrapped in place for the call, the real kernels run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from validation.aiterpkg.tuned_lookup import AiterLookupError

HIPBLASLT, ASM, SKINNY, TRITON, TORCH, CK = "hipblaslt", "asm", "skinny", "triton", "torch", "ck"
# aiter's module-level kernel entry points (aiter/__init__ re-exports its ops) -> backend
ENTRY_POINTS = {"hipb_mm": HIPBLASLT, "gemm_a16w16_asm": ASM, "wvSpltK": SKINNY, "LLMM1": SKINNY,
                "wv_splitk_small_fp16_bf16": SKINNY}
# packages whose every function is one backend's
PACKAGES = {"aiter.ops.triton.": TRITON, "aiter.ops.flydsl.": "flydsl", "aiter.ops.opus.": "opus"}
# stand-ins a dispatcher may call that launch nothing: answered with None
SETUP = {"hipb_create_extension", "opus_gemm_workspace_init", "get_flydsl_splitk_hgemm_kernel_params"}
TORCH_GEMMS = {F.linear: "F.linear", torch.matmul: "torch.matmul", torch.mm: "torch.mm", torch.addmm: "torch.addmm",
               torch.bmm: "torch.bmm", torch.einsum: "torch.einsum", torch.Tensor.__matmul__: "Tensor.__matmul__",
               torch.Tensor.matmul: "Tensor.matmul", torch.Tensor.mm: "Tensor.mm"}
if hasattr(torch, "_scaled_mm"):
    TORCH_GEMMS[torch._scaled_mm] = "torch._scaled_mm"


def backend_of(name: str) -> str | None:
    """The backend an aiter entry point (its full dotted name) belongs to; None: not a GEMM kernel."""
    leaf = name.rpartition(".")[2]
    if leaf in SETUP:
        return None
    if leaf in ENTRY_POINTS:
        return ENTRY_POINTS[leaf]
    for prefix, backend in PACKAGES.items():
        if name.startswith(prefix):
            return backend
    if "_ck" in leaf or leaf.startswith("ck_"):
        return CK
    return None


@dataclass
class Trace:
    """Every entry point one dispatcher call reached, in order: (backend, entry point)."""

    reached: list[tuple[str, str]] = field(default_factory=list)

    def backends(self) -> list[str]:
        return list(dict.fromkeys(b for b, _ in self.reached))

    def says(self) -> str:
        return ", ".join(f"{b} ({e})" for b, e in dict.fromkeys(self.reached)) or "no GEMM entry point"


class _TorchGemms(TorchFunctionMode):
    """Records torch's GEMM calls made inside it; every call still runs."""

    def __init__(self, trace: Trace):
        super().__init__()
        self.trace = trace

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in TORCH_GEMMS:
            self.trace.reached.append((TORCH, TORCH_GEMMS[func]))
        return func(*args, **(kwargs or {}))


@dataclass(frozen=True)
class Call:
    """One linear layer as ATOM calls it: x [M, K], weight [N, K], optional bias, scales for fp8."""

    M: int
    N: int
    K: int
    dtype: torch.dtype = torch.bfloat16
    otype: torch.dtype = torch.bfloat16  # ATOM's default; aiter's tuned rows also key fp32 outputs
    bias: bool = False
    preshuffled: bool = False  # aiter's `weight.is_shuffled`: ATOM's pre-shuffled weights
    scaled: bool = False  # fp8 per-tensor: scale_a, scale_b

    @property
    def label(self) -> str:
        kind = str(self.dtype).removeprefix("torch.") + (" per-tensor" if self.scaled else "")
        kind += f"->{str(self.otype).removeprefix('torch.')}" if self.otype != torch.bfloat16 else ""
        extra = "".join(f" {n}" for n, on in (("bias", self.bias), ("bpreshuffle", self.preshuffled)) if on)
        return f"{kind} M={self.M} N={self.N} K={self.K}{extra}"

    def lookup_keywords(self) -> dict:
        """What gemm_a16w16 passes aiter's lookup for this call."""
        return {"bias": self.bias, "dtype": str(self.dtype), "otype": str(self.otype), "scaleAB": self.scaled,
                "bpreshuffle": self.preshuffled}


def tensors(call: Call, device: str | torch.device) -> tuple[tuple, dict]:
    """(args, kwargs) of ATOM's `tgemm.mm(x, weight, bias, otype=..., [scale_a, scale_b])` for this call."""
    x = torch.randn(call.M, call.K, device=device).to(call.dtype)
    w = torch.randn(call.N, call.K, device=device)
    if w.device.type != "meta":  # no values to scale there, and a meta div goes through torch._refs, whose first
        w = w / call.K**0.5  # call imports torch._dynamo: 3-4 s of every stubbed run's start on 2 cores
    w = w.to(call.dtype)
    if call.preshuffled:
        w.is_shuffled = True  # how aiter's gemm_a16w16 tells a pre-shuffled weight
    bias = torch.zeros(call.N, device=device, dtype=call.otype) if call.bias else None
    kwargs = {"otype": call.otype}
    if call.scaled:
        kwargs.update(scale_a=torch.ones(1, device=device), scale_b=torch.ones(1, device=device))
    return (x, w, bias), kwargs


def dispatch(module, call: Call, trace: Trace, device: str | torch.device):
    """ATOM's call into the module's dispatcher; returns its output. The caller records the entry points."""
    tgemm = getattr(module, "tgemm", None)
    if tgemm is None or not callable(getattr(tgemm, "mm", None)):
        raise AiterLookupError(f"{getattr(module, '__file__', module)}: defines no tgemm.mm (ATOM's linear entry)")
    args, kwargs = tensors(call, device)
    with _TorchGemms(trace):
        return tgemm.mm(*args, **kwargs)


# --- stubbed: the executed module, aiter's runtime answered at the kernel boundary ------------------------


@dataclass
class StubbedKernels:
    """validation.aiterpkg.tuned_lookup's on_call: records aiter entry points and answers them with an empty output."""

    trace: Trace = field(default_factory=Trace)
    out: tuple[int, int, torch.dtype] = (0, 0, torch.bfloat16)  # the output the current call must get

    def __call__(self, name: str, args: tuple, kwargs: dict):
        leaf = name.rpartition(".")[2]
        if leaf in SETUP:
            return None
        backend = backend_of(name)
        if backend is None:
            raise AiterLookupError(f"aiter's dispatcher called `{name}`, which is no GEMM entry point this check "
                                   "knows (validation.aiterpkg.gemm_dispatch.ENTRY_POINTS)")
        self.trace.reached.append((backend, name))
        M, N, dtype = self.out
        return torch.empty(M, N, dtype=dtype, device="meta")


def run_stubbed(module, kernels: StubbedKernels, call: Call) -> Trace:
    """The executed module's dispatcher on meta tensors of the call's shape; what it reached."""
    kernels.trace, kernels.out = Trace(), (call.M, call.N, call.otype)
    out = dispatch(module, call, kernels.trace, "meta")
    if tuple(out.shape) != (call.M, call.N):
        raise AiterLookupError(f"tgemm.mm returned shape {tuple(out.shape)} for {call.label}")
    return kernels.trace


def trace_source(aiter_pkg, arch: str, cu_num: int, call: Call) -> Trace:
    """One call through aiter_pkg/tuned_gemm.py's dispatcher, executed for arch with no tuned CSV (its defaults)."""
    from validation.aiterpkg import tuned_lookup

    kernels = StubbedKernels()
    with tuned_lookup.load(aiter_pkg, arch, cu_num, on_call=kernels) as lookup:
        return run_stubbed(lookup.module, kernels, call)


# --- installed: aiter's own module, its entry points wrapped for the call --------------------------------


@contextmanager
def wrapped_entry_points(tg, trace: Trace) -> Iterator[None]:
    """Each kernel entry point tuned_gemm can reach (its globals, aiter's top-level ops, aiter's Triton GEMM)
    replaced by a recording pass-through while the block runs; put back after it."""
    targets = [(tg, n) for n in ENTRY_POINTS if hasattr(tg, n)]
    aiter = sys.modules.get("aiter")
    targets += [(aiter, n) for n in ENTRY_POINTS if aiter is not None and hasattr(aiter, n)]
    triton_gemm = sys.modules.get("aiter.ops.triton.gemm.basic.gemm_a16w16")
    if triton_gemm is not None and hasattr(triton_gemm, "gemm_a16w16"):
        targets.append((triton_gemm, "gemm_a16w16"))
    saved = [(obj, n, getattr(obj, n)) for obj, n in targets]
    try:
        for obj, n, fn in saved:
            setattr(obj, n, _recording(fn, f"{obj.__name__}.{n}", trace))
        yield
    finally:
        for obj, n, fn in saved:
            setattr(obj, n, fn)


def _recording(fn: Callable, name: str, trace: Trace) -> Callable:
    def entry(*args, **kwargs):
        trace.reached.append((backend_of(name) or name, name))
        return fn(*args, **kwargs)

    return entry


def run_installed(tg, call: Call, device: str | torch.device) -> tuple[Trace, torch.Tensor, tuple]:
    """aiter's installed dispatcher, real kernels: (what it reached, its output, the inputs it got)."""
    trace = Trace()
    torch.manual_seed(call.M * 7919 + call.N * 31 + call.K)
    args, kwargs = tensors(call, device)
    with wrapped_entry_points(tg, trace), _TorchGemms(trace):
        out = tg.tgemm.mm(*args, **kwargs)
    return trace, out, args
