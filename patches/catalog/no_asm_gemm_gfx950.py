"""Never select ASM a16w16 GEMM kernels on gfx950; use hipBLASLt there.

"asm" reaches the dispatcher two ways: from a tuned CSV row, or (newer aiter)
as the default for pre-shuffled weights on every arch but gfx942. Both leave
get_GEMM_A16W16_config(), so one decorator on that function covers both, in
every aiter version, without touching its body. The decorator sits under
lru_cache, so it runs once per shape, and it warns once per process.
"""

from __future__ import annotations

import ast

from patches.engine import Patch, Plan, Step
from patches.finders import Def, marker, module_binds, module_def
from patches.source import Drift, Edit, Source

NAME = "no-asm-gemm-gfx950"
TARGET = "aiter/tuned_gemm.py"
FUNC = "get_GEMM_A16W16_config"
HELPER = "_atom_build_no_asm_gfx950"
WHY = "ASM GEMM is not validated on gfx950 (MI355X);\n# hipBLASLt is, so an asm choice (tuned CSV row or bpreshuffle default) yields to it."

HELPER_SOURCE = f"""{marker(NAME, WHY)}
def {HELPER}(get_config):
    import functools

    warned = []

    @functools.wraps(get_config)
    def get_config_without_asm(*args, **kwargs):
        config = get_config(*args, **kwargs)
        if not config or config.get("libtype") != "asm":
            return config
        from aiter.jit.utils.chip_info import get_gfx

        if get_gfx() != "gfx950":
            return config
        if not warned:
            warned.append(True)
            logger.warning(
                "atom-build: ASM GEMM is disabled on gfx950; using hipBLASLt (solidx -1) instead"
            )
        # A copy: the tuned-CSV dict is shared by every later lookup.
        return {{**config, "libtype": "hipblaslt", "solidx": -1, "kernelName": ""}}

    return get_config_without_asm
"""


def plan(src: Source) -> Plan:
    func = module_def(src.tree, FUNC)
    defined = module_binds(src.tree, HELPER)
    decorated = any(isinstance(d, ast.Name) and d.id == HELPER for d in func.decorator_list)
    if defined and decorated:
        return Plan.already(f"{FUNC}() is wrapped by {HELPER} (line {func.lineno})")
    if defined or decorated:
        raise Drift(func.lineno, f"both `def {HELPER}` and `@{HELPER}` on {FUNC}(), or neither")
    if not module_binds(src.tree, "logger"):
        raise Drift(1, "a module-level `logger` (from aiter import logger)")
    top = _first_line(src, func)
    def_line = src.line_start(func.lineno)
    return Plan.rewrite(
        f"{FUNC}() (line {func.lineno}) now trades asm for hipblaslt on gfx950",
        Edit(src.line_start(top), src.line_start(top), HELPER_SOURCE + "\n\n"),
        Edit(def_line, def_line, f"{src.indent(func)}@{HELPER}\n"),
    )


def _first_line(src: Source, func: Def) -> int:
    """Where the helper goes: above the decorators and the comment block that
    belongs to them, so that comment stays next to what it describes."""
    line = min([func.lineno] + [d.lineno for d in func.decorator_list])
    while line > 1 and src.line(line - 1).lstrip().startswith("#"):
        line -= 1
    return line


PATCH = Patch(
    name=NAME,
    summary="aiter tuned_gemm: on gfx950 an asm GEMM config (tuned or default) becomes hipBLASLt; warns once",
    steps=(Step(TARGET, plan),),
)
