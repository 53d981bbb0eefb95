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

from packaging.version import InvalidVersion, Version

from .arch import Arch, host_runner, resolve
from .errors import UsageError
from .gpu import parse_gpus
from .profiles import Profile, load, parse_sets, table
from .refs import git_ref, git_remote, image_ref
from .spec import REPO_ROOT, Options
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


def site_file(path: Path, *, given: bool = False) -> dict[str, object]:
    """The checked `cleanbuild:` section of an invoke.yaml (what tasks.py and `nox -s validate` read). given: the
    user named this file (-f, INVOKE_RUNTIME_CONFIG), so a missing file or a folder is bad input, not "no config"."""
    from invoke.vendor import yaml

    if path.is_dir() or (given and not path.exists()):
        what = "a folder" if path.is_dir() else "missing"
        raise UsageError(f"the site config {path} is {what}, not a YAML file. To fix, name an invoke.yaml file "
                         "(-f FILE or INVOKE_RUNTIME_CONFIG=FILE) or unset it.")
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"the site config {path} cannot be read ({exc.strerror}). To fix, make it readable or "
                         "remove it.") from None
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

    archs: tuple[Arch, ...] = ()  # --arch, parsed by parse_arch (empty: detect on the host, or the image's label)
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

    @property
    def arch(self) -> Arch | None:
        """The one --arch of a task that takes one (None: not given)."""
        return self.archs[0] if self.archs else None


def parse_arch(text: str | None, *, matrix: bool = False) -> tuple[Arch, ...]:
    """The one place an arch name (--arch, an image's arch label) becomes an Arch. matrix: a list such as
    gfx942,gfx950 (build-clean, plan, wheels, clean); else exactly one name. Empty: ()."""
    if not text:
        return ()
    return Arch.parse_list(text) if matrix else (Arch.parse(text),)


def load_profile(inputs: Inputs, config: Mapping[str, object]) -> Profile:
    name = str(pick(inputs.profile, config, "profile"))
    path = Path(name) if name.endswith(".toml") else None
    return checked_profile(load(Path(name).stem if path else name, overrides(inputs, config), path))


DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def checked_profile(profile: Profile) -> Profile:
    """The values that reach git, the engine and packaging, checked once at the edge (exit 2 naming the key):
    git repos and refs (cleanbuild.refs), versions (PEP 440), the base image reference and digest."""
    where = f"(profile {profile.file} or --set)"
    if not re.match(r"^3\.[0-9]+$", profile.python):
        raise UsageError(f"python {where} {profile.python!r} is not a Python version like 3.12. To fix, write the "
                         "base image's Python as MAJOR.MINOR.")
    image_ref(str(profile.base["image"]), f"base.image {where}")
    digest = profile.base.get("digest")
    if digest and not DIGEST.match(str(digest)):
        raise UsageError(f"base.digest {where} {digest!r} is not sha256:<64 hex>. To fix, pin the digest "
                         "`docker buildx imagetools inspect IMAGE` prints.")
    for comp in profile.components:
        if comp.source == "git":
            git_remote(str(comp.get("repo")), f"components.{comp.name}.repo {where}")
            git_ref(str(comp.get("ref")), f"components.{comp.name}.ref {where}")
        version = comp.get("version")
        if version:
            try:
                Version(str(version))
            except InvalidVersion:
                raise UsageError(f"components.{comp.name}.version {where} {version!r} is not a version (PEP 440). "
                                 "To fix, write it as the index lists it, e.g. 2.11.0+rocm7.2.") from None
    return profile


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


def source(flag: object, config: Mapping[str, object], key: str, flag_name: str) -> str:
    """Where a value came from, for messages: the flag, the invoke.yaml key, or the built-in default."""
    if flag not in (None, ""):
        return flag_name
    if config.get(key) not in (None, ""):
        return f"invoke.yaml cleanbuild.{key}"
    return f"the default {key}"


def registry(config: Mapping[str, object], flag: str | None = None) -> str:
    value = str(pick(flag, config, "registry"))
    if not REGISTRY.match(value):
        where = source(flag, config, "registry", "--registry")
        raise UsageError(f"{where} {value!r} is not a valid image repository prefix (host[:port]/path, lower case). "
                         f"To fix, correct {where}.")
    return value


def gpu_list(flag: object, config: Mapping[str, object]) -> tuple[int, ...] | None:
    """--gpu (or invoke.yaml gpus): indices, or None for every GPU ("all" or not given). An empty list is refused:
    `--gpu ''` or `--gpu ,` must not silently mean every GPU."""
    given = flag is not None
    value = flag if given else config.get("gpus")
    if value is None:
        return None
    text = str(value).strip()
    if text.lower() == "all":
        return None
    where = "--gpu" if given else "invoke.yaml cleanbuild.gpus"
    if not [p for p in re.split(r"[,\s]+", text) if p]:
        raise UsageError(f"{where} {value!r} names no GPU. To fix, pass indices (--gpu 0 or --gpu 0,1), --gpu all, "
                         "or leave it out to use every GPU.")
    gpus = parse_gpus(text)
    return gpus


