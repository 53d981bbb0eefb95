"""ATOM_CK_FREE=1 runs ATOM's SiluAndMul on its own torch implementation.

At ATOM's pin (181b0f46) SiluAndMul.forward's plain path (no fused
quantization) calls aiter's silu_and_mul: module_activation, a CK module a
CK-free aiter does not build. ATOM has the op in torch already,
SiluAndMul.forward_native (SiLU of the first half times the second), which
torch runs everywhere and ATOM's torch.compile fuses into a kernel of its own.
Under ATOM_CK_FREE (the envs variable atom-ck-free-triton-gemm adds), the block
holding the silu_and_mul(...) call returns self.forward_native(<its input>)
first. aiter's Triton fused_silu_mul is not used: it asserts a CUDA tensor and
passes an AMD-only launch option, so no reference can run it off an AMD GPU.
Validation's atom-reroutes check runs the image's forward_native against fp32.

Shape: class SiluAndMul with methods forward and forward_native; in forward one
`silu_and_mul(out, x)` statement (its second argument is what forward_native
gets). atom/model_ops/activation.py does not import envs at the pin: the patch
adds `from atom.utils import envs` after the module's last top-level import
when no `envs` is bound. A forward that already reads ATOM_CK_FREE without our
marker is upstream's own.
"""

from __future__ import annotations

import ast

from patches.engine import Patch, Plan, Step
from patches.finders import (
    Def,
    block_of,
    class_method,
    guard_edit,
    has_marker,
    import_envs_edit,
    module_binds,
    module_class,
    walk_with_ancestors,
    words,
)
from patches.source import Drift, Source

NAME = "atom-ck-free-native-act"
ACTIVATION = "atom/model_ops/activation.py"
VAR = "ATOM_CK_FREE"
CLASS = "SiluAndMul"
WHY = "CK-free builds have no module_activation; ATOM's own torch SiluAndMul serves it"


def plan_activation(src: Source) -> Plan:
    cls = module_class(src.tree, CLASS)
    forward = class_method(cls, "forward")
    class_method(cls, "forward_native")
    if VAR in words(forward):
        marked = [s for s in ast.walk(forward) if isinstance(s, ast.If) and has_marker(src, s, NAME)]
        if marked:
            return Plan.already(f"{CLASS}.forward reads {VAR} (line {marked[0].lineno})")
        return Plan.upstream(f"{CLASS}.forward already reads {VAR} upstream (line {forward.lineno})")
    stmt, parent, arg = _call(src, forward)
    first = block_of(parent, stmt)[0]
    envs = "envs" if module_binds(src.tree, "envs") else None
    edits = [guard_edit(src, first, NAME, WHY, f"{envs or 'envs'}.{VAR}", f"return self.forward_native({arg})")]
    if envs is None:
        edits.append(import_envs_edit(src, NAME, WHY))
    return Plan.rewrite(f"line {first.lineno}: {CLASS} runs forward_native when {VAR}=1", *edits)


def _call(src: Source, forward: Def) -> tuple[ast.stmt, ast.AST, str]:
    """The one `silu_and_mul(out, x)` statement in forward, the node whose body holds it, and x's source text."""
    found = [(node, chain[-1]) for node, chain in walk_with_ancestors(forward)
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
             and isinstance(node.value.func, ast.Name) and node.value.func.id == "silu_and_mul"]
    if len(found) != 1:
        raise Drift(forward.lineno, f"one `silu_and_mul(out, x)` statement in {CLASS}.forward, found {len(found)}")
    stmt, parent = found[0]
    call = stmt.value
    assert isinstance(call, ast.Call)
    if len(call.args) != 2 or call.keywords:
        raise Drift(stmt.lineno, "silu_and_mul(out, x) with two positional arguments")
    return stmt, parent, src.segment(call.args[1])


PATCH = Patch(
    name=NAME,
    summary="ATOM: SiluAndMul on its own forward_native (torch) for ATOM_CK_FREE=1",
    steps=(Step(ACTIVATION, plan_activation),),
)
