"""Which Triton launches an image makes for a model: every (entry point, layer, M) the image's CK mode routes to a
Triton kernel, derived from the image's own code.

- Shapes: validation.core.models (a preset or a config.json), per tensor-parallel size: the linear layers' (N, K) and,
  for a model with experts, the expert layer.
- Dtypes: the model's config.json `quantization_config` (fp8 with weight_block_size: 1x128/128x128 block scales;
  fp8 without: per-token/per-tensor scales); none: bf16. lm_head and the router stay bf16 in a quantized model.
- Routes, as ATOM (atom/model_ops/linear.py) and aiter decide them:
  - a bf16 layer goes through aiter's tuned dispatch (tgemm.mm): aiter's own lookup, executed for the arch and
    its CU count (validation.aiterpkg.tuned_lookup, with the image's tuned CSVs); a row whose libtype is "triton" reaches
    aiter's Triton gemm_a16w16, anything else is not Triton;
  - an fp8 layer of a CK-free image reaches aiter's Triton gemm_a8w8 / gemm_a8w8_blockscale (use_triton_gemm(),
    which this repo's ATOM patch turns on with ATOM_CK_FREE=1); with CK it reaches CK's;
  - a bf16 expert layer of a CK-free image reaches aiter's Triton fused_moe through ck_free_triton_experts, which this
    repo's atom-ck-free-triton-moe patch adds to ATOM's moe.py for ATOM_CK_FREE=1 (replay.py makes that function's
    calls: the same tensors, dtypes, flags and aiter config per token count); an fp8 expert layer is not planned
    (`not_planned` says so), and with CK the experts run on CK and assembly kernels.
- Not planned, and said in `not_planned` (so the report never reads "0 kernels" as "nothing compiles"): the Triton
  kernels ATOM itself defines or calls outside aiter's GEMM and MoE entry points, as ATOM at its pin (181b0f46) routes
  them: its masked embedding at tp > 1 (atom/model_ops/embed_head.py), the Triton attention path for a head_dim other
  than 128 or a sliding window (atom/model_ops/attention_mha.py), MLA's Triton kernels (attention_mla.py); and
  whatever torch.compile generates. Making them needs ATOM's engine imported, which the warm step does not do.
- M: the batch sizes ATOM captures in CUDA graphs (read from the image's atom/config.py) and, for prefill, a value
  on each side of every bound aiter's GEMM configs switch at (aiter's STANDARD_M_BOUNDS): every (config, Triton
  integer specialisation) pair a run can meet. Triton's in-process cache compiles each variant once.
"""

from __future__ import annotations

import ast
import importlib.machinery
from dataclasses import asdict, dataclass, field
from pathlib import Path

from validation.core import models
from validation.core.models import BF16, FP8, FP8_BLOCK, quantization  # noqa: F401 - plan.quantization, as before

BF16_LAYERS = ("lm_head", "router")  # unquantized in every quantized checkpoint this plans for
MOE_PREFILL = 256  # tokens of a prefill batch routed to the experts, beside the decode sizes


@dataclass(frozen=True, order=True)
class TritonCall:
    """One Triton launch the image makes: aiter's entry point, the model layer, and its shape."""

    entry: str  # gemm_a16w16, gemm_a8w8, gemm_a8w8_blockscale, fused_moe
    layer: str
    M: int
    N: int
    K: int
    tp: int
    experts: int = 0  # fused_moe: E, top_k
    top_k: int = 0


@dataclass
class Plan:
    model: str
    arch: str
    ck_mode: str
    tp: list[int]
    m_values: list[int]
    m_from: str
    calls: list[TritonCall] = field(default_factory=list)
    not_planned: list[str] = field(default_factory=list)  # layers that reach a Triton kernel this does not plan
    dispatch: dict[str, int] = field(default_factory=dict)  # bf16 layers: aiter's libtype -> calls

    def to_json(self) -> dict:
        out = asdict(self)
        out["calls"] = len(self.calls)
        out["entries"] = sorted({c.entry for c in self.calls})
        return out


def make(model: str, arch: str, ck_mode: str, tp: list[int], m_values: list[int], m_from: str,
         bf16_libtype) -> Plan:
    """bf16_libtype(M, N, K) -> the libtype aiter's tuned dispatch picks (validation.aiterpkg.tuned_lookup)."""
    name, cfg = models.load_config(model)
    plan = Plan(str(name), arch, ck_mode, list(tp), list(m_values), m_from)
    quant = quantization(cfg)
    for size in tp:
        try:
            shapes = models.gemm_shapes(cfg, size)
            models.expert_shape(cfg, size)
        except ValueError as exc:  # not a size this model runs at
            plan.not_planned.append(f"tp={size}: {exc}")
            continue
        for shape in shapes:
            dtype = BF16 if shape.layer in BF16_LAYERS else quant
            _linear(plan, shape, dtype, size, bf16_libtype)
        _experts(plan, cfg, quant, size)
        plan.not_planned += atom_own_kernels(cfg, size)
    plan.calls = sorted(set(plan.calls))
    return plan


