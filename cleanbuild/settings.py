"""Task flags + invoke.yaml (`cleanbuild:` section) -> Options. A flag beats config, config beats the default.

The site config is checked like a profile: a wrong type or an unknown key is a one-line error (exit 2) naming
the key. tasks.py also checks that invoke.yaml parses at all before invoke reads it (see check_site_file).
"""

from __future__ import annotations

import datetime as dt
import getpass
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .arch import Arch, host_runner, resolve
from .errors import UsageError
from .gpu import parse_gpus
from .plan import REPO_ROOT, Options
from .profiles import Profile, load, parse_sets
from .tag import today

DEFAULTS: dict[str, object] = {
    "profile": "default", "registry": "atom-build", "builder": None, "ca_bundle": "auto", "progress": "auto",
    "user": None, "overrides": {}, "cache_dir": None, "gpus": None, "container_user": None,
    "cache": "auto",
}
TYPES: dict[str, tuple[type, ...]] = {
    "profile": (str,), "registry": (str,), "builder": (str,), "ca_bundle": (str,), "progress": (str,),
    "user": (str,), "overrides": (dict,), "cache_dir": (str,), "gpus": (str, int), "container_user": (str, int),
    "cache": (str,),
}
# host[:port]/path, lower case (Docker's reference grammar, without the tag).
REGISTRY = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")


def site_config(raw: object) -> dict[str, object]:
    """The `cleanbuild:` section of invoke.yaml, checked: a mapping of known keys with values of the right type."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise UsageError(f"invoke.yaml: `cleanbuild:` must be a mapping, not {type(raw).__name__}. To fix, see the README's invoke.yaml example.")
    out = {}
    for key, value in raw.items():
        if key not in TYPES:
            raise UsageError(f"invoke.yaml: unknown key cleanbuild.{key}. To fix, use one of: {', '.join(sorted(TYPES))}.")
        if value is not None and not isinstance(value, TYPES[key]):
            raise UsageError(f"invoke.yaml: cleanbuild.{key} is {value!r}, not {' or '.join(t.__name__ for t in TYPES[key])}. To fix, correct it.")
        out[key] = value
    return out


def site_file(path: Path) -> dict[str, object]:
    """The checked `cleanbuild:` section of an invoke.yaml (what tasks.py and `nox -s validate` read)."""
    from invoke.vendor import yaml

    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not a valid site config ({str(exc).replace(chr(10), ' ')[:300]}). To fix, correct it or remove it.") from None
    try:
        if data is not None and not isinstance(data, dict):
            raise UsageError(f"the file must hold a mapping (cleanbuild: ...), not {type(data).__name__}")
        return site_config((data or {}).get("cleanbuild"))
    except UsageError as exc:
        detail = str(exc).split(". To fix", 1)[0].removeprefix("invoke.yaml: ")
        raise UsageError(f"{path} is not a valid site config ({detail}). To fix, correct it or remove it.") from None


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
    gpus: str | None = None
    container_user: str | None = None
    device: str | None = None
    registry: str | None = None
    src: tuple[str, ...] = ()  # --src COMPONENT=PATH, resolved by cleanbuild.checkout into Options.src


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
    return Path(str(value)).resolve() if value else REPO_ROOT / ".cache"


def registry(config: Mapping[str, object], flag: str | None = None) -> str:
    value = str(pick(flag, config, "registry"))
    if not REGISTRY.match(value):
        raise UsageError(f"registry {value!r} is not a valid image repository prefix (host[:port]/path, lower case). To fix, correct cleanbuild.registry in invoke.yaml.")
    return value


HOST_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


def ca_bundle(value: object) -> Path | None:
    """auto (the default): what this host trusts (SSL_CERT_FILE, else the system bundle), so builds behind a
    TLS-intercepting proxy work where the host does; none: no bundle; else a PEM file."""
    text = str(value or "auto")
    if text == "none":
        return None
    if text == "auto":
        found = [p for p in (os.environ.get("SSL_CERT_FILE"), *HOST_BUNDLES) if p and Path(p).is_file()]
        return Path(found[0]).resolve() if found else None
    if not Path(text).is_file():
        raise UsageError(f"--ca-bundle {text} is not a file. To fix, pass the PEM bundle your proxy's CA is in (or none).")
    return Path(text).resolve()


def options(inputs: Inputs, config: Mapping[str, object], *, arch: Arch | None = None) -> Options:
    chosen = arch or resolve(inputs.arch, host_runner).arch
    ca = ca_bundle(pick(inputs.ca_bundle, config, "ca_bundle"))
    model = Path(inputs.model).resolve() if inputs.model else None
    if model and not model.is_dir():
        raise UsageError(f"--model {inputs.model} is not a folder. To fix, pass a model folder (config.json and weights).")
    progress = str(pick(inputs.progress, config, "progress"))
    if progress not in ("auto", "plain", "tty", "quiet"):
        raise UsageError(f"--progress {progress!r} is not one of auto, plain, tty, quiet.")
    if inputs.device not in (None, "cpu", "cuda"):
        raise UsageError(f"--device {inputs.device!r} is not cpu or cuda.")
    gpus = pick(inputs.gpus, config, "gpus")
    user = pick(inputs.container_user, config, "container_user")
    cache = str(pick(None, config, "cache"))
    if cache not in ("auto", "inline", "registry", "none"):
        raise UsageError(f"cleanbuild.cache {cache!r} is not one of auto, inline, registry, none.")
    return Options(
        arch=chosen, ck_free=inputs.ck_free, builder=pick(inputs.builder, config, "builder"),  # type: ignore[arg-type]
        progress=progress, ca_bundle=ca, model=model,
        allow_no_smoke=inputs.allow_no_smoke, user=user_name(inputs.user, config), date=today(),
        registry=registry(config, inputs.registry), run_id=new_run_id(), cache_dir=cache_dir(config), cache=cache,
        validation_device=inputs.device, gpus=parse_gpus(str(gpus)) if gpus is not None else None,
        container_user=str(user) if user is not None else None,
    )


def new_run_id(now: dt.datetime | None = None) -> str:
    """Unique per build, so two builds at once never share a container or a temporary name."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%d%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"
