"""ATOM_CK_FREE=1 sends ATOM's bf16 experts to aiter's Triton fused_moe.

At ATOM's pin (181b0f46) UnquantizedFusedMoEMethod.apply ends in
aiter.fused_moe.fused_moe, which has no Triton path: a bf16 SiLU-gated layer
gets the CK 2-stage kernels (module_moe_ck2stages), which a CK-free aiter does
not build, and process_weights_after_loading shuffles the expert weights into
CK's 16x16 layout. Under ATOM_CK_FREE (the envs variable atom-ck-free-triton-gemm
adds) three edits in atom/model_ops/moe.py route the layer to aiter's Triton
kernels instead, the calls validation's moe-triton check proves and the warm
step compiles:

- process_weights_after_loading: `if envs.ATOM_CK_FREE: return` before its
  last statement, the shuffle_weights call (the Triton kernel reads the
  weights as loaded);
- apply: `if envs.ATOM_CK_FREE: return ck_free_triton_experts(...)` before its
  `return fused_moe(...)`, the arguments the source text of that call's own
  keywords (hidden_states, w1, w2, topk_weight, topk_ids; activation and
  expert_mask where given);
- the module gains ck_free_triton_experts (tokens sorted by aiter's
  moe_align_block_size_triton, gate_up then down through aiter's Triton
  fused_moe with aiter's config for the token count, SiLU-and-mul between, the
  routing weights applied in the second). It refuses, with the reason, what it
  does not serve: another activation, or expert parallelism (an expert mask).

A method that already reads ATOM_CK_FREE without our marker is upstream's own.
"""

from __future__ import annotations

import ast

from patches.catalog.atom_ck_free_triton_gemm import envs_name
from patches.engine import Patch, Plan, Step
from patches.finders import (
    Def,
    append_edit,
    class_method,
    guard_edit,
    has_marker,
    marker,
    module_class,
    words,
)
from patches.source import Drift, Edit, Source

NAME = "atom-ck-free-triton-moe"
MOE = "atom/model_ops/moe.py"
VAR = "ATOM_CK_FREE"
CLASS = "UnquantizedFusedMoEMethod"
HELPER = "ck_free_triton_experts"
WHY = "CK-free builds have no CK MoE kernels; aiter's Triton fused_moe serves bf16 experts"
REQUIRED = ("hidden_states", "w1", "w2", "topk_weight", "topk_ids")
OPTIONAL = ("activation", "expert_mask")

FUNCTION = '''

{mark}
def {helper}(hidden_states, w1, w2, topk_weight, topk_ids, activation=None, expert_mask=None):
    """A bf16 SiLU-gated expert layer on aiter's Triton kernels ({var}=1)."""
    import triton
    import triton.language as tl
    from aiter.ops.triton.moe.moe_align_block_size import moe_align_block_size_triton
    from aiter.ops.triton.moe.moe_op import fused_moe as triton_fused_moe
    from aiter.ops.triton.utils.moe_config_utils import get_optimal_moe_config_func

    if expert_mask is not None or not str(activation or "Silu").endswith("Silu"):
        raise NotImplementedError(
            f"{var}=1 serves bf16 SiLU experts without expert parallelism on aiter's Triton fused_moe; "
            f"got activation={{activation}}, expert_mask={{expert_mask is not None}}")
    tokens, top_k = topk_ids.shape
    experts, inter = w1.shape[0], w1.shape[1] // 2
    dtype, device = hidden_states.dtype, hidden_states.device
    config = dict(get_optimal_moe_config_func(dtype)(tokens))
    block = config["BLOCK_SIZE_M"]
    ids = topk_ids.to(torch.int32).contiguous()
    weights = topk_weight.to(torch.float32).contiguous()
    padded = ids.numel() + experts * (block - 1)
    sorted_ids = torch.full((padded,), ids.numel(), dtype=torch.int32, device=device)
    expert_ids = torch.empty(triton.cdiv(padded, block), dtype=torch.int32, device=device)
    post = torch.empty(1, dtype=torch.int32, device=device)
    moe_align_block_size_triton(ids, experts, block, sorted_ids, expert_ids, post)
    compute = tl.bfloat16 if dtype == torch.bfloat16 else tl.float16
    gate_up = torch.empty(tokens, top_k, 2 * inter, dtype=dtype, device=device)
    triton_fused_moe(hidden_states.contiguous(), w1, gate_up, None, None, None, weights, ids, sorted_ids,
                     expert_ids, post, False, top_k, compute, False, False, False, config=dict(config))
    gate_up = gate_up.view(-1, 2 * inter).float()
    act = (torch.nn.functional.silu(gate_up[:, :inter]) * gate_up[:, inter:]).to(dtype)
    out = torch.empty(tokens, top_k, w2.shape[1], dtype=dtype, device=device)
    triton_fused_moe(act, w2, out, None, None, None, weights, ids, sorted_ids, expert_ids, post,
                     True, 1, compute, False, False, False, config=dict(config))
    return out.float().sum(dim=1).to(dtype)
'''


