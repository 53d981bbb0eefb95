"""The tier's own garbage collector settings, in each process that runs tests (every xdist worker).

Once collection has imported torch (the validation tests need it in-process) a worker holds every object of that
import for the rest of the run, and the tests then allocate many more that die young: the import check parses whole
ATOM and aiter trees (ast.parse), the plans and reports build trees of dataclasses. With CPython's defaults (700,
10, 10) the two workers of one run collected over eleven thousand times and spent about 8 s in it (the tier_gc row
of benchmarks/README.md). After collection the survivors move to the permanent generation (gc.freeze) and young
objects are collected every 50,000 allocations instead of 700. Nothing a test asserts depends on when garbage is
collected; a reference cycle lives a little longer.

`python benchmarks/tier_gc.py` measures the collections and the seconds spent in them with and without this plugin
(it blocks it with `-p no:tests.support.gc_tuning`); the row is `tier_gc` in benchmarks/README.md.
"""

from __future__ import annotations

import gc

YOUNG = 50_000  # allocations between collections of the youngest generation (CPython's default: 700)
MIDDLE, OLD = 20, 100  # collections of the generation below before one of this generation (defaults: 10, 10)


def pytest_collection_finish(session) -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, MIDDLE, OLD)
