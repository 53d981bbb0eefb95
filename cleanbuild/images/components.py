"""Per-component keys: every image a build makes, keyed by exactly what its bytes depend on. Pure.

A unit is one image: a component's wheels (torch, triton, deps, sdists, atom, aiter, mori, installer), the wheels
assembly, one of the clean image's install layers (venv, atom-layer, clean) or the candidate. Its key is sha256
over its inputs, each named, so a test (and `invoke plan`) can say which input moved:
- the text of the Dockerfile stages its target reaches (cleanbuild.images.dockerfile) and the helper scripts they copy;
- the build arguments those stages read, with every image argument replaced by that image's own key (the key of
  aiter's build environment names torch's key, never the name of the deps image it happened to read);
- for the lock-driven units, the lock's requirement blocks they read (never the header, which names both pins).
Not in any key: MAX_JOBS (how fast, not what), <NAME>_FROM (where a pinned commit is read), the registry prefix and image names (found by key, whatever the
name), the BuildKit cache.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cleanbuild.images.dockerfile import global_args, stage_digest, used_args

# MAX_JOBS: how fast, not what. <NAME>_FROM: where a pinned commit is read (a mirror's copy), not what it is.
NOT_IN_KEY = frozenset({"MAX_JOBS", "AITER_FROM", "ATOM_FROM", "MORI_FROM"})
# The wheels units in build order, and the image argument each one is handed to others as.
WHEEL_UNITS = ("torch", "triton", "deps", "sdists", "atom", "aiter", "mori", "installer")
BUILD_ENVS = {"builder": ("builder-base", "BUILDER"), "builder-git": ("builder-git-base", "BUILDER_GIT")}
IMAGE_ARGS = {**{f"{u.upper()}_WHEELS": u for u in WHEEL_UNITS}, **{arg: u for u, (_, arg) in BUILD_ENVS.items()}}
ARCH_UNITS = frozenset({"aiter", "mori", "wheels", "clean", "dev", "candidate"})  # one per arch and CK mode
LAYER_ARGS = {"VENV_IMAGE": "venv", "ATOM_IMAGE": "atom-layer", "WHEELS_IMAGE": "wheels", "IMAGE": "clean"}


@dataclass(frozen=True)
class Unit:
    name: str
    dockerfile: Path
    target: str | None
    args: tuple[tuple[str, str], ...]  # the build arguments, image arguments by name
    key: str
    inputs: tuple[tuple[str, str], ...]  # input name -> value or digest: what the key is the hash of
    image: str
    context: Path

    @property
    def short(self) -> str:
        return self.key[:16]

    @property
    def variant(self) -> bool:
        """One image per arch and CK mode (aiter, the assembly, clean, candidate), not one for all."""
        return self.name in ARCH_UNITS


def digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def make_unit(name: str, where: tuple[Path, str | None, Path], all_args: Mapping[str, str],
              keys: Mapping[str, str], extra: Mapping[str, str], image_prefix: str,
              not_in_key: frozenset[str] = frozenset()) -> Unit:
    """The unit for a target: the build arguments it reads (of all_args) and its key.
    where: (Dockerfile, target or None for a one-stage file, build context). keys: unit name -> key of every unit
    made before, for the image arguments. The image is image_prefix + the key's first 16 hex digits."""
    dockerfile, target, context = where
    image_args = {**IMAGE_ARGS, **LAYER_ARGS}
    read = used_args(dockerfile, target, all_args) if target else set(all_args)
    # Passed: what the target reads and every global ARG (BuildKit 0.8 parses every FROM). Keyed: what it reads.
    passed = read | global_args(dockerfile)
    args = {k: v for k, v in all_args.items() if k in passed}
    inputs = {"stages": stage_digest(dockerfile, target, args) if target else text_digest(dockerfile.read_text())}
    for k, v in args.items():
        if k not in read or k in NOT_IN_KEY or k in not_in_key:
            continue
        inputs[k] = f"key:{keys[image_args[k]]}" if image_args.get(k) in keys else v
    inputs.update(extra)
    key = digest(inputs)
    return Unit(name, dockerfile, target, tuple(sorted(args.items())), key, tuple(sorted(inputs.items())),
                image_prefix + key[:16], context)


def changed(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """The inputs whose value differs between two builds of a unit (what made this one new)."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
