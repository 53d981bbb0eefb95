"""What Triton's CPU interpreter (TRITON_INTERPRET=1) gets wrong here, probed once each with a tiny kernel.

aiter's kernels are written for compiled Triton; two interpreter limits of triton 3.6 decide which of them the
CPU tier can run. Each probe returns None when the interpreter is fine, else the reason, for a skip.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _count_kernel(out_ptr, n):
    acc = 0
    for _ in range(n):  # a loop bounded by a runtime argument, as aiter's K loops are
        acc += 1
    tl.store(out_ptr, acc)


@triton.jit
def _dot_kernel(a_ptr, b_ptr, c_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(a_ptr + r[:, None] * B + r[None, :])
    b = tl.load(b_ptr + r[:, None] * B + r[None, :])
    tl.store(c_ptr + r[:, None] * B + r[None, :], tl.dot(a, b))


@functools.cache
def runtime_loops() -> str | None:
    out = torch.zeros(1, dtype=torch.int32)
    try:
        _count_kernel[(1,)](out, 3)
    except Exception as e:  # noqa: BLE001 - the failure is the finding
        return (f"Triton {triton.__version__}'s interpreter cannot loop over a runtime argument with numpy "
                f"{np.__version__} ({type(e).__name__}: {e}); aiter's kernels all do: use numpy<2.4")
    return None if int(out) == 3 else f"interpreter loop counted {int(out)}, not 3"


@functools.cache
def bf16_dot() -> str | None:
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(16, 16, generator=g).bfloat16() for _ in range(2))
    c = torch.zeros(16, 16)
    _dot_kernel[(1,)](a, b, c, B=16)
    err = float((c - a.float() @ b.float()).abs().max())
    if err < 1e-2:
        return None
    return (f"Triton {triton.__version__}'s interpreter multiplies bf16 as raw 16-bit integers in tl.dot "
            f"(max error {err:.3g} on a 16x16 product)")