BUILDER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
USER_ID = re.compile(r"^[0-9]+(:[0-9]+)?$")


def container_user(flag: object, config: Mapping[str, object]) -> str | None:
    """--user-id UID[:GID] (or invoke.yaml container_user), numeric: a name may not exist in the image."""
    given = flag is not None
    value = flag if given else config.get("container_user")
    if value is None:
        return None
    if not USER_ID.match(str(value)):
        where = "--user-id" if given else "invoke.yaml cleanbuild.container_user"
        raise UsageError(f"{where} {value!r} is not UID or UID:GID. To fix, pass numbers, e.g. --user-id 1000 or "
                         "--user-id 1000:1000.")
    return str(value)


HOST_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


def ca_bundle(value: object, where: str = "--ca-bundle") -> Path | None:
    """auto (the default): what this host trusts (SSL_CERT_FILE, else the system bundle), so builds behind a
    TLS-intercepting proxy work where the host does; none: no bundle; else a PEM file. where: the flag or the
    invoke.yaml key it came from, for the message."""
    text = str(value or "auto")
    if text == "none":
        return None
    if text == "auto":
        found = [p for p in (os.environ.get("SSL_CERT_FILE"), *HOST_BUNDLES) if p and Path(p).is_file()]
        return Path(found[0]).resolve() if found else None
    if not Path(text).is_file():
        raise UsageError(f"{where} {text} is not a file. To fix, pass the PEM bundle your proxy's CA is in (or none).")
    if b"-----BEGIN CERTIFICATE-----" not in Path(text).read_bytes()[:4 << 20]:
        raise UsageError(f"{where} {text} holds no PEM certificate. To fix, pass the PEM bundle your proxy's CA "
                         "is in (-----BEGIN CERTIFICATE----- blocks), or none.")
    return Path(text).resolve()


def check(inputs: Inputs, config: Mapping[str, object]) -> None:
    """Every flag-level input checked, without probing the host: what promote and the image tasks run before any
    engine call (options() checks the same, and resolves the arch)."""
    load_profile(inputs, config)
    options(inputs, config, arch=inputs.archs[0] if inputs.archs else Arch.GFX942)


def overrides(inputs: Inputs, config: Mapping[str, object]) -> dict[str, object]:
    """The profile overrides in force: invoke.yaml's, then --set (which wins)."""
    return {**table(config.get("overrides") or {}), **parse_sets(list(inputs.sets))}


def options(inputs: Inputs, config: Mapping[str, object], *, arch: Arch | None = None) -> Options:
    chosen = arch or (inputs.archs[0] if inputs.archs else resolve(None, host_runner).arch)
    ca = ca_bundle(pick(inputs.ca_bundle, config, "ca_bundle"),
                   source(inputs.ca_bundle, config, "ca_bundle", "--ca-bundle"))
    model = Path(inputs.model).resolve() if inputs.model else None
    if model and not model.is_dir():
        raise UsageError(f"--model {inputs.model} is not a folder. To fix, pass a model folder (config.json and weights).")
    picked = pick(inputs.builder, config, "builder")
    builder = None if picked is None else str(picked)
    if builder is not None and not BUILDER.match(builder):
        where = source(inputs.builder, config, "builder", "--builder")
        raise UsageError(f"{where} {builder!r} is not a buildx builder name. To fix, pass a name `docker buildx ls` "
                         "lists (letters, digits, '_', '.', '-'; not starting with '-').")
    progress = str(pick(inputs.progress, config, "progress"))
    if progress not in ("auto", "plain", "tty", "quiet"):
        where = source(inputs.progress, config, "progress", "--progress")
        raise UsageError(f"{where} {progress!r} is not one of auto, plain, tty, quiet.")
    if inputs.device not in (None, "cpu", "cuda"):
        raise UsageError(f"--device {inputs.device!r} is not cpu or cuda.")
    gpus = gpu_list(inputs.gpus, config)
    user = container_user(inputs.container_user, config)
    cache = str(pick(None, config, "cache"))
    if cache not in ("auto", "inline", "registry", "none"):
        raise UsageError(f"cleanbuild.cache {cache!r} is not one of auto, inline, registry, none.")
    return Options(
        arch=chosen, ck_free=inputs.ck_free, builder=builder,
        progress=progress, ca_bundle=ca, model=model,
        allow_no_smoke=inputs.allow_no_smoke, user=user_name(inputs.user, config), date=today(),
        registry=registry(config, inputs.registry), run_id=new_run_id(), cache_dir=cache_dir(config), cache=cache,
        validation_device=inputs.device, gpus=gpus, container_user=user,
    )


def new_run_id(now: dt.datetime | None = None) -> str:
    """Unique per build, so two builds at once never share a container or a temporary name."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%d%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"
