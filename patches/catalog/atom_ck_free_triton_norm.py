"""ATOM_CK_FREE=1 sends ATOM's RMSNorm to aiter's Triton rmsnorm.

At ATOM's pin (181b0f46) RMSNorm's plain path (no fused quantization, no
padding, no fused all-reduce) calls two module-level wrappers in
atom/model_ops/layernorm.py, rmsnorm2d_fwd_ and rmsnorm2d_fwd_with_add_, which
call aiter's rmsnorm2d_fwd / rmsnorm2d_fwd_with_add: module_rmsnorm_quant, a
CK module a CK-free aiter does not build. Under ATOM_CK_FREE (the envs variable
atom-ck-free-triton-gemm adds) each wrapper returns first through a function
this patch appends to the module, ck_free_rmsnorm / ck_free_rmsnorm_with_add,
which call aiter's Triton rms_norm / rmsnorm2d_fwd_with_add
(aiter/ops/triton/normalization/rmsnorm.py) on the same 2-D view the wrapper
makes and give back the wrapper's shapes. Validation's atom-reroutes check
runs both functions from the image's own layernorm.py against the fp32
reference.

Shape: each wrapper a module-level def with the pin's positional parameters
(x, weight, eps, dim; x, weight, residual, eps, dim: names may differ, the
guard passes the def's own); a docstring stays first. A wrapper that already
reads ATOM_CK_FREE without our marker is upstream's own; both must agree.
"""

from __future__ import annotations

from patches.catalog.atom_ck_free_triton_gemm import envs_name
from patches.engine import Patch, Plan, Step
from patches.finders import (
    Def,
    append_edit,
    first_statement,
    guard_edit,
    has_marker,
    marker,
    module_def,
    words,
)
from patches.source import Drift, Edit, Source

NAME = "atom-ck-free-triton-norm"
LAYERNORM = "atom/model_ops/layernorm.py"
VAR = "ATOM_CK_FREE"
WHY = "CK-free builds have no CK RMSNorm (module_rmsnorm_quant); aiter's Triton rmsnorm serves it"
# wrapper -> (the function the guard returns through, how many positional parameters it takes)
WRAPPERS = {"rmsnorm2d_fwd_": ("ck_free_rmsnorm", 4), "rmsnorm2d_fwd_with_add_": ("ck_free_rmsnorm_with_add", 5)}

FUNCTIONS = '''

{mark}
def ck_free_rmsnorm(x, weight, eps, dim):
    """rmsnorm2d_fwd_ on aiter's Triton rms_norm ({var}=1)."""
    from aiter.ops.triton.normalization.rmsnorm import rms_norm

    return rms_norm(x.reshape(-1, dim), weight, eps).view(x.shape)


{mark}
def ck_free_rmsnorm_with_add(x, weight, residual, eps, dim):
    """rmsnorm2d_fwd_with_add_ on aiter's Triton rmsnorm2d_fwd_with_add ({var}=1): (normed, x + residual)."""
    from aiter.ops.triton.normalization.rmsnorm import rmsnorm2d_fwd_with_add

    flat = x.reshape(-1, dim)
    out, residual_out = torch.empty_like(flat), torch.empty_like(flat)
    rmsnorm2d_fwd_with_add(out, flat, residual.reshape(-1, dim), residual_out, weight, eps)
    return out.view(x.shape), residual_out.view(x.shape)
'''


def plan_layernorm(src: Source) -> Plan:
    defs = {name: module_def(src.tree, name) for name in WRAPPERS}
    reading = {name for name, d in defs.items() if VAR in words(d)}
    if reading == set(WRAPPERS):
        marked = [d for d in defs.values() if any(has_marker(src, s, NAME) for s in d.body)]
        if len(marked) == len(defs):
            return Plan.already(f"rmsnorm2d_fwd_ and rmsnorm2d_fwd_with_add_ read {VAR}")
        if not marked:
            return Plan.upstream(f"rmsnorm2d_fwd_ and rmsnorm2d_fwd_with_add_ already read {VAR} upstream")
    if reading:
        raise Drift(defs[sorted(reading)[0]].lineno, f"both RMSNorm wrappers reading {VAR}, or neither")
    envs = envs_name(src.tree)
    edits = [_guard(src, d, envs, *WRAPPERS[name]) for name, d in defs.items()]
    edits.append(append_edit(src, FUNCTIONS.format(mark=marker(NAME, WHY), var=VAR)))
    return Plan.rewrite(f"lines {defs['rmsnorm2d_fwd_'].lineno}, {defs['rmsnorm2d_fwd_with_add_'].lineno}: "
                        f"the RMSNorm wrappers take aiter's Triton rmsnorm when {VAR}=1", *edits)


def _guard(src: Source, d: Def, envs: str, helper: str, count: int) -> Edit:
    params = [a.arg for a in d.args.posonlyargs + d.args.args]
    if len(params) != count or d.args.vararg or d.args.kwonlyargs:
        raise Drift(d.lineno, f"{d.name}({count} positional parameters), found ({', '.join(params)})")
    return guard_edit(src, first_statement(d), NAME, WHY, f"{envs}.{VAR}", f"return {helper}({', '.join(params)})")


PATCH = Patch(
    name=NAME,
    summary="ATOM: RMSNorm's wrappers on aiter's Triton rmsnorm for ATOM_CK_FREE=1",
    steps=(Step(LAYERNORM, plan_layernorm),),
)
