"""ATOM's CK-free reroutes, as the image holds them: the functions this repo's ATOM patches add for ATOM_CK_FREE=1
(patches/catalog: atom-ck-free-triton-moe's `ck_free_triton_experts` in atom/model_ops/moe.py,
atom-ck-free-triton-norm's `ck_free_rmsnorm` and `ck_free_rmsnorm_with_add` in atom/model_ops/layernorm.py) and the
ATOM code atom-ck-free-native-act sends SiluAndMul to (`SiluAndMul.forward_native`, torch) and atom-ck-free-native-topk's
`ck_free_topk_softmax` in atom/model_ops/topK.py (torch), read from the installed
ATOM's source (never imported: importing atom imports all of aiter), each run against an fp32 reference. They call aiter's kernels themselves, so aiter's MoE config lookup is wrapped for
the backend (AMD-only launch options dropped off HIP, as for every aiter launch here)."""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
from collections.abc import Callable
from pathlib import Path

import torch

from validation.aiterpkg import adapter
from validation.checks import moe_triton
from validation.checks.aiter_launch import open_aiter
from validation.checks.aiter_moe_cases import bf16_or_fp16
from validation.checks.context import Context
from validation.checks.metrics import compare
from validation.checks.report import Case, CheckResult
from validation.warmcache.plan import atom_package

NAME = "atom-reroutes"
MOE, LAYERNORM, ACTIVATION, TOPK = ("model_ops/moe.py", "model_ops/layernorm.py", "model_ops/activation.py",
                                    "model_ops/topK.py")
# (tokens, experts, top k): Qwen3-30B-A3B's router on the GPU, small ones on the CPU
GPU_ROUTER = ((256, 128, 8), (1, 128, 8), (37, 60, 6))
CPU_ROUTER = ((16, 8, 2), (1, 8, 2), (7, 5, 3))
_LOOKUP = "aiter.ops.triton.utils.moe_config_utils"
RMSNORM = "aiter.ops.triton.normalization.rmsnorm"
# (tokens, hidden): Qwen3-30B-A3B's and DeepSeek-V3's hidden sizes on the GPU, awkward ones on the CPU
GPU_NORM = ((256, 2048), (1, 4096), (37, 7168))
CPU_NORM = ((7, 64), (1, 96), (5, 40))


def run(ctx: Context) -> CheckResult:
    atom = atom_package()
    if atom is None:
        return CheckResult.from_cases(NAME, [Case.skipped(NAME, "atom", "ATOM is not installed here")])
    at, why_not = open_aiter(ctx, NAME)
    if at is None:
        return CheckResult.from_cases(NAME, why_not)
    dtype, note = bf16_or_fp16()
    moe_shapes = moe_triton.GPU_SHAPES if ctx.full_shapes else moe_triton.CPU_SHAPES
    norm_shapes = GPU_NORM if ctx.full_shapes else CPU_NORM
    cases = (experts(ctx, at, atom, moe_shapes, dtype, note) + norms(ctx, at, atom, norm_shapes, dtype, note)
             + activations(ctx, at, atom, norm_shapes, dtype, note)
             + routers(ctx, at, atom, GPU_ROUTER if ctx.full_shapes else CPU_ROUTER))
    return CheckResult.from_cases(NAME, cases)


def experts(ctx: Context, at, atom: Path, shapes, dtype: torch.dtype, note: str) -> list[Case]:
    from validation.kernels.triton_moe import reference_moe

    name, helper = "ck_free_triton_experts", load(atom / MOE, "ck_free_triton_experts")
    if helper is None:
        return [_unpatched(name, atom / MOE, "atom-ck-free-triton-moe")]
    out = []
    for s in shapes:
        tensors = moe_triton._inputs(ctx, s, dtype)  # x, w1, w2, weights, ids
        with _lookup_for(at.backend):
            out.append(_case(f"{name} {s.label}", at, functools.partial(helper, *tensors),
                             functools.partial(reference_moe, *tensors), f"{atom / MOE}; {note}"))
    return out


def norms(ctx: Context, at, atom: Path, shapes, dtype: torch.dtype, note: str) -> list[Case]:
    functions = tuple(load(atom / LAYERNORM, f) for f in ("ck_free_rmsnorm", "ck_free_rmsnorm_with_add"))
    if None in functions:
        return [_unpatched("ck_free_rmsnorm", atom / LAYERNORM, "atom-ck-free-triton-norm")]
    out = []
    importlib.import_module(RMSNORM)  # before cu_count: the functions import it on their first call
    with adapter.cu_count(at.arch.name, at.backend):
        for tokens, hidden in shapes:
            out += _norm_cases(ctx, at, functions, (tokens, hidden), dtype, f"{atom / LAYERNORM}; {note}")
    return out


