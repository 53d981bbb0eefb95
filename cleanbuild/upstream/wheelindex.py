"""Where a wheel the profile takes whole (`source = "local"`: the offline profile's CPU torch) is fetched from.

The profile names the public index the wheel lives on (`components.torch.index_url`, PyTorch's CPU index for
`2.13.0+cpu`); ATOM_BUILD_TORCH_INDEX or invoke.yaml `cleanbuild.torch_index` (in that order) points at a copy
instead: another index (a mirror, an internal proxy) or a folder that holds the wheel file. Like a git mirror
(cleanbuild.upstream.mirror) it says where the bytes come from, never what they are: the version keeps its local
label (`+cpu`), so PyPI's CUDA build of the same number can never stand in, and the keys, labels and reports keep
the profile's index. The same variable tells `nox -s tests` where the test tier's CPU torch comes from (noxfile.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType

from cleanbuild.core.errors import UsageError
from cleanbuild.upstream.profiles import Profile

ENV = "ATOM_BUILD_TORCH_INDEX"
SCHEMES = ("https://", "http://", "file://")


def location(value: object, where: str = ENV) -> str | None:
    """The copy a setting names, checked (where: the variable or key it came from): an index URL as given, a folder
    as an absolute path; None when unset."""
    if value is None or str(value) == "":
        return None
    text = str(value)
    if text.startswith(SCHEMES):
        return text
    path = Path(text).expanduser()
    if not path.is_dir():
        raise UsageError(f"{where} {text} is neither an index URL (https://...) nor a folder. To fix, point it at a "
                         "mirror of the index or a folder holding the wheel, or unset it.")
    return str(path.resolve())


def attach(profile: Profile, copy: str | None) -> Profile:
    """The profile with its `local` components read from copy (unchanged without one)."""
    if copy is None:
        return profile
    local = {c.name: copy for c in profile.components if c.source == "local"}
    return dataclasses.replace(profile, reads=MappingProxyType({**profile.reads, **local}))


def pip_source(where: str) -> list[str]:
    """pip's arguments for one place: only that index, or only that folder (never PyPI beside it)."""
    if where.startswith(SCHEMES):
        return ["--index-url", where]
    return ["--no-index", "--find-links", where]
