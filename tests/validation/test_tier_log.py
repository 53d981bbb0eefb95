"""The tier's log ends with pytest's summary: no process of the tier ends holding a torch op that torch's exit hook
fails on (tests/conftest.py asks each at its end). aiterpkg/test_adapter.py loads aiter's source, whose ops are such,
in a process of its own; this file checks the question the tier asks."""

from tests.support import exit_hooks

AITERS_OP = "aiter::aiter::gemm_a16w16_"  # what importing aiter's kernel modules at the pin defines (aiter_loaded.py)


def test_the_op_aiter_defines_is_one_torch_cannot_take_down():
    assert exit_hooks.unremovable(["aten::add.Tensor", AITERS_OP, "prims::abs", "x::y.a.b"]) == [AITERS_OP, "x::y.a.b"]

