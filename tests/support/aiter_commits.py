"""The mirror folder for `bisect aiter --image`'s test: devsupport.aiter_commits, which bench_bisect.py shares."""

from __future__ import annotations

from devsupport.aiter_commits import HIPBLASLT_ENTRY, REROUTED, mirror_with_commits

__all__ = ["HIPBLASLT_ENTRY", "REROUTED", "mirror_with_commits"]
