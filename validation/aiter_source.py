"""Read aiter's tuned-GEMM fallback from its source, for hosts where aiter cannot run (no AMD GPU)."""

from __future__ import annotations

import ast
from pathlib import Path

LOOKUP_FN = "get_GEMM_A16W16_config"


def fallback_libtypes(tuned_gemm_py: Path) -> set[str]:
    """libtype strings the lookup can return for a shape missing from the CSV, skinny (small M) excluded.

    Reads assignments `x["libtype"] = "..."` and dict literals {"libtype": "..."} in get_GEMM_A16W16_config.
    Raises ValueError when the function or any libtype literal is missing (the source moved on: say so).
    """
    tree = ast.parse(tuned_gemm_py.read_text(), filename=str(tuned_gemm_py))
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == LOOKUP_FN), None)
    if fn is None:
        raise ValueError(f"{tuned_gemm_py}: no function {LOOKUP_FN}")
    found: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and _const(t.slice) == "libtype":
                    found.add(node.value.value)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if k is not None and _const(k) == "libtype" and isinstance(_const(v), str):
                    found.add(_const(v))
    if not found:
        raise ValueError(f"{tuned_gemm_py}: {LOOKUP_FN} sets no libtype literal")
    return found - {"skinny"}


def _const(node: ast.AST):
    return node.value if isinstance(node, ast.Constant) else None
