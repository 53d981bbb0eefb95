"""Turn task flags + invoke config into Options: a flag beats config, config beats the built-in default."""

from __future__ import annotations

import datetime as dt
import getpass
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .arch import Arch, host_runner, resolve
from .errors import UsageError
from .plan import REPO_ROOT, Options
from .profiles import Profile, load, parse_sets
from .tag import today

DEFAULTS = {
    "profile": "default",
    "registry": "atom-build",
    "builder": None,
    "ca_bundle": None,
    "progress": "auto",
    "user": None,
    "overrides": {},
    "cache_dir": None,
}


def pick(flag: object, config: Mapping[str, object], key: str) -> object:
    """The precedence rule, in one place."""
    if flag not in (None, ""):
        return flag
    value = config.get(key)
    return DEFAULTS.get(key) if value in (None, "") else value


@dataclass(frozen=True)
class Inputs:
    """What a task was given, before resolution."""

    arch: str | None = None
    ck_free: bool = False
    profile: str | None = None
    builder: str | None = None
    ca_bundle: str | None = None
    progress: str | None = None
    model: str | None = None
    allow_no_smoke: bool = False
    sets: tuple[str, ...] = ()
    user: str | None = None
    context: str | None = None


def load_profile(inputs: Inputs, config: Mapping[str, object]) -> Profile:
    name = str(pick(inputs.profile, config, "profile"))
    overrides = {**dict(config.get("overrides") or {}), **parse_sets(list(inputs.sets))}
    path = Path(name) if name.endswith(".toml") else None
    return load(Path(name).stem if path else name, overrides, path)


def user_name(flag: str | None, config: Mapping[str, object]) -> str:
    value = pick(flag, config, "user")
    if value:
        return str(value)
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "user")


def cache_dir(config: Mapping[str, object]) -> Path:
    value = pick(None, config, "cache_dir")
    return Path(str(value)) if value else REPO_ROOT / ".cache"


def options(inputs: Inputs, config: Mapping[str, object], *, arch: Arch | None = None,
            base_image: str | None = None, context: Path | None = None) -> Options:
    chosen = arch or resolve(inputs.arch, host_runner).arch
    ca = pick(inputs.ca_bundle, config, "ca_bundle")
    if ca and not Path(str(ca)).is_file():
        raise UsageError(f"--ca-bundle {ca} is not a file. To fix, pass the PEM bundle your proxy's CA is in.")
    model = Path(inputs.model).resolve() if inputs.model else None
    if model and not model.is_dir():
        raise UsageError(f"--model {inputs.model} is not a folder. To fix, pass a model folder (config.json and weights).")
    progress = str(pick(inputs.progress, config, "progress"))
    if progress not in ("auto", "plain", "tty", "quiet"):
        raise UsageError(f"--progress {progress!r} is not one of auto, plain, tty, quiet.")
    return Options(
        arch=chosen, ck_free=inputs.ck_free, builder=pick(inputs.builder, config, "builder"),  # type: ignore[arg-type]
        progress=progress, ca_bundle=Path(str(ca)).resolve() if ca else None, model=model,
        allow_no_smoke=inputs.allow_no_smoke, user=user_name(inputs.user, config), date=today(),
        registry=str(pick(None, config, "registry")), run_id=new_run_id(), context=context,
        base_image=base_image,
    )


def new_run_id(now: dt.datetime | None = None) -> str:
    """Unique per build, so two builds at once never share a container or a temporary name."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%d%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"
