"""A model's route in an image: every layer's ATOM op, the aiter function it calls, the kernels that reaches (kind,
JIT module) and whether the image has each, derived from ATOM's and aiter's code as the image holds them.

- The model class: config.json's `architectures[0]` looked up in ATOM's own `support_model_arch_dict`
  (atom/model_engine/model_runner.py).
- Its forward and compute_logits, walked (validation.routing.walker) from that class down through ATOM into aiter,
  with the image's environment: ATOM's switches are ATOM's own `environment_variables` lambdas (atom/utils/envs.py)
  run on this process's environment, aiter's `os.getenv` reads likewise.
- Model facts the walker cannot read from code, taken from config.json: the quantization (QuantType and dtype of
  the checkpoint's linear and expert weights; lm_head and the router stay bf16) and the config's own values.
- Present: a Triton kernel, hipBLASLt and rocBLAS always; FlyDSL when the flydsl package is installed; an aiter JIT
  or assembly module unless the image is CK-free and aiter's own `_get_ck_exclude_modules()` lists it.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from validation.core import models
from validation.routing import leaves as kinds
from validation.routing.source import Def, Sources
from validation.routing.values import UNKNOWN, Const, Values
from validation.routing.walker import Frame, Leaf, Walker

CK_FREE = "ckfree"
HELP = {
    # What each switch would move, read from ATOM at its pin (181b0f46); printed beside a refusal when it applies.
    "module_moe_ck2stages": "no ATOM switch moves bf16 experts off aiter's CK 2-stage MoE at this pin",
    "module_moe_asm": "no ATOM switch moves the router's topk_softmax off module_moe_asm at this pin",
}

BF16_LAYERS = ("lm_head", "gate")  # unquantized in every quantized checkpoint routed here (ATOM's attribute names)


@dataclass(frozen=True, order=True)
class OnRoute:
    kind: str
    name: str
    module: str
    entry: str  # the aiter function ATOM calls ("" for ATOM's own Triton kernels)
    site: str  # the ATOM function that calls it
    present: bool


@dataclass
class LayerRoute:
    layer: str  # the attribute path from the model (model.layers.mlp.experts)
    op: str  # the ATOM layer class (FusedMoE)
    kernels: list[OnRoute] = field(default_factory=list)

    @property
    def missing(self) -> list[OnRoute]:
        return [k for k in self.kernels if not k.present]


@dataclass
class Route:
    model: str
    arch_class: str
    ck_mode: str
    switches: dict[str, str]
    layers: list[LayerRoute]
    unresolved: int  # calls the walker could not resolve (dynamic dispatch it does not follow)

    @property
    def unservable(self) -> list[LayerRoute]:
        return [layer for layer in self.layers if layer.missing]

    def to_json(self) -> dict:
        out = asdict(self)
        out["servable"] = not self.unservable
        # Surest first: a layer that reaches no kernel the image has, then aiter's JIT and assembly modules (what a
        # CK-free build left out) before an absent FlyDSL.
        missing = sorted({(len(lr.missing) < len(lr.kernels), k.kind not in (kinds.JIT, kinds.ASM), lr.layer, lr.op,
                           k.module or k.name, k.entry) for lr in self.unservable for k in lr.missing})
        out["missing"] = [dict(zip(("layer", "op", "module", "entry"), m[2:], strict=True)) for m in missing]
        return out


def for_image(model: str, ck_mode: str, environ: dict[str, str] | None = None) -> Route:
    """The route of a model (preset or config.json) in this Python's ATOM and aiter. ValueError on bad input;
    LookupError when this Python has no ATOM or aiter to read."""
    roots = packages()
    if set(roots) != {"atom", "aiter"}:
        raise LookupError(f"this Python has no {' or '.join(sorted({'atom', 'aiter'} - set(roots)))} to read")
    name, cfg = models.load_config(model)
    return make(str(name), cfg, models.quantization(cfg), ck_mode, roots,
                dict(os.environ if environ is None else environ), importlib.util.find_spec("flydsl") is not None)


def packages() -> dict[str, Path]:
    """The installed atom and aiter package folders, found without importing either."""
    out = {}
    for name in ("atom", "aiter"):
        spec = importlib.machinery.PathFinder.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            out[name] = Path(next(iter(spec.submodule_search_locations)))
    return out


def model_class(src: Sources, cfg: dict) -> Def:
    arch = (cfg.get("architectures") or [None])[0]
    if not arch:
        raise ValueError("config.json names no architectures: ATOM picks its model class by architectures[0]")
    table = _arch_table(src)
    if arch not in table:
        raise ValueError(f"ATOM at this image has no model for {arch} (atom/model_engine/model_runner.py "
                         f"support_model_arch_dict: {', '.join(sorted(table))})")
    module, name = table[arch].rsplit(".", 1)
    found = src.lookup(module, name)
    if not isinstance(found, Def):
        raise ValueError(f"ATOM maps {arch} to {table[arch]}, which is not a class in this image")
    return found


def _arch_table(src: Sources) -> dict[str, str]:
    mod = src.module("atom.model_engine.model_runner")
    expr = mod.consts.get("support_model_arch_dict") if mod else None
    if not isinstance(expr, ast.Dict):
        raise ValueError("atom/model_engine/model_runner.py has no support_model_arch_dict literal: ATOM moved its "
                         "model table (validation.route reads it)")
    return ast.literal_eval(expr)


def atom_env(src: Sources, environ: dict[str, str]):
    """env(module, name): ATOM's switch as ATOM computes it (its envs.py lambdas), or os.getenv's answer."""
    envs = src.module("atom.utils.envs")
    table: dict = {}
    if envs is not None:
        namespace: dict = {}
        exec(compile(envs.tree, str(envs.path), "exec"), namespace)  # noqa: S102 - ATOM's own envs.py: os.getenv lambdas
        table = namespace.get("environment_variables", {})

    def env(module: str | None, name: str) -> Values | None:
        if module == "atom.utils.envs" and name in table:
            saved = dict(os.environ)
            try:
                os.environ.clear()
                os.environ.update(environ)
                return frozenset({Const(table[name]())})
            finally:
                os.environ.clear()
                os.environ.update(saved)
        if module is None:
            return frozenset({Const(environ[name])}) if name in environ else None
        return None

    return env, table


def facts(walker_for_eval: Walker, quant: str) -> dict[str, Values]:
    """The checkpoint's quantization as ATOM's code spells it (QuantType.X, dtypes.Y), evaluated in
    atom.model_ops.linear, which imports both."""
    qtype, dtype = {"bf16": ("No", "bf16"), "fp8": ("per_Token", "fp8"),
                    "fp8-blockscale": ("per_1x128", "fp8")}[quant]
    frame = Frame(Def("atom.model_ops.linear", "<facts>", ast.FunctionDef()), "atom.model_ops.linear", None, {}, {},
                  False)

    def ev(text: str) -> Values:
        return walker_for_eval.expr(ast.parse(text, mode="eval").body, frame) or UNKNOWN

    out = {"quant_type": ev(f"QuantType.{qtype}"), "quant_dtype": ev(f"dtypes.{dtype}"),
           "params_dtype": ev(f"dtypes.{dtype}")}
    return {k: v for k, v in out.items() if v}


def make(model: str, cfg: dict, quant: str, ck_mode: str, roots: dict[str, Path], environ: dict[str, str],
         has_flydsl: bool) -> Route:
    src = Sources(roots)
    env, table = atom_env(src, environ)
    probe = Walker(src, {}, env, {})
    layer_facts = facts(probe, quant)
    bf16 = facts(probe, "bf16")
    walker = Walker(src, layer_facts, env, {name: bf16 for name in BF16_LAYERS} if quant != "bf16" else {})
    cls = model_class(src, cfg)
    found: set[Leaf] = set()
    for method in ("forward", "compute_logits"):
        if src.method(cls, method) is not None:
            found |= walker.forward(cls, method)
    ck = kinds.ck_modules(roots["aiter"]) if ck_mode == CK_FREE else set()
    layers: dict[tuple[str, str], set[OnRoute]] = defaultdict(set)
    for leaf in found:
        present = _present_leaf(leaf, ck, has_flydsl)
        layers[(".".join(leaf.layer), leaf.op)].add(OnRoute(leaf.kind, leaf.name, leaf.module, leaf.entry,
                                                           leaf.site, present))
    switches = {k: str(next(iter(env("atom.utils.envs", k))).value)
                for k in sorted(table) if k.startswith(("ATOM_USE_", "ATOM_FP8_", "ATOM_CK_"))}
    return Route(model, cls.name, ck_mode, switches,
                 [LayerRoute(layer, op, sorted(ks)) for (layer, op), ks in sorted(layers.items())],
                 len(walker.unresolved))


def _present_leaf(leaf: Leaf, ck: set[str], has_flydsl: bool) -> bool:
    return present(leaf.kind, leaf.module, ck, has_flydsl)


def present(kind: str, module: str, ck: set[str], has_flydsl: bool) -> bool:
    """Whether an image has a kernel of this kind: ck is the set of modules its build left out (empty with CK)."""
    if kind == kinds.FLYDSL:
        return has_flydsl
    if kind in (kinds.JIT, kinds.ASM):
        return module not in ck
    return True


def table(route: Route) -> str:
    lines = [f"route of {route.model} ({route.arch_class}), {route.ck_mode}; {route.unresolved} calls not followed"]
    for layer in route.layers:
        kernels = ", ".join(sorted({f"{k.kind}:{k.module or k.name.rsplit('.', 1)[-1]}{'' if k.present else ' MISSING'}"
                                    for k in layer.kernels}))
        lines.append(f"  {layer.layer or '-'} [{layer.op or '-'}]: {kernels}")
    return "\n".join(lines)


def refusal(route: Route) -> str:
    """One sentence (no "; ", which cuts a check's reason): the model, how many layers, the surest one in full."""
    first = route.to_json()["missing"][0]
    hint = HELP.get(first["module"], "no ATOM switch or patch of this repo moves it")
    return (f"a {route.ck_mode} image cannot serve {route.model}: {len(route.unservable)} layers may need modules "
            f"it lacks, e.g. {first['layer']} ({first['op'] or 'ATOM'}) -> {first['entry'] or '?'} -> "
            f"{first['module']} ({hint}), --allow-unservable builds it anyway")
