"""aiter's Triton GEMMs as ATOM calls them (atom/model_ops/linear.py), against the fp32 reference: bf16
gemm_a16w16; gemm_a8w8 with per-tensor scales broadcast to vectors and with per-token x per-channel scales;
gemm_a8w8_blockscale with 1x128 activation and 128x128 weight blocks. Configs: aiter's own for the target arch."""

from __future__ import annotations

import torch

from validation.aiterpkg import triton_ops
from validation.checks import fp8
from validation.checks.aiter_launch import open_aiter, run_case
from validation.checks.common import Shape, operands, reference, shapes
from validation.checks.context import Context
from validation.checks.report import Case
from validation.core.device import fp8_native, interpreting

FN = "float8_e4m3fn"
# (case label, kernel, activation block, weight block); None = the whole tensor (one scale).
FP8_VARIANTS = (("fp8 per-tensor", "gemm_a8w8", None, None),
                ("fp8 per-token", "gemm_a8w8", (1, 0), (1, 0)),  # (1, 0): one row, all columns
                ("fp8 blockscale", "gemm_a8w8_blockscale", (1, 128), (128, 128)))


def cases(ctx: Context) -> tuple[list[Case], list[dict]]:
    at, why_not = open_aiter(ctx, "aiter gemm")
    if at is None:
        return why_not, []
    carrier, carry_note = fp8_carrier(ctx)
    out, rows = [], []
    for s in shapes(ctx):
        a, w = operands(ctx, s)
        results = [_bf16(at, s, a, w)]
        for label, kernel, a_block, w_block in FP8_VARIANTS:
            why = carry_note if carrier is None else _unfit(s, w_block)
            if why:
                results.append((Case.skipped(f"aiter {label} {s.label}", at.label, why), None))
                continue
            body = _fp8_body(at, ctx, kernel, s, a, w, (a_block, w_block), carrier)
            results.append(run_case(at, kernel, f"aiter {label} {s.label}", body, (1, 1), carry_note))
        out += [c for c, _ in results]
        rows += [r for _, r in results if r is not None]
    return out, rows


def _bf16(at, s: Shape, a, w):
    name = f"aiter bf16 {s.label}"
    if interpreting() and (why := _interpreter().bf16_dot()):
        return Case.skipped(name, at.label, why), None

    def body():
        cfg, tuned = at.gemm_config("gemm_a16w16", s.M, s.N, s.K)
        out, launch = at.launch("gemm_a16w16", cfg, lambda f, c: f(a, w, dtype=torch.bfloat16, config=c))
        return out, reference(a, w), launch, _origin(at, "gemm_a16w16", s, tuned), ""

    return run_case(at, "gemm_a16w16", name, body, (2, 2))


def _unfit(s: Shape, w_block) -> str:
    if w_block and w_block[1] and w_block[1] > s.K:
        return (f"K={s.K} is below the {w_block[1]}-wide scale block (aiter asserts GROUP_K == BLOCK_SIZE_K); "
                "model layers have K >= 128")
    return ""


def _origin(at, kernel: str, s: Shape, tuned: bool) -> str:
    """Which of aiter's configs its lookup returned: the arch's default file, or one tuned for this N and K."""
    name = f"{at.arch.aiter_config_prefix}-{triton_ops.KERNELS[kernel].config_file}"
    return f"aiter {name}, tuned for N={s.N} K={s.K}" if tuned else f"aiter {name}, arch default"


def _blocks(block, x: torch.Tensor) -> tuple[int, int]:
    if block is None:
        return x.shape[0], x.shape[1]
    return block[0], block[1] or x.shape[1]


def _fp8_body(at, ctx: Context, kernel: str, s: Shape, a, w, blocks, carrier):
    def body():
        dtype, fmax = fp8.fp8_dtype(ctx.arch.fp8_dtype), ctx.arch.fp8_max
        ba, bw = _blocks(blocks[0], a), _blocks(blocks[1], w)
        qa, sa = fp8.quantise_blocks(a, dtype, fmax, *ba)
        qw, sw = fp8.quantise_blocks(w, dtype, fmax, *bw)
        ref = fp8.dequantise_blocks(qa, sa, *ba) @ fp8.dequantise_blocks(qw, sw, *bw).T
        (xa, na), (xw, nw) = fp8.carry(qa, carrier), fp8.carry(qw, carrier)
        cfg, tuned = at.gemm_config(kernel, s.M, s.N, s.K)
        if kernel == "gemm_a8w8":  # ATOM: per-tensor scales expanded to (M,) / (N,), per-token ones flattened
            xs, ws = sa.reshape(-1).expand(s.M).contiguous(), sw.reshape(-1).expand(s.N).contiguous()
        else:
            xs, ws = sa.contiguous(), sw.contiguous()
        out, launch = at.launch(kernel, cfg, lambda f, c: f(xa, xw, xs, ws, dtype=torch.bfloat16, config=c))
        rounded = f"{na + nw} of {qa.numel() + qw.numel()} operand values rounded by the carrier"
        return out, ref, launch, _origin(at, kernel, s, tuned), rounded if carrier != dtype else ""

    return body


def fp8_carrier(ctx: Context) -> tuple[torch.dtype | None, str]:
    """The fp8 type the kernels take here for the arch's values, and the label every such case carries."""
    name, fmax = ctx.arch.fp8_dtype, ctx.arch.fp8_max
    native, why = fp8_native(name, ctx.info)
    if native:
        return fp8.fp8_dtype(name), f"{name} (max {fmax:g}) {why}".strip()
    fn_native, _ = fp8_native(FN, ctx.info)
    if name == "float8_e4m3fnuz" and fn_native:
        inexact = fp8.inexact_values(torch.float8_e4m3fnuz, torch.float8_e4m3fn)
        return torch.float8_e4m3fn, (
            f"e4m3fnuz values (scaled to gfx942's max {fmax:g}) carried as e4m3fn, NOT native gfx942 fp8 ({why}): "
            f"every e4m3fnuz value but {_odd_multiples(inexact)} is exact in e4m3fn, and {fmax:g} is within "
            f"e4m3fn's 448; the reference uses the e4m3fnuz values")
    return None, f"{name} cannot run here: {why}"


def _odd_multiples(values: list[float]) -> str:
    """'±{1, 3, ..., 15}·2^-10' for the list fp8.inexact_values finds; the raw list if it is not of that form."""
    scaled = sorted({abs(v) * 1024 for v in values})
    if scaled and all(x == int(x) and int(x) % 2 for x in scaled):
        return "±{" + ", ".join(str(int(x)) for x in scaled) + "}·2^-10"
    return str(values)


def _interpreter():
    # Imported on first use: its probe kernels must be decorated after the CLI sets TRITON_INTERPRET.
    from validation.core import interpreter

    return interpreter