def _norm_cases(ctx: Context, at, functions, shape: tuple[int, int], dtype: torch.dtype, note: str) -> list[Case]:
    (plain, add), (tokens, hidden), eps = functions, shape, 1e-6
    g = torch.Generator().manual_seed(ctx.seed * 7919 + tokens * 31 + hidden)
    x, residual = (torch.randn(tokens, hidden, generator=g).to(ctx.info.torch_device, dtype) for _ in range(2))
    weight = (1 + 0.1 * torch.randn(hidden, generator=g)).to(ctx.info.torch_device, dtype)
    label, total = f"[T={tokens},H={hidden}]", x.float() + residual.float()
    return [_case(f"ck_free_rmsnorm {label}", at, lambda: plain(x, weight, eps, hidden),
                  lambda: _rms(x.float(), weight, eps), note),
            _case(f"ck_free_rmsnorm_with_add {label}", at, lambda: torch.cat(add(x, weight, residual, eps, hidden), -1),
                  lambda: torch.cat((_rms(total, weight, eps), total), dim=-1), note)]


def activations(ctx: Context, at, atom: Path, shapes, dtype: torch.dtype, note: str) -> list[Case]:
    """SiluAndMul.forward_native, which atom-ck-free-native-act returns through (width: twice the shape's hidden)."""
    native = load(atom / ACTIVATION, "SiluAndMul.forward_native")
    if native is None or "# atom-build(atom-ck-free-native-act):" not in (atom / ACTIVATION).read_text():
        return [_unpatched("SiluAndMul.forward_native", atom / ACTIVATION, "atom-ck-free-native-act")]
    out = []
    for tokens, hidden in shapes:
        g = torch.Generator().manual_seed(ctx.seed * 104729 + tokens * 17 + hidden)
        x = torch.randn(tokens, 2 * hidden, generator=g).to(ctx.info.torch_device, dtype)
        gate, up = x.float().chunk(2, -1)
        out.append(_case(f"SiluAndMul.forward_native [T={tokens},2x{hidden}]", at, functools.partial(native, None, x),
                         functools.partial(lambda a, b: torch.nn.functional.silu(a) * b, gate, up),
                         f"{atom / ACTIVATION} (torch); {note}"))
    return out


def routers(ctx: Context, at, atom: Path, shapes) -> list[Case]:
    """ck_free_topk_softmax (renormalised, as Qwen3's router asks): the weights it returns, scattered over the experts
    at the ids it returns, against the fp32 softmax's k largest found by sorting (a wrong id or weight both show)."""
    helper = load(atom / TOPK, "ck_free_topk_softmax")
    if helper is None:
        return [_unpatched("ck_free_topk_softmax", atom / TOPK, "atom-ck-free-native-topk")]
    out = []
    for tokens, experts, k in shapes:
        g = torch.Generator().manual_seed(ctx.seed * 1299709 + tokens * 13 + experts)
        logits = torch.randn(tokens, experts, generator=g).to(ctx.info.torch_device, torch.bfloat16)
        out.append(_case(f"ck_free_topk_softmax [T={tokens},E={experts},top{k}]", at,
                         functools.partial(_scattered, helper, logits, k), functools.partial(_top_k, logits, k),
                         f"{atom / TOPK} (torch); ids int32 checked"))
    return out


def _scattered(helper: Callable, logits: torch.Tensor, k: int) -> torch.Tensor:
    weights, ids = helper(logits, k, True)
    if ids.dtype != torch.int32:
        raise TypeError(f"ids are {ids.dtype}, aiter's kernel writes int32")
    return torch.zeros(logits.shape, device=logits.device).scatter(-1, ids.long(), weights.float())


def _top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    probs = torch.softmax(logits.float(), dim=-1)
    order = probs.argsort(dim=-1, descending=True)[:, :k]
    picked = probs.gather(-1, order)
    return torch.zeros(logits.shape, device=logits.device).scatter(-1, order, picked / picked.sum(-1, keepdim=True))


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def _case(label: str, at, call: Callable, reference: Callable, note: str) -> Case:
    try:
        got = call()
    except Exception as e:  # noqa: BLE001 - ATOM's layer failing is this case's result
        return Case.verdict(label, False, at.label, f"raised {type(e).__name__}: {e}")
    return Case.measured(label, compare(got, reference()), at.label, note)


def _unpatched(name: str, path: Path, patch: str) -> Case:
    return Case.skipped(name, "atom", f"{path} has no {name} (the {patch} patch is not applied)")


def load(path: Path, name: str) -> Callable | None:
    """A module-level function ("f") or a method ("Cls.f", called with its self) from ATOM's source, compiled alone
    with torch (and torch.nn.functional as F) as its only globals."""
    if not path.is_file():
        return None
    body: list[ast.stmt] = ast.parse(path.read_bytes(), str(path)).body
    *owner, func = name.split(".")
    for part in owner:
        body = next((n.body for n in body if isinstance(n, ast.ClassDef) and n.name == part), [])
    found = [n for n in body if isinstance(n, ast.FunctionDef) and n.name == func]
    if not found:
        return None
    found[0].decorator_list = []
    scope: dict = {"torch": torch, "F": torch.nn.functional}
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), scope)  # noqa: S102 - the image's code
    return scope[func]


@contextlib.contextmanager
def _lookup_for(backend: str):
    """aiter's MoE config lookup, its picks passed through adapter.launch_config for this backend."""
    module = importlib.import_module(_LOOKUP)
    original = module.get_optimal_moe_config_func

    def lookup(*args, **kwargs):
        pick = original(*args, **kwargs)
        return lambda M: adapter.launch_config(dict(pick(M)), backend)[0]

    module.get_optimal_moe_config_func = lookup
    try:
        yield
    finally:
        module.get_optimal_moe_config_func = original
