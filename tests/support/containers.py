"""The containers a test's own runs made, found by the run label every atom-build container carries
(io.atom-build.run=<run id>, cleanbuild.core.engine).

A test that asks "was anything left behind?" asks it of its own runs only: another build or test run on the same
engine (a developer's build beside the tier, a second checkout's CI) has containers of its own meanwhile, and those
failed this tier's checks once (2026-12-06: an audit probe of another run, still running, named in four failures).
For runs in this process only: a subprocess's run ids are its own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

import pytest

from cleanbuild.core import metadata, spec


def record_run_ids(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every run id this process makes from now on, appended as it is made: each module that imported new_run_id
    gets a recording one, so the list is complete however the run reached it."""
    made: list[str] = []
    original = spec.new_run_id

    def recording(now=None) -> str:
        run_id = original(now)
        made.append(run_id)
        return run_id

    for module in list(sys.modules.values()):
        if getattr(module, "new_run_id", None) is original:
            monkeypatch.setattr(module, "new_run_id", recording)
    return made


def left_by(client, run_ids: Iterable[str]) -> list[str]:
    """The names of the containers, running or not, that carry one of these run ids."""
    wanted = set(run_ids)
    return [c.name for c in client.containers.list(all=True, ignore_removed=True, filters={"label": metadata.RUN_LABEL})
            if c.labels.get(metadata.RUN_LABEL) in wanted]
