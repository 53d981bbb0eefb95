"""The planned calls, made through aiter's own Triton entry points with empty tensors of the real shapes: aiter
picks its config for the arch and computes its grid, Triton specialises on the real sizes and alignments, and
validation.warmcache.hooks turns each launch into a compile. Nothing runs on a device.

aiter comes from its package folder through validation.aiterpkg.adapter (its __init__, which needs ROCm, never runs);
the launch options only AMD's backend knows are dropped for a CUDA target, as the validation checks drop them.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import triton

from validation.aiterpkg import adapter
from validation.aiterpkg.triton_ops import KERNELS
from validation.core.archs import ARCHS
from validation.warmcache import hooks
from validation.warmcache.plan import TritonCall

BLOCK = 128  # the 1x128 / 128x128 block scales of fp8 block-scale checkpoints


@dataclass
class Replayed:
    events: list[hooks.Event] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # per call, in order (synchronised on a GPU)
    per_call: list[list[hooks.Event]] = field(default_factory=list)  # the events of each call
    failures: list[str] = field(default_factory=list)  # "<call>: <error>", one per call that raised
    kernels: list = field(default_factory=list)  # (src, group, hash) per distinct kernel: hooks.compiled, the stubs
    missed: dict[str, str] = field(default_factory=dict)  # cache key -> kernel, under hooks.reading_only


def open_aiter(aiter_pkg: Path, arch: str) -> None:
    """aiter's Triton package from aiter_pkg, its arch the target's (call inside hooks.stand_in)."""
    adapter.import_source(aiter_pkg)
    adapter.set_arch(arch, False)


def replay(calls: Iterable[TritonCall], arch: str, target: hooks.Target, keep_kernels: bool = False,
           device: str = "cpu") -> Replayed:
    """Every call with the listener on: compile only on the CPU (no device), launched for real on device "cuda". A call
    that raises is recorded and the rest go on."""
    out = Replayed()
    seen: set[str] = set()
    launching = device != "cpu"
    with contextlib.nullcontext() if launching else hooks.compile_only(), hooks.listening() as listener:
        for call in calls:
            before, start = len(listener.events), time.perf_counter()
            try:
                with torch.device(device):
                    _CALLS[call.entry](call, arch, target.backend)
                if launching:
                    torch.cuda.synchronize()
            except hooks.Miss as miss:  # the call's later kernels are not reached: the count is a lower bound
                out.missed[miss.key] = miss.name
            except Exception as e:  # noqa: BLE001 - a kernel that does not compile for the arch is the finding
                out.failures.append(f"{describe(call)}: {type(e).__name__}: {_first_line(e)}")
            out.seconds.append(round(time.perf_counter() - start, 4))
            out.per_call.append(listener.events[before:])
            if keep_kernels:
                for event, source in zip(listener.events[before:], listener.sources[before:], strict=True):
                    if event.hash not in seen:
                        seen.add(event.hash)
                        out.kernels.append(source)
        out.events = list(listener.events)
    return out


def describe(call: TritonCall) -> str:
    extra = f" E={call.experts} top{call.top_k}" if call.entry == "fused_moe" else ""
    return f"{call.entry} {call.layer} tp{call.tp} M={call.M} N={call.N} K={call.K}{extra}"


def _first_line(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _config(entry: str, M: int, N: int, K: int, backend: str) -> dict:
    """aiter's own pick for the arch, then what the target's backend accepts."""
    jit = importlib.import_module(KERNELS[entry].jit_module)
    cfg, _ = jit._get_config(M, N, K, backend="triton") if entry == "gemm_a8w8_blockscale" else jit._get_config(M, N, K)
    kept, _ = adapter.launch_config(cfg, backend)
    return kept


def _entry(entry: str):
    return getattr(importlib.import_module(KERNELS[entry].module), KERNELS[entry].entry)


def _fp8(arch: str) -> torch.dtype:
    return getattr(torch, ARCHS[arch].fp8_dtype)


def _gemm_a16w16(call: TritonCall, arch: str, backend: str) -> None:
    x, w = torch.empty(call.M, call.K, dtype=torch.bfloat16), torch.empty(call.N, call.K, dtype=torch.bfloat16)
    _entry(call.entry)(x, w, dtype=torch.bfloat16, config=_config(call.entry, call.M, call.N, call.K, backend))


def _gemm_a8w8(call: TritonCall, arch: str, backend: str) -> None:
    """ATOM's per-tensor and per-token fp8 linear: per-row and per-column scale vectors."""
    x, w = torch.empty(call.M, call.K, dtype=_fp8(arch)), torch.empty(call.N, call.K, dtype=_fp8(arch))
    xs, ws = torch.empty(call.M, dtype=torch.float32), torch.empty(call.N, dtype=torch.float32)
    _entry(call.entry)(x, w, xs, ws, dtype=torch.bfloat16, config=_config(call.entry, call.M, call.N, call.K, backend))


