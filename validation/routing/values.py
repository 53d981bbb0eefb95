"""The abstract values the route walker computes with: sets of these, an empty set meaning "unknown"."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from validation.routing.source import Def


@dataclass(frozen=True)
class Const:
    """A Python literal (bool, int, str, None) known at walk time."""

    value: object


@dataclass(frozen=True)
class Sym:
    """A named constant compared by name: an enum member (`QuantType.No`), a dtype (`dtypes.fp8`)."""

    name: str


@dataclass(frozen=True)
class Fn:
    """A function or class of a walked package."""

    d: Def


@dataclass(frozen=True)
class Inst:
    """An instance of a walked class."""

    cls: Def


@dataclass(frozen=True)
class Bound:
    """A method bound to an instance (or a class, for a classmethod or staticmethod)."""

    d: Def
    inst: Inst | None


@dataclass(frozen=True)
class Super:
    """super() in a method of cls: attributes from cls's bases, bound to the same instance."""

    cls: Def
    inst: Inst | None


@dataclass(frozen=True)
class Lam:
    """A lambda and the module it was written in; key (its node's id) tells two lambdas apart."""

    node: ast.Lambda = field(compare=False, hash=False)
    module: str = ""
    key: int = 0


@dataclass(frozen=True)
class Mod:
    """A module of a walked package."""

    name: str


@dataclass(frozen=True)
class Partial:
    """functools.partial(f, ...): calling it calls f (after `lead` unknown arguments: an autograd Function's
    `apply(...)` calls its `forward(ctx, ...)`)."""

    target: frozenset
    lead: int = 0


@dataclass(frozen=True)
class StrMethod:
    """A pure method of a known string (`_CURRENT_FRAMEWORK.lower`): calling it with known arguments is known."""

    text: str
    name: str


@dataclass(frozen=True)
class External:
    """A name from outside the walked packages, by its dotted path (`torch.ops.aiter`, `triton.jit`)."""

    path: str


Values = frozenset
UNKNOWN: Values = frozenset()


def truth(values: Values) -> bool | None:
    """True/False when every value agrees, None when unknown or mixed. A Sym is unknown: it names an enum member as
    well as an attribute of something the walk did not resolve (`ctx.context.is_dummy_run`), and a branch taken on a
    wrong truth would end a path (a return under it) that the server does take."""
    seen = set()
    for v in values:
        if isinstance(v, Const):
            seen.add(bool(v.value))
        elif isinstance(v, Fn | Inst | Bound | Mod | Partial):
            seen.add(True)
        else:
            return None
    return seen.pop() if len(seen) == 1 else None


def consts(values: Values) -> set | None:
    """The set of comparable constants, or None when any value is not one."""
    out = set()
    for v in values:
        if isinstance(v, Const):
            out.add(("c", v.value))
        elif isinstance(v, Sym):
            out.add(("s", v.name))
        elif isinstance(v, External):
            out.add(("e", v.path))
        else:
            return None
    return out if out else None
