"""ATOM's own CK-free expert layer, as the image holds it: `ck_free_triton_experts`, which the
atom-ck-free-triton-moe patch adds to atom/model_ops/moe.py, read from the installed ATOM's source (never
imported: importing atom imports all of aiter) and run on the moe-triton check's inputs against the per-expert
fp32 loop. It calls aiter's Triton kernels itself, so aiter's config lookup is wrapped for the backend (AMD-only
launch options dropped off HIP, as for every aiter launch here)."""

from __future__ import annotations

import ast
import contextlib
import importlib
from collections.abc import Callable
from pathlib import Path

import torch

from validation.aiterpkg import adapter
from validation.checks.aiter_launch import open_aiter
from validation.checks.context import Context
from validation.checks.metrics import compare
from validation.checks.report import Case

HELPER = "ck_free_triton_experts"
MOE = "model_ops/moe.py"
_LOOKUP = "aiter.ops.triton.utils.moe_config_utils"


def cases(ctx: Context, shapes, inputs, atom: Path | None) -> list[Case]:
    """inputs(ctx, shape, dtype) -> (x, w1, w2, weights, ids); atom: the installed ATOM package folder."""
    name = "atom ck-free experts"
    if atom is None:
        return [Case.skipped(name, "atom", "ATOM is not installed here")]
    helper = load(atom / MOE)
    if helper is None:
        return [Case.skipped(name, "atom", f"{atom / MOE} has no {HELPER} (the atom-ck-free-triton-moe patch is "
                                           "not applied)")]
    at, why_not = open_aiter(ctx, name)
    if at is None:
        return why_not
    from validation.checks.aiter_moe_cases import bf16_or_fp16
    from validation.kernels.triton_moe import reference_moe

    dtype, note = bf16_or_fp16()
    out = []
    for s in shapes:
        x, w1, w2, weights, ids = inputs(ctx, s, dtype)
        label = f"{name} {s.label}"
        try:
            with _lookup_for(at.backend):
                y = helper(x, w1, w2, weights, ids)
        except Exception as e:  # noqa: BLE001 - ATOM's layer failing is this case's result
            out.append(Case.verdict(label, False, at.label, f"{HELPER} raised {type(e).__name__}: {e}"))
            continue
        out.append(Case.measured(label, compare(y, reference_moe(x, w1, w2, weights, ids)), at.label,
                                 f"{HELPER} from {atom / MOE}; {note}"))
    return out


def load(path: Path) -> Callable | None:
    """The module-level function from ATOM's source, compiled alone with torch as its only global."""
    if not path.is_file():
        return None
    tree = ast.parse(path.read_bytes(), str(path))
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == HELPER]
    if not found:
        return None
    scope: dict = {"torch": torch}
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), scope)  # noqa: S102 - the image's code
    return scope[HELPER]


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