def atom_own_kernels(cfg: dict, tp: int) -> list[str]:
    """The Triton kernels of ATOM's own layers this model reaches at tp (see the module's docstring)."""
    out = [f"tp={tp}: ATOM's masked_embedding (atom/model_ops/embed_head.py, every forward above tp 1)"] if tp > 1 else []
    if "kv_lora_rank" in cfg:
        out.append(f"tp={tp}: ATOM's MLA attention kernels (atom/model_ops/attention_mla.py, aiter's Triton MLA ops)")
        return out
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None
    if head_dim != 128 or window:
        why = f"head_dim {head_dim}" if head_dim != 128 else f"sliding_window {window}"
        out.append(f"tp={tp}: ATOM's Triton attention ({why}: aiter's unified_attention and "
                   "fused_qk_rope_reshape_and_cache, atom/model_ops/attention_mha.py)")
    return out


def _linear(plan: Plan, shape, dtype: str, tp: int, bf16_libtype) -> None:
    for M in plan.m_values:
        if dtype == BF16:
            libtype = bf16_libtype(M, shape.N, shape.K)
            plan.dispatch[libtype] = plan.dispatch.get(libtype, 0) + 1
            if libtype == "triton":
                plan.calls.append(TritonCall("gemm_a16w16", shape.layer, M, shape.N, shape.K, tp))
        elif plan.ck_mode == "ckfree":
            entry = "gemm_a8w8_blockscale" if dtype == FP8_BLOCK else "gemm_a8w8"
            plan.calls.append(TritonCall(entry, shape.layer, M, shape.N, shape.K, tp))


def _experts(plan: Plan, cfg: dict, quant: str, tp: int) -> None:
    shape = models.expert_shape(cfg, tp)
    if shape is None or plan.ck_mode != "ckfree":
        return
    if quant != BF16:
        plan.not_planned.append(f"experts at tp={tp}: {quant} fused MoE (aiter's Triton fused_moe with fp8 "
                                "weights is not planned)")
        return
    for T in sorted({*plan.m_values, MOE_PREFILL}):
        plan.calls.append(TritonCall("fused_moe", "experts", T, 2 * shape.inter, shape.hidden, tp, shape.experts,
                               shape.top_k))


# ---- the M values: ATOM's CUDA-graph batch sizes and aiter's config bounds ------------------------------------

def m_values(atom_pkg: Path | None, bounds: tuple[int, ...]) -> tuple[list[int], str]:
    """(sorted M values, where they came from)."""
    graph, where = graph_batch_sizes(atom_pkg) if atom_pkg else ([], "no ATOM in this image")
    prefill = {m for b in bounds for m in (b, b + 1)} | {2 * max(bounds), 2 * max(bounds) + 1}
    return sorted({*graph, *prefill}), f"{where}; aiter's STANDARD_M_BOUNDS {list(bounds)} and one above each"


def graph_batch_sizes(atom_pkg: Path) -> tuple[list[int], str]:
    """The batch sizes ATOM captures by default: atom/config.py's CompilationConfig.cuda_graph_sizes default (set in
    __post_init__) expanded as Config._set_cudagraph_sizes expands one value: a literal list plus a range."""
    path = atom_pkg / "config.py"
    tree = ast.parse(path.read_text())
    top = _default_graph_size(tree)
    base, start, step = _expansion(tree)
    return sorted({*base, *range(start, top + 1, step)}), f"ATOM's CUDA-graph sizes ({path})"


def _method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    raise ValueError(f"atom/config.py has no {cls}.{name}: ATOM moved its CUDA-graph sizes (validation.warmcache.plan "
                     "reads them)")


def _default_graph_size(tree: ast.Module) -> int:
    for node in ast.walk(_method(tree, "CompilationConfig", "__post_init__")):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.List)
                and any(isinstance(t, ast.Attribute) and t.attr == "cuda_graph_sizes" for t in node.targets)):
            return int(ast.literal_eval(node.value)[0])
    raise ValueError("CompilationConfig.__post_init__ sets no default cuda_graph_sizes list")


def _expansion(tree: ast.Module) -> tuple[list[int], int, int]:
    """The `[1, 2, 4, 8] + [i for i in range(16, n + 1, 16)]` of _set_cudagraph_sizes: (list, start, step)."""
    for node in ast.walk(_method(tree, "Config", "_set_cudagraph_sizes")):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.List):
            comp = node.right
            if isinstance(comp, ast.ListComp) and isinstance(comp.generators[0].iter, ast.Call):
                args = comp.generators[0].iter.args
                if len(args) == 3:
                    return ast.literal_eval(node.left), ast.literal_eval(args[0]), ast.literal_eval(args[2])
    raise ValueError("Config._set_cudagraph_sizes no longer expands a size as `[...] + [i for i in range(a, n + 1, "
                     "s)]`")


def atom_package() -> Path | None:
    """The installed ATOM package folder, found without importing it (importing atom imports aiter)."""
    spec = importlib.machinery.PathFinder.find_spec("atom")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))
