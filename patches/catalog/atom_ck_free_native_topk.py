"""ATOM_CK_FREE=1 routes ATOM's softmax top-k router in torch.

At ATOM's pin (181b0f46) a softmax-scored MoE router (Qwen3's) goes through
rocm_aiter_topk_softmax_impl in atom/model_ops/topK.py, which calls aiter's
topk_softmax: module_moe_asm, which a CK-free aiter does not build. Under
ATOM_CK_FREE (the envs variable atom-ck-free-triton-gemm adds) that function
returns first through ck_free_topk_softmax, which this patch appends: softmax
over the experts in fp32, the top k, renormalised when asked, ids as int32 (what
aiter's kernel writes). Routers with fused shared experts (their weights and ids
live in a buffer ATOM prepares for aiter's kernel) are refused with the reason
(NotImplementedError). Validation's atom-reroutes check runs the image's
function against an fp32 reference.

Shape: a module-level def rocm_aiter_topk_softmax_impl whose first three
parameters are the logits, k and the renormalise flag (names may differ: the
guard passes the def's own) and that has a num_fused_shared_experts parameter;
a docstring stays first. topK.py does not import envs at the pin: `from
atom.utils import envs` is added after the last top-level import when no `envs`
is bound. A function that already reads ATOM_CK_FREE without our marker is
upstream's own.
"""

from __future__ import annotations

import ast

from patches.engine import Patch, Plan, Step
from patches.finders import (
    append_edit,
    first_statement,
    guard_edit,
    has_marker,
    import_envs_edit,
    marker,
    module_binds,
    module_def,
    words,
)
from patches.source import Drift, Source

NAME = "atom-ck-free-native-topk"
TOPK = "atom/model_ops/topK.py"
VAR = "ATOM_CK_FREE"
FUNC = "rocm_aiter_topk_softmax_impl"
SHARED = "num_fused_shared_experts"
WHY = "CK-free builds have no module_moe_asm (aiter's topk_softmax); torch routes the experts"

FUNCTION = '''

{mark}
def ck_free_topk_softmax(gating_output, topk, renormalize, num_fused_shared_experts=0):
    """topk_softmax in torch ({var}=1): fp32 softmax over the experts, the top k, renormalised when asked."""
    if num_fused_shared_experts:
        raise NotImplementedError(
            f"{var}=1 routes without fused shared experts; got num_fused_shared_experts={{num_fused_shared_experts}}")
    weights = torch.softmax(gating_output.float(), dim=-1)
    topk_weights, topk_ids = torch.topk(weights, topk, dim=-1)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights, topk_ids.to(torch.int32)
'''


def plan_topk(src: Source) -> Plan:
    func = module_def(src.tree, FUNC)
    if VAR in words(func):
        marked = [s for s in func.body if isinstance(s, ast.If) and has_marker(src, s, NAME)]
        if marked:
            return Plan.already(f"{FUNC} reads {VAR} (line {marked[0].lineno})")
        return Plan.upstream(f"{FUNC} already reads {VAR} upstream (line {func.lineno})")
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    if len(params) < 3 or SHARED not in params:
        raise Drift(func.lineno, f"{FUNC}(logits, topk, renormalize, ..., {SHARED}, ...), found ({', '.join(params)})")
    first = first_statement(func)
    call = f"return ck_free_topk_softmax({', '.join(params[:3])}, {SHARED})"
    edits = [guard_edit(src, first, NAME, WHY, f"envs.{VAR}", call),
             append_edit(src, FUNCTION.format(mark=marker(NAME, WHY), var=VAR))]
    if not module_binds(src.tree, "envs"):
        edits.append(import_envs_edit(src, NAME, WHY))
    return Plan.rewrite(f"line {first.lineno}: {FUNC} routes in torch when {VAR}=1", *edits)


PATCH = Patch(
    name=NAME,
    summary="ATOM: the softmax top-k router in torch for ATOM_CK_FREE=1",
    steps=(Step(TOPK, plan_topk),),
)