def plan_moe(src: Source) -> Plan:
    cls = module_class(src.tree, CLASS)
    apply, weights = class_method(cls, "apply"), class_method(cls, "process_weights_after_loading")
    if VAR in words(apply):
        marked = [s for s in ast.walk(apply) if isinstance(s, ast.If) and has_marker(src, s, NAME)]
        if marked:
            return Plan.already(f"{CLASS}.apply reads {VAR} (line {marked[0].lineno})")
        return Plan.upstream(f"{CLASS}.apply already reads {VAR} upstream (line {apply.lineno})")
    if any(isinstance(n, ast.FunctionDef) and n.name == HELPER for n in src.tree.body):
        raise Drift(1, f"no module-level {HELPER} without {CLASS}.apply calling it")
    envs = envs_name(src.tree)
    ret, call = _fused_moe_return(apply)
    args = _arguments(src, call)
    edits = [_guard(src, ret, envs, f"return {HELPER}({args})"), _guard(src, _shuffle(weights), envs, "return"),
             _append(src)]
    return Plan.rewrite(f"line {ret.lineno}: {CLASS} takes aiter's Triton fused_moe when {VAR}=1", *edits)


def _fused_moe_return(apply: Def) -> tuple[ast.Return, ast.Call]:
    """The one `return fused_moe(...)` directly in apply's body: aiter's CK MoE entry."""
    found = [s for s in apply.body if isinstance(s, ast.Return) and isinstance(s.value, ast.Call)
             and isinstance(s.value.func, ast.Name) and s.value.func.id == "fused_moe"]
    if len(found) != 1:
        raise Drift(apply.lineno, f"one `return fused_moe(...)` in {CLASS}.apply's body, found {len(found)}")
    assert isinstance(found[0].value, ast.Call)
    return found[0], found[0].value


def _arguments(src: Source, call: ast.Call) -> str:
    given = {k.arg: src.segment(k.value) for k in call.keywords if k.arg}
    missing = [name for name in REQUIRED if name not in given]
    if call.args:
        raise Drift(call.lineno, f"fused_moe(...) called by keyword ({', '.join(REQUIRED)}), not positionally")
    if missing:
        raise Drift(call.lineno, f"fused_moe(...) given {', '.join(REQUIRED)} (missing: {', '.join(missing)})")
    return ", ".join(f"{name}={given[name]}" for name in REQUIRED + OPTIONAL if name in given)


def _shuffle(method: Def) -> ast.stmt:
    last = method.body[-1]
    if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
            and isinstance(last.value.func, ast.Name) and last.value.func.id == "shuffle_weights"):
        raise Drift(last.lineno, f"{CLASS}.process_weights_after_loading ending in shuffle_weights(...)")
    return last


def _guard(src: Source, stmt: ast.stmt, envs: str, then: str) -> Edit:
    return guard_edit(src, stmt, NAME, WHY, f"{envs}.{VAR}", then)


def _append(src: Source) -> Edit:
    return append_edit(src, FUNCTION.format(mark=marker(NAME, WHY), helper=HELPER, var=VAR))


PATCH = Patch(
    name=NAME,
    summary="ATOM: bf16 experts on aiter's Triton fused_moe for ATOM_CK_FREE=1 (weights left unshuffled)",
    steps=(Step(MOE, plan_moe),),
)
