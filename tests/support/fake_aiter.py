"""The hand-made aiter-like history for bisect's tests: devsupport.fake_aiter, which bench_bisect.py shares."""

from __future__ import annotations

from devsupport.fake_aiter import FIXTURES, JIT_EXITS, JIT_FIXED, history, tuned_gemm

__all__ = ["FIXTURES", "JIT_EXITS", "JIT_FIXED", "history", "tuned_gemm"]
