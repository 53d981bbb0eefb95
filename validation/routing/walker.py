"""Walk ATOM's model code as Python, without running it: which aiter kernels each layer's forward reaches.

An abstract interpreter over the AST of the image's ATOM and aiter. Values are sets of what a name can hold (a
function, a class, an instance, a module, a constant, an enum member or dtype by name); an empty set is unknown.
A branch whose condition is known (an ATOM or aiter environment switch read from the image, a model fact such as
its quantization, a constant argument) is taken alone; an unknown condition takes both branches, so a route lists
every kernel a layer may reach, prefill and decode alike. A call to an aiter function decorated with
`compile_ops("module_x")` ends there (a JIT module), as does a launch `kernel[grid](...)` of a `@triton.jit`
function (a Triton kernel) and a call into FlyDSL. Exception handlers are not walked (error paths); a call the walker
cannot resolve is counted, never guessed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from validation.routing import leaves as leafkinds
from validation.routing.source import Def, Sources
from validation.routing.values import (
    UNKNOWN,
    Bound,
    Const,
    External,
    Fn,
    Inst,
    Lam,
    Mod,
    Partial,
    StrMethod,
    Super,
    Sym,
    Values,
    consts,
    truth,
)

MAX_DEPTH = 48
STR_METHODS = frozenset({"lower", "upper", "strip", "startswith", "endswith"})  # pure, a str or a bool back
FORWARD_CONTEXT = "static_forward_context"
BUILTINS = {"len", "isinstance", "getattr", "hasattr", "super", "int", "str", "float", "bool", "min", "max", "range",
            "tuple", "list", "dict", "set", "print", "zip", "enumerate", "type", "sum", "any", "all", "sorted"}


@dataclass(frozen=True, order=True)
class Leaf:
    """One kernel a layer reaches, with how: the ATOM op (a class of atom.model_ops), the aiter function ATOM
    calls, and the ATOM function that calls it."""

    kind: str  # leaves.TRITON, JIT, ASM, HIPBLASLT, ROCBLAS, FLYDSL
    name: str  # the kernel (Triton) or the decorated function
    module: str = ""  # the aiter JIT module, for kinds built by aiter's JIT
    layer: tuple[str, ...] = ()
    op: str = ""
    entry: str = ""
    site: str = ""


@dataclass
class Frame:
    func: Def
    module: str
    inst: Inst | None
    names: dict[str, Values]
    origin: dict[str, str]  # local name -> the self attribute it was read from (a loop over self.layers)
    record: bool
    returns: set = field(default_factory=set)
    leaves: set = field(default_factory=set)
    ended: bool = False  # the path walked so far surely returned or raised: what follows it in a block is dead


class Walker:
    def __init__(self, sources: Sources, facts: dict[str, Values], env, overrides: dict[str, dict[str, Values]]):
        """facts: attribute name -> values (quant_type, quant_dtype, ...); env(module, name) -> Values for an
        environment switch or None; overrides: self attribute name -> facts for the layers under it (lm_head)."""
        self.src = sources
        self.facts = facts
        self.env = env
        self.overrides = overrides
        self.unresolved: set[str] = set()
        self._memo: dict = {}
        self._active: set = set()
        self._attrs: dict = {}
        self._const_active: set = set()
        self._custom_ops: dict[str, Values] | None = None
        self._layers: list[Inst] = []  # the instances whose methods are running, innermost last
        self._lookups: dict[str, bool] = {}
        self._assigned: dict[str, dict[str, list[ast.expr]]] = {}
        self._made: dict[tuple[str, int], set] = {}
        self.depth = 0

    # ---- entry -------------------------------------------------------------------------------------------------

    def forward(self, cls: Def, method: str = "forward") -> set[Leaf]:
        m = self.src.method(cls, method)
        if m is None:
            raise ValueError(f"{cls.name} has no {method}()")
        summary = self.call_def(m, [], {}, Inst(cls))
        return set(summary[1])

    # ---- calls -------------------------------------------------------------------------------------------------

    def call_def(self, d: Def, args: list[Values], kwargs: dict[str, Values], inst: Inst | None,
                 record: bool = True) -> tuple[Values, frozenset]:
        if not isinstance(d.node, ast.FunctionDef | ast.AsyncFunctionDef):
            return UNKNOWN, frozenset()
        names = self._bind(d, args, kwargs, inst)
        layer = self._layers[-1] if self._layers and self._looks_up_layer(d) else None
        key = (d.name, inst, layer, record, id(self.facts), tuple(sorted((k, v) for k, v in names.items())))
        if key in self._memo:
            return self._memo[key]
        if key in self._active or self.depth > MAX_DEPTH:
            return UNKNOWN, frozenset()
        self._active.add(key)
        self.depth += 1
        if inst is not None:
            self._layers.append(inst)
        frame = Frame(d, d.module, inst, dict(names), {}, record)
        try:
            self.block(d.node.body, frame)
        finally:
            self.depth -= 1
            self._active.discard(key)
            if inst is not None:
                self._layers.pop()
        out = (frozenset(frame.returns), frozenset(frame.leaves))
        self._memo[key] = out
        return out

    def _looks_up_layer(self, d: Def) -> bool:
        if d.name not in self._lookups:
            self._lookups[d.name] = any(isinstance(n, ast.Attribute) and n.attr == FORWARD_CONTEXT
                                        for n in ast.walk(d.node))
        return self._lookups[d.name]

    def _bind(self, d: Def, args: list[Values], kwargs: dict[str, Values], inst: Inst | None) -> dict[str, Values]:
        a = d.node.args
        params = [p.arg for p in (*a.posonlyargs, *a.args)]
        names: dict[str, Values] = {}
        is_static = any(isinstance(x, ast.Name) and x.id == "staticmethod" for x in d.node.decorator_list)
        if "." in d.qual and params and not is_static:
            names[params[0]] = frozenset({inst}) if inst else UNKNOWN
            params = params[1:]
        defaults = dict(zip(reversed(params), reversed(a.defaults), strict=False))
        defaults |= {k.arg: v for k, v in zip(a.kwonlyargs, a.kw_defaults, strict=True) if v is not None}
        for name, value in zip(params, args, strict=False):
            names[name] = value
        for name in [*params, *(k.arg for k in a.kwonlyargs)]:
            if name in kwargs:
                names[name] = kwargs[name]
            elif name not in names:
                names[name] = self.module_value(d.module, defaults[name]) if name in defaults else UNKNOWN
        return names

    def invoke(self, fvals: Values, args: list[Values], kwargs: dict[str, Values], frame: Frame,
               via: str | None) -> Values:
        out: set = set()
        saved = self.facts
        if via in self.overrides:  # a layer the checkpoint leaves unquantized (lm_head, the router)
            self.facts = self.overrides[via]
        try:
            for f in fvals:
                returns, leaves = self._invoke_one(f, args, kwargs, frame)
                out |= returns
                if frame.record and leaves:
                    frame.leaves |= {self._cross(leaf, frame, f, via) for leaf in leaves}
        finally:
            self.facts = saved
        return frozenset(out)

    def _invoke_one(self, f, args, kwargs, frame) -> tuple[Values, frozenset]:
        rec = frame.record
        if isinstance(f, Fn):
            kind = leafkinds.kind_of(self.src, f.d)
            if kind:
                return UNKNOWN, frozenset({Leaf(*kind)})
            if isinstance(f.d.node, ast.ClassDef):
                new = self.src.method(f.d, "__new__")
                if new is not None and new.module.startswith(("atom", "aiter")):  # a factory: what __new__ returns
                    made = {v for v in self.call_def(new, [], {}, None, record=False)[0] if isinstance(v, Inst)}
                    if made:
                        return frozenset(made), frozenset()
                return frozenset({self._construct(f.d, args, kwargs)}), frozenset()
            if f.d.qual == "resolve_obj_by_qualname" and args:  # ATOM names its attention backends as strings
                return self._by_qualname(args[0]), frozenset()
            return self.call_def(f.d, args, kwargs, None, rec)
        if isinstance(f, Bound):
            kind = leafkinds.kind_of(self.src, f.d)
            if kind:
                return UNKNOWN, frozenset({Leaf(*kind)})
            return self.call_def(f.d, args, kwargs, f.inst, rec)
        if isinstance(f, Inst):
            m = self.src.method(f.cls, "__call__") or self.src.method(f.cls, "forward")
            return self.call_def(m, args, kwargs, f, rec) if m else (UNKNOWN, frozenset())
        if isinstance(f, Partial):
            out, leaves = set(), set()
            for target in f.target:
                r, lv = self._invoke_one(target, [UNKNOWN] * f.lead + list(args), kwargs, frame)
                out |= r
                leaves |= lv
            return frozenset(out), frozenset(leaves)
        if isinstance(f, Lam):
            sub = Frame(Def(f.module, "<lambda>", ast.FunctionDef()), f.module, frame.inst, dict(frame.names), {}, rec)
            value = self.expr(f.node.body, sub)
            return value, frozenset(sub.leaves)
        if isinstance(f, StrMethod):
            known = [consts(a) for a in args]
            if all(k is not None and len(k) == 1 for k in known) and not kwargs:
                try:
                    return frozenset({Const(getattr(f.text, f.name)(*(next(iter(k))[1] for k in known)))}), frozenset()
                except (TypeError, ValueError):  # an argument of the wrong type: the call fails at run time too
                    return UNKNOWN, frozenset()
            return UNKNOWN, frozenset()
        if isinstance(f, External) and f.path.split(".")[0] == "flydsl":  # aiter's wrapper compiles a FlyDSL kernel
            return UNKNOWN, frozenset({Leaf(leafkinds.FLYDSL, "flydsl", "flydsl")})
        if isinstance(f, External) and f.path.startswith("torch.ops."):
            return self._invoke_one(Partial(self.custom_op(f.path.rsplit(".", 1)[-1])), args, kwargs, frame)
        if isinstance(f, External):
            return self._external(f.path, args, kwargs), frozenset()
        return UNKNOWN, frozenset()

    def _by_qualname(self, names: Values) -> Values:
        out = set()
        for v in names:
            if isinstance(v, Const) and isinstance(v.value, str) and "." in v.value:
                module, attr = v.value.rsplit(".", 1)
                found = self.src.lookup(module, attr)
                if isinstance(found, Def):
                    out.add(Fn(found))
        return frozenset(out)

    def _construct(self, cls: Def, args: list[Values], kwargs: dict[str, Values]) -> Inst:
        """An instance; a class without an __init__ of its own in the walked code (a dataclass, a NamedTuple) keeps
        its constructor's arguments as its attributes."""
        inst = Inst(cls)
        if self.src.method(cls, "__init__") is None:
            fields = [n.target.id for n in cls.node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
            store = self._attrs.setdefault((inst, id(self.facts)), {})
            for name, value in [*zip(fields, args, strict=False), *kwargs.items()]:
                store[name] = store.get(name, UNKNOWN) | value
        return inst

    def _external(self, path: str, args: list[Values], kwargs: dict[str, Values]) -> Values:
        if path == "functools.partial" and args:
            return frozenset({Partial(args[0])})
        if path == "builtins.bool" and len(args) == 1:
            t = truth(args[0])
            return frozenset({Const(t)}) if t is not None else UNKNOWN
        if path in ("os.getenv", "os.environ.get") and args:
            names = consts(args[0])
            default = args[1] if len(args) > 1 else frozenset({Const(None)})
            if names and len(names) == 1:
                value = self.env(None, next(iter(names))[1])
                return value if value is not None else default
        return UNKNOWN

    def custom_op(self, name: str) -> Values:
        """torch.ops.<ns>.<name>: the function registered under that name (direct_register_custom_op)."""
        if self._custom_ops is None:
            self._custom_ops = leafkinds.custom_ops(self.src)
        return self._custom_ops.get(name, UNKNOWN)

    def _cross(self, leaf: Leaf, frame: Frame, callee, via: str | None) -> Leaf:
        """A leaf seen from the caller: the layer it runs under, the ATOM op and the aiter entry point."""
        target = callee.d if isinstance(callee, Fn | Bound) else callee.cls if isinstance(callee, Inst) else None
        caller = frame.func.module
        if target is not None:
            if caller.startswith("atom") and target.module.startswith("aiter") and not leaf.entry:
                leaf = replace(leaf, entry=target.name, site=frame.func.name)
            if (caller.startswith("atom") and not caller.startswith("atom.model_ops")
                    and target.module.startswith("atom.model_ops") and not leaf.op):
                leaf = replace(leaf, op=target.qual.split(".")[0])
        if via:
            leaf = replace(leaf, layer=(via, *leaf.layer))
        return leaf

    # ---- statements --------------------------------------------------------------------------------------------

    def block(self, body: list[ast.stmt], frame: Frame) -> None:
        for stmt in body:
            self.stmt(stmt, frame)
            if frame.ended:
                return

    def _maybe(self, body: list[ast.stmt], frame: Frame) -> None:
        """A block that may not run at all (a loop's body, a match case): its return ends nothing after it."""
        self.block(body, frame)
        frame.ended = False

    def stmt(self, s: ast.stmt, frame: Frame) -> None:  # noqa: C901 - one case per statement kind
        if isinstance(s, ast.Expr):
            self.expr(s.value, frame)
        elif isinstance(s, ast.Assign):
            value = self.expr(s.value, frame)
            for target in s.targets:
                self.bind(target, value, frame, s.value)
        elif isinstance(s, ast.AnnAssign) and s.value is not None:
            self.bind(s.target, self.expr(s.value, frame), frame, s.value)
        elif isinstance(s, ast.AugAssign):
            self.expr(s.value, frame)
        elif isinstance(s, ast.Return):
            frame.returns |= self.expr(s.value, frame) if s.value else {Const(None)}
            frame.ended = True
        elif isinstance(s, ast.Raise):
            frame.ended = True
        elif isinstance(s, ast.If):
            self.branch(s.test, s.body, s.orelse, frame)
        elif isinstance(s, ast.For | ast.AsyncFor):
            self._loop_target(s.target, s.iter, frame)
            self._maybe(s.body, frame)
            self._maybe(s.orelse, frame)
        elif isinstance(s, ast.While):
            if truth(self.expr(s.test, frame)) is not False:
                self._maybe(s.body, frame)
            self._maybe(s.orelse, frame)
        elif isinstance(s, ast.With | ast.AsyncWith):
            for item in s.items:
                value = self.expr(item.context_expr, frame)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, value, frame, None)
            self.block(s.body, frame)
        elif isinstance(s, ast.Try):
            self.block(s.body, frame)
            self.block(s.orelse, frame)
            self.block(s.finalbody, frame)
        elif isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef):
            frame.names[s.name] = frozenset({Fn(Def(frame.module, f"{frame.func.qual}.<locals>.{s.name}", s))})
        elif isinstance(s, ast.Import | ast.ImportFrom):
            self._local_import(s, frame)
        elif isinstance(s, ast.Match):
            self.expr(s.subject, frame)
            for case in s.match_cases:
                self._maybe(case.body, frame)

    def _loop_target(self, target: ast.expr, it: ast.expr, frame: Frame) -> None:
        """for x in X; for i, x in enumerate(X); for a, b in zip(A, B): each name gets what its iterable holds."""
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and isinstance(target, ast.Tuple):
            sources = it.args[:1] if it.func.id == "enumerate" else it.args if it.func.id == "zip" else None
            if sources is not None:
                names = target.elts[1:] if it.func.id == "enumerate" else target.elts
                for name, source in zip(names, sources, strict=False):
                    self.bind(name, self.expr(source, frame), frame, source)
                return
        self.bind(target, self.expr(it, frame), frame, it)

    def branch(self, test: ast.expr, body: list[ast.stmt], orelse: list[ast.stmt], frame: Frame) -> None:
        known = truth(self.expr(test, frame))
        if known is True:
            self.block(body, frame)
        elif known is False:
            self.block(orelse, frame)
        else:
            before = dict(frame.names)
            self.block(body, frame)
            after_body, frame.names = frame.names, dict(before)
            body_ended, frame.ended = frame.ended, False
            self.block(orelse, frame)
            frame.ended = frame.ended and body_ended
            for name, value in after_body.items():
                frame.names[name] = frame.names.get(name, UNKNOWN) | value

    def _local_import(self, s: ast.Import | ast.ImportFrom, frame: Frame) -> None:
        mod = self.src.module(frame.module)
        if isinstance(s, ast.Import):
            for alias in s.names:
                local = alias.asname or alias.name.split(".")[0]
                target = alias.name if alias.asname else alias.name.split(".")[0]
                frame.names[local] = self._module_ref(target)
            return
        from validation.routing.source import _absolute

        source = _absolute(frame.module, bool(mod and mod.is_package), s)
        for alias in s.names:
            if alias.name == "*":
                continue
            sub = f"{source}.{alias.name}"
            if self.src.module(sub) is not None:
                value = frozenset({Mod(sub)})
            else:
                found = self.src.lookup(source, alias.name)
                value = self.convert(source, alias.name, found) if found is not None else frozenset(
                    {External(sub)}) if self.src.module(source) is None else UNKNOWN
            frame.names[alias.asname or alias.name] = value

    def _module_ref(self, name: str) -> Values:
        return frozenset({Mod(name)}) if self.src.module(name) is not None else frozenset({External(name)})

    def bind(self, target: ast.expr, value: Values, frame: Frame, source: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            frame.names[target.id] = value
            root = _self_attr(source)
            if root:
                frame.origin[target.id] = root
            elif isinstance(source, ast.Name) and source.id in frame.origin:
                frame.origin[target.id] = frame.origin[source.id]
            else:
                frame.origin.pop(target.id, None)
        elif isinstance(target, ast.Tuple | ast.List):
            for i, elt in enumerate(target.elts):
                part, part_source = UNKNOWN, source
                if isinstance(source, ast.Tuple | ast.List) and len(source.elts) == len(target.elts):
                    part, part_source = self.expr(source.elts[i], frame), source.elts[i]
                self.bind(elt.value if isinstance(elt, ast.Starred) else elt, part, frame, part_source)
        elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and frame.inst is not None
              and target.value.id == _self_name(frame)):
            store = self._attrs.setdefault((frame.inst, id(self.facts)), {})
            store[target.attr] = store.get(target.attr, UNKNOWN) | value | self._constructed_here(frame, source)

    # ---- expressions -------------------------------------------------------------------------------------------

    def expr(self, e: ast.expr | None, frame: Frame) -> Values:  # noqa: C901 - one case per expression kind
        if e is None:
            return UNKNOWN
        if isinstance(e, ast.Constant):
            return frozenset({Const(e.value)})
        if isinstance(e, ast.Name):
            return self.name(e.id, frame)
        if isinstance(e, ast.Attribute):
            return self.attribute(self.expr(e.value, frame), e.attr, frame)
        if isinstance(e, ast.Call):
            return self.call(e, frame)
        if isinstance(e, ast.BoolOp):
            return self.boolop(e, frame)
        if isinstance(e, ast.UnaryOp):
            value = self.expr(e.operand, frame)
            if isinstance(e.op, ast.Not):
                t = truth(value)
                return frozenset({Const(not t)}) if t is not None else UNKNOWN
            return UNKNOWN
        if isinstance(e, ast.Compare):
            return self.compare(e, frame)
        if isinstance(e, ast.IfExp):
            t = truth(self.expr(e.test, frame))
            if t is True:
                return self.expr(e.body, frame)
            if t is False:
                return self.expr(e.orelse, frame)
            return self.expr(e.body, frame) | self.expr(e.orelse, frame)
        if isinstance(e, ast.Subscript):
            if isinstance(e.value, ast.Attribute) and e.value.attr == FORWARD_CONTEXT and self._layers:
                # ATOM's layers register themselves in static_forward_context by name and its custom ops (moe_forward,
                # unified_attention_with_output_base) look them up: the layer is the one whose method made the call
                return frozenset({self._layers[-1]})
            value = self.expr(e.value, frame)
            self.expr(e.slice, frame)
            return value
        if isinstance(e, ast.Tuple | ast.List | ast.Set | ast.Dict):  # a container holds what any element holds
            out: set = set()
            for key in e.keys if isinstance(e, ast.Dict) else ():
                self.expr(key, frame)
            for elt in e.values if isinstance(e, ast.Dict) else e.elts:
                out |= self.expr(elt, frame)
            return frozenset(out)
        if isinstance(e, ast.Lambda):
            return frozenset({Lam(e, frame.module, id(e))})
        if isinstance(e, ast.NamedExpr):
            value = self.expr(e.value, frame)
            self.bind(e.target, value, frame, e.value)
            return value
        if isinstance(e, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            for gen in e.generators:
                self.bind(gen.target, self.expr(gen.iter, frame), frame, gen.iter)
            parts = [e.key, e.value] if isinstance(e, ast.DictComp) else [e.elt]
            out = set()
            for part in parts:
                out |= self.expr(part, frame)
            return frozenset(out)
        for child in ast.iter_child_nodes(e):  # f-strings, dicts, starred, await, binops: calls inside still count
            if isinstance(child, ast.expr):
                self.expr(child, frame)
        return UNKNOWN

    def name(self, name: str, frame: Frame) -> Values:
        if name in frame.names:
            return frame.names[name]
        found = self.src.lookup(frame.module, name)
        if found is not None:
            return self.convert(frame.module, name, found)
        mod = self.src.module(frame.module)
        if mod and name in mod.imports:
            target, attr = mod.imports[name]
            return frozenset({External(f"{target}.{attr}" if attr else target)})
        if name in BUILTINS:
            return frozenset({External(f"builtins.{name}")})
        return UNKNOWN

    def convert(self, module: str, name: str, found) -> Values:
        if isinstance(found, Def):
            return frozenset({Fn(found)})
        if isinstance(found, str):
            return frozenset({Mod(found)})
        return self.module_value(found.module, found.node, name)

    def module_value(self, module: str, e: ast.expr, name: str = "") -> Values:
        """A module-level expression (a constant, a default argument): literals as themselves, a call of a walked
        class as its instance, anything else as a symbol named for where it is bound."""
        if isinstance(e, ast.Constant):
            return frozenset({Const(e.value)})
        key = (module, id(e))
        if key in self._const_active:
            return UNKNOWN
        self._const_active.add(key)
        try:
            frame = Frame(Def(module, "<module>", ast.FunctionDef()), module, None, {}, {}, False)
            value = self.expr(e, frame)
        finally:
            self._const_active.discard(key)
        if value:
            return value
        return frozenset({Sym(f"{module.rsplit('.', 1)[-1]}.{name}")}) if name else UNKNOWN

    def attribute(self, base: Values, attr: str, frame: Frame) -> Values:  # noqa: C901
        out: set = set()
        for b in base:
            if isinstance(b, Mod):
                env = self.env(b.name, attr)
                if env is not None:
                    out |= env
                    continue
                found = self.src.lookup(b.name, attr)
                sub = f"{b.name}.{attr}"
                if self.src.module(sub) is not None:
                    out.add(Mod(sub))
                elif found is not None:
                    value = self.convert(b.name, attr, found)
                    out |= value if value else {Sym(f"{b.name.rsplit('.', 1)[-1]}.{attr}")}
            elif isinstance(b, Fn) and isinstance(b.d.node, ast.ClassDef):
                out |= self._class_attr(b.d, attr, None)
            elif isinstance(b, Inst):
                if attr in self.facts:
                    out |= self.facts[attr]
                else:
                    out |= self._class_attr(b.cls, attr, b) or self.instance_attr(b, attr)
            elif isinstance(b, Super):
                for base_cls in self.src.bases(b.cls):
                    m = self.src.method(base_cls, attr)
                    if m:
                        out.add(Bound(m, b.inst))
                        break
            elif isinstance(b, Sym):  # QuantType.No.value is QuantType.No; aiter.QuantType.No is QuantType.No
                out.add(b if attr == "value" else Sym(f"{b.name.rsplit('.', 1)[-1]}.{attr}"))
            elif isinstance(b, External):
                out.add(External(f"{b.path}.{attr}"))
            elif isinstance(b, Const) and isinstance(b.value, str) and attr in STR_METHODS:
                out.add(StrMethod(b.value, attr))
        if not out and attr in self.facts and not any(isinstance(b, Mod | Fn) for b in base):
            return self.facts[attr]
        return frozenset(out)

    def _class_attr(self, cls: Def, attr: str, inst: Inst | None) -> set:
        m = self.src.method(cls, attr)
        if m is None and attr == "apply" and _autograd_function(cls):  # Cls.apply(...) runs Cls.forward(ctx, ...)
            forward = self.src.method(cls, "forward")
            return {Partial(frozenset({Fn(forward)}), lead=1)} if forward else set()
        if m is not None:
            if any(isinstance(x, ast.Name) and x.id == "property" for x in m.node.decorator_list):
                return set(self.call_def(m, [], {}, inst, record=False)[0])
            return {Bound(m, inst)}
        for klass in [cls, *self.src.bases(cls)]:
            for item in klass.node.body:
                targets = item.targets if isinstance(item, ast.Assign) else [item.target] if isinstance(
                    item, ast.AnnAssign) and item.value is not None else []
                if any(isinstance(t, ast.Name) and t.id == attr for t in targets):
                    if isinstance(item.value, ast.Constant):
                        return {Const(item.value.value)}
                    return {Sym(f"{klass.qual}.{attr}")}
                if isinstance(item, ast.ClassDef) and item.name == attr:
                    return {Fn(Def(klass.module, f"{klass.qual}.{attr}", item))}
        return set()

    def instance_attr(self, inst: Inst, attr: str) -> Values:
        """What self.attr holds: whatever __init__ (walked, kernels not recorded) assigns to it, plus any walked class
        constructed in an assignment to it anywhere in the class (a ModuleList of layers)."""
        key = (inst, id(self.facts))
        if key not in self._attrs:
            self._attrs[key] = {}
            init = self.src.method(inst.cls, "__init__")
            if init is not None:
                self.call_def(init, [], {}, inst, record=False)
        out: set = set(self._attrs[key].get(attr, UNKNOWN))
        for klass in [inst.cls, *self.src.bases(inst.cls)]:
            for value in self._assignments(klass).get(attr, ()):
                out |= self._constructed(klass.module, value)
        return frozenset(out)

    def _assignments(self, cls: Def) -> dict[str, list[ast.expr]]:
        """self.X = value anywhere in the class: X -> the values (read once per class)."""
        if cls.name not in self._assigned:
            table: dict[str, list[ast.expr]] = {}
            for node in ast.walk(cls.node):
                if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                    for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                        for attr in _self_targets(target):
                            table.setdefault(attr, []).append(node.value)
            self._assigned[cls.name] = table
        return self._assigned[cls.name]

    def _constructed_here(self, frame: Frame, e: ast.expr | None) -> set:
        """Walked classes constructed inside e, their names read in the running frame (a class a parameter names,
        `layer_type(...)` with layer_type=LlamaDecoderLayer by default, handed to make_layers in a lambda)."""
        out = set(self._constructed(frame.module, e))
        for node in ast.walk(e) if e is not None else ():
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in frame.names:
                out |= {Inst(v.d) for v in frame.names[node.func.id]
                        if isinstance(v, Fn) and isinstance(v.d.node, ast.ClassDef)}
        return out

    def _constructed(self, module: str, e: ast.expr | None) -> set:
        """Walked classes constructed anywhere inside e (a lambda handed to make_layers, a list comprehension)."""
        key = (module, id(e))
        if key in self._made:
            return self._made[key]
        out: set = set()
        for node in ast.walk(e) if e is not None else ():
            if isinstance(node, ast.Call):
                found = self.src.resolve_expr(module, node.func)
                if isinstance(found, Def) and isinstance(found.node, ast.ClassDef):
                    out.add(Inst(found))
        self._made[key] = out
        return out

    def call(self, e: ast.Call, frame: Frame) -> Values:
        func = e.func
        if isinstance(func, ast.Subscript):  # kernel[grid](...)
            kernel = self.expr(func.value, frame)
            self.expr(func.slice, frame)
            self._args(e, frame)
            for k in kernel:
                if isinstance(k, Fn) and leafkinds.is_triton(k.d) and frame.record:
                    frame.leaves.add(self._cross(Leaf(leafkinds.TRITON, k.d.name), frame, k, None))
            return UNKNOWN
        fvals = self.expr(func, frame)
        args, kwargs = self._args(e, frame)
        if isinstance(func, ast.Name) and func.id == "super":
            cls = _enclosing_class(self.src, frame.func)
            return frozenset({Super(cls, frame.inst)}) if cls else UNKNOWN
        if isinstance(func, ast.Name) and func.id == "getattr" and len(e.args) >= 2:
            names = consts(args[1])
            if names and len(names) == 1:
                return self.attribute(args[0], str(next(iter(names))[1]), frame)
        if not fvals:
            self.unresolved.add(f"{frame.func.name}:{e.lineno}")
        module_call = any(isinstance(f, Inst) for f in fvals)  # a layer called as a function: one step down the tree
        return self.invoke(fvals, args, kwargs, frame, _via(func, frame) if module_call else None)

    def _args(self, e: ast.Call, frame: Frame) -> tuple[list[Values], dict[str, Values]]:
        args = [self.expr(a.value if isinstance(a, ast.Starred) else a, frame) for a in e.args]
        kwargs = {}
        for kw in e.keywords:
            value = self.expr(kw.value, frame)
            if kw.arg:
                kwargs[kw.arg] = value
        return args, kwargs

    def boolop(self, e: ast.BoolOp, frame: Frame) -> Values:
        """`a and b`, `a or b`: an operand that stops the chain decides its truth even after unknown ones (an
        unknown value is an empty set, so whether one was met is kept apart from the values)."""
        out: set = set()
        unsure = False
        is_or = isinstance(e.op, ast.Or)
        for i, operand in enumerate(e.values):
            value = self.expr(operand, frame)
            t = truth(value)
            last = i == len(e.values) - 1
            if t is None:
                out |= value
                unsure = True
                if last:
                    return frozenset(out)
                continue
            if t is is_or:  # `or` stops at a true value, `and` at a false one: that truth, whatever came before
                return frozenset(value) if not unsure else frozenset({Const(t)})
            if last:
                return UNKNOWN if unsure else frozenset(value)
        return frozenset(out)

    def compare(self, e: ast.Compare, frame: Frame) -> Values:
        left = self.expr(e.left, frame)
        rights = [self.expr(c, frame) for c in e.comparators]
        if len(e.ops) != 1:
            return UNKNOWN
        op, right = e.ops[0], rights[0]
        if isinstance(op, ast.Is | ast.IsNot) and isinstance(e.comparators[0], ast.Constant):
            t = truth(left) if e.comparators[0].value is None else None
            if t is None and left and all(isinstance(v, Const) for v in left):
                t = any(v.value is not None for v in left) if len(left) == 1 else None
            if t is None:
                return UNKNOWN
            return frozenset({Const(t if isinstance(op, ast.IsNot) else not t)})
        a, b = consts(left), consts(right)
        if a is None or b is None:
            return UNKNOWN
        if isinstance(op, ast.Eq | ast.NotEq):
            results = {(x == y) for x in a for y in b}
            if len(results) != 1:
                return UNKNOWN
            same = results.pop()
            return frozenset({Const(same if isinstance(op, ast.Eq) else not same)})
        if isinstance(op, ast.In | ast.NotIn) and isinstance(e.comparators[0], ast.Tuple | ast.List | ast.Set):
            if len(a) != 1:
                return UNKNOWN
            inside = next(iter(a)) in b
            return frozenset({Const(inside if isinstance(op, ast.In) else not inside)})
        return UNKNOWN


def _self_name(frame: Frame) -> str:
    args = getattr(frame.func.node, "args", None)  # a lambda's or a module's frame has none
    params = [*args.posonlyargs, *args.args] if args else []
    return params[0].arg if params else "self"


def _self_attr(e: ast.expr | None) -> str | None:
    """`self.X...` -> X (the first attribute under self), else None."""
    while isinstance(e, ast.Attribute | ast.Subscript | ast.Call):
        inner = e.value if isinstance(e, ast.Attribute | ast.Subscript) else e.func
        if isinstance(e, ast.Attribute) and isinstance(inner, ast.Name) and inner.id == "self":
            return e.attr
        e = inner
    return None


def _via(func: ast.expr, frame: Frame) -> str | None:
    """The layer a call runs under: self.X(...), self.X.method(...), or a local read from self.X."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return func.attr
    root = _self_attr(func)
    if root:
        return root
    base = func
    while isinstance(base, ast.Attribute):
        base = base.value
    if isinstance(base, ast.Name) and base.id in frame.origin:
        return frame.origin[base.id]
    return None


def _self_targets(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Tuple | ast.List):
        return [attr for t in target.elts for attr in _self_targets(t)]
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return [target.attr]
    return []


def _enclosing_class(src: Sources, func: Def) -> Def | None:
    if "." not in func.qual:
        return None
    cls = src.lookup(func.module, func.qual.split(".")[0])
    return cls if isinstance(cls, Def) else None


def _autograd_function(cls: Def) -> bool:
    """A class derived from torch.autograd.Function (written `torch.autograd.Function` or an imported `Function`)."""
    return isinstance(cls.node, ast.ClassDef) and any(ast.unparse(b).split(".")[-1] == "Function"
                                                      for b in cls.node.bases)
