"""Ops torch cannot take down at exit. torch's exit hook (torch/library.py: `_del_library`, then
`_clear_torch_ops_cache`) splits every op a Library defined, `NS::NAME[.OVERLOAD]`; a name with its namespace
doubled raises there ("too many values to unpack"). aiter's source defines `aiter::aiter::gemm_a16w16_`: a process
that imports its kernel modules ends with that traceback, which in the tier's log comes after pytest's summary and
reads as a failure. tests/conftest.py asks every process of the tier, at its end, whether it holds one."""

from __future__ import annotations

import sys
from collections.abc import Iterable


def unremovable(defs: Iterable[str]) -> list[str]:
    """The op names of defs that torch's exit hook fails to split, sorted."""
    return sorted(name for name in defs if name.count("::") != 1 or name.count(".") > 1)


def held_here() -> list[str]:
    """Those this process holds; none where torch was never imported."""
    library = sys.modules.get("torch.library")
    return unremovable(getattr(library, "_defs", ())) if library else []
