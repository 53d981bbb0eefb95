"""Arch names and profiles made into typed values: the one place an arch name becomes an Arch and a profile name
or file a checked Profile. The request's resolution (cleanbuild.cli.settings.resolve) and the commands that read an
image's labels (verify, bisect --image, validate, promote) both come here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from packaging.version import InvalidVersion, Version

from cleanbuild.core.errors import UsageError
from cleanbuild.core.refs import git_ref, git_remote, image_ref
from cleanbuild.gpuhost.arch import Arch
from cleanbuild.upstream import mirror as mirrors
from cleanbuild.upstream import wheelindex
from cleanbuild.upstream.profiles import Profile, load
from validation.core.models import PRESETS


def parse_arch(text: str | None, *, matrix: bool = False) -> tuple[Arch, ...]:
    """The one place an arch name (--arch, an image's arch label) becomes an Arch. matrix: a list such as
    gfx942,gfx950 (build-clean, plan, wheels, clean); else exactly one name. Empty: ()."""
    if not text:
        return ()
    return Arch.parse_list(text) if matrix else (Arch.parse(text),)


def load_profile(name: str, overrides: Mapping[str, object], mirror: Path | None = None,
                 mirror_from: str = mirrors.ENV, torch_index: str | None = None) -> Profile:
    """A profile by name or .toml path, with the overrides in force, checked (the request's, or an image's label),
    its git components read from the mirror when one is set (mirror_from: where it was set, for the message) and
    its `local` wheels from torch_index when one is set (cleanbuild.upstream.wheelindex)."""
    path = Path(name) if name.endswith(".toml") else None
    profile = checked_profile(load(Path(name).stem if path else name, overrides, path))
    return wheelindex.attach(mirrors.attach(profile, mirror, mirror_from), torch_index)


DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def checked_profile(profile: Profile) -> Profile:
    """The values that reach git, the engine and packaging, checked once at the edge (exit 2 naming the key):
    git repos and refs (cleanbuild.core.refs), versions (PEP 440), the base image reference and digest."""
    where = f"(profile {profile.file} or --set)"
    if not re.match(r"^3\.[0-9]+$", profile.python):
        raise UsageError(f"python {where} {profile.python!r} is not a Python version like 3.12. To fix, write the "
                         "base image's Python as MAJOR.MINOR.")
    image_ref(profile.base.image, f"base.image {where}")
    digest = profile.base.digest
    if digest and not DIGEST.match(digest):
        raise UsageError(f"base.digest {where} {digest!r} is not sha256:<64 hex>. To fix, pin the digest "
                         "`docker buildx imagetools inspect IMAGE` prints.")
    for comp in profile.components:
        if comp.source == "git":
            git_remote(comp.repo, f"components.{comp.name}.repo {where}")
            git_ref(comp.ref, f"components.{comp.name}.ref {where}")
        version = comp.version
        if version:
            try:
                Version(version)
            except InvalidVersion:
                raise UsageError(f"components.{comp.name}.version {where} {version!r} is not a version (PEP 440). "
                                 "To fix, write it as the index lists it, e.g. 2.11.0+rocm7.2.") from None
    for name in profile.warm.models:
        if name not in PRESETS:
            raise UsageError(f"warm.models {where} {name!r} is not a preset ({', '.join(PRESETS)}). To fix, name one "
                             "of those; a model folder goes to --model.")
    return profile