def _gemm_a8w8_blockscale(call: TritonCall, arch: str, backend: str) -> None:
    x, w = torch.empty(call.M, call.K, dtype=_fp8(arch)), torch.empty(call.N, call.K, dtype=_fp8(arch))
    xs = torch.empty(call.M, triton.cdiv(call.K, BLOCK), dtype=torch.float32)
    ws = torch.empty(triton.cdiv(call.N, BLOCK), triton.cdiv(call.K, BLOCK), dtype=torch.float32)
    _entry(call.entry)(x, w, xs, ws, dtype=torch.bfloat16, config=_config(call.entry, call.M, call.N, call.K, backend))


def _fused_moe(call: TritonCall, arch: str, backend: str) -> None:
    """Both expert GEMMs of a SiLU-gated layer (gate_up, then down with the routing weights), tokens aligned by
    aiter's moe_align_block_size_triton, as the moe-triton check calls them."""
    import triton.language as tl

    T, inter, hidden, E, top_k = call.M, call.N // 2, call.K, call.experts, call.top_k
    lookup = importlib.import_module("aiter.ops.triton.utils.moe_config_utils").get_optimal_moe_config_func
    cfg, _ = adapter.launch_config(dict(lookup(torch.bfloat16)(T)), backend)
    ids = torch.zeros(T, top_k, dtype=torch.int32)
    weights = torch.empty(T, top_k, dtype=torch.float32)
    padded = ids.numel() + E * (cfg["BLOCK_SIZE_M"] - 1)
    sorted_ids = torch.empty(padded, dtype=torch.int32)
    expert_ids = torch.empty(triton.cdiv(padded, cfg["BLOCK_SIZE_M"]), dtype=torch.int32)
    post = torch.empty(1, dtype=torch.int32)
    align = importlib.import_module("aiter.ops.triton.moe.moe_align_block_size").moe_align_block_size_triton
    align(ids, E, cfg["BLOCK_SIZE_M"], sorted_ids, expert_ids, post)
    fused = _entry("fused_moe")
    for a, w, c, routed, k in (
            (torch.empty(T, hidden, dtype=torch.bfloat16), torch.empty(E, 2 * inter, hidden, dtype=torch.bfloat16),
             torch.empty(T, top_k, 2 * inter, dtype=torch.bfloat16), False, top_k),
            (torch.empty(T * top_k, inter, dtype=torch.bfloat16), torch.empty(E, hidden, inter, dtype=torch.bfloat16),
             torch.empty(T, top_k, hidden, dtype=torch.bfloat16), True, 1)):
        fused(a, w, c, None, None, None, weights, ids, sorted_ids, expert_ids, post, routed, k, tl.bfloat16,
              False, False, False, config=dict(cfg))


_CALLS = {"gemm_a16w16": _gemm_a16w16, "gemm_a8w8": _gemm_a8w8, "gemm_a8w8_blockscale": _gemm_a8w8_blockscale,
          "fused_moe": _fused_moe}
