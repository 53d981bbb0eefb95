"""The walk's branch rules on a hand-written package (a stand-in shaped like aiter, not its code): a return under a
condition the walk knows ends the path, one under a condition it does not know ends nothing, an `and` whose operands
it cannot all decide stays undecided, an attribute of something it did not resolve is never taken as true, and an
autograd Function's `apply` runs its `forward` with the arguments after ctx."""

from __future__ import annotations

import textwrap

import pytest

from validation.routing.source import Sources
from validation.routing.values import Const
from validation.routing.walker import Walker

OPS = '''
import torch


def compile_ops(name):
    return lambda f: f


@compile_ops("module_a")
def kern_a(x): ...


@compile_ops("module_b")
def kern_b(x): ...


def known(x):
    if STEP == 1:
        return kern_a(x)
    return kern_b(x)


def unknown(x, flag):
    if flag:
        return kern_a(x)
    return kern_b(x)


def both_sides_return(x, flag):
    if flag:
        return kern_a(x)
    else:
        return kern_b(x)
    kern_c(x)


def undecided_and(x, flag):
    if flag and not None:
        return kern_a(x)
    return kern_b(x)


def unresolved_attribute(x, ctx):
    if ctx.context.is_dummy_run:
        return kern_a(x)
    return kern_b(x)


@compile_ops("module_c")
def kern_c(x): ...


class _Norm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, flag):
        if flag:
            return kern_c(x)
        return kern_a(x)


def autograd(x, flag):
    return _Norm.apply(x, flag)


STEP = 1
'''


@pytest.fixture
def walk(tmp_path):
    (tmp_path / "aiter").mkdir()
    (tmp_path / "aiter" / "__init__.py").write_text("")
    (tmp_path / "aiter" / "ops.py").write_text(textwrap.dedent(OPS))
    src = Sources({"aiter": tmp_path / "aiter"})

    def modules(name: str, *args) -> set[str]:
        walker = Walker(src, {}, lambda module, var: None, {})
        _, leaves = walker.call_def(src.lookup("aiter.ops", name), [frozenset(), *args], {}, None)
        return {leaf.module for leaf in leaves}

    return modules


def test_a_return_under_a_known_condition_ends_the_path(walk):
    assert walk("known") == {"module_a"}


def test_a_return_under_an_unknown_condition_ends_nothing(walk):
    assert walk("unknown", frozenset()) == {"module_a", "module_b"}
    assert walk("unknown", frozenset({Const(False)})) == {"module_b"}


def test_returns_on_both_sides_end_the_path(walk):
    assert walk("both_sides_return", frozenset()) == {"module_a", "module_b"}


def test_an_and_with_an_unknown_operand_is_undecided(walk):
    assert walk("undecided_and", frozenset()) == {"module_a", "module_b"}


def test_an_attribute_of_an_unresolved_object_is_not_taken_as_true(walk):
    assert walk("unresolved_attribute", frozenset()) == {"module_a", "module_b"}


def test_an_autograd_functions_apply_runs_its_forward_after_ctx(walk):
    assert walk("autograd", frozenset({Const(True)})) == {"module_c"}
    assert walk("autograd", frozenset({Const(False)})) == {"module_a"}
