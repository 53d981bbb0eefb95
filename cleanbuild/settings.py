"""Task flags + invoke.yaml (`cleanbuild:` section) -> one Request, resolved once at the edge (resolve).

A flag beats config, config beats the default (given). Every allowed value is checked here and nowhere else, and
an error names where the bad value came from: the flag (`--progress`) or the key (`invoke.yaml: cleanbuild.progress`).
The site config is checked like a profile: a wrong type or an unknown key is a one-line error (exit 2) naming
the key. tasks.py also checks that invoke.yaml parses at all before invoke reads it (see site_file).
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

from .errors import UsageError
from .gpuhost.arch import Arch
from .gpuhost.gpu import parse_gpus
from .images.tag import today
from .refs import git_ref, git_remote, image_ref, port_in_range
from .spec import REPO_ROOT, Options
from .upstream.profiles import Profile, load, parse_sets, table

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


# The task parameters that reach the request (the rest are a task's own): the flag is `--` + the name, dashed.
FLAGS = frozenset({"arch", "ck_free", "profile", "set", "builder", "ca_bundle", "progress", "model", "allow_no_smoke",
                   "user", "gpu", "user_id", "registry", "src", "device"})
PROGRESS = ("auto", "plain", "tty", "quiet")
CACHE = ("auto", "inline", "registry", "none")
DEVICES = ("cpu", "cuda")


def flag_name(param: str) -> str:
    """A task parameter as the user types it: ca_bundle -> --ca-bundle."""
    return "--" + param.replace("_", "-")


@dataclass(frozen=True)
class Given:
    """One value before it is checked, and where it came from: the words an error message names it by."""

    value: object
    where: str


def given(flags: Mapping[str, object], config: Mapping[str, object], key: str, flag: str | None = None, *,
          empty_is_given: bool = False) -> Given:
    """The precedence rule, in one place: the flag, else invoke.yaml's key, else the built-in default. An empty
    flag or key falls through, unless empty_is_given (`--gpu ''` must be refused, not mean every GPU)."""
    empty: tuple[object, ...] = (None,) if empty_is_given else (None, "")
    if flag is not None and flags.get(flag) not in empty:
        return Given(flags[flag], flag_name(flag))
    if config.get(key) not in empty:
        return Given(config[key], f"invoke.yaml: cleanbuild.{key}")
    return Given(DEFAULTS.get(key), f"the default {key}")


@dataclass(frozen=True)
class Request:
    """What a task asks for, every value checked and typed: its flags and invoke.yaml, resolved once (resolve).
    Commands take this; nothing deeper reads a flag or the config again."""

    profile: Profile  # loaded with `overrides`, checked (checked_profile)
    profile_from: str  # where its name came from: --profile, the invoke.yaml key, or the default
    overrides: Mapping[str, object]  # invoke.yaml's overrides, then --set (which wins)
    archs: tuple[Arch, ...] = ()  # empty: detect on the host, or the image's label
    ck_free: bool = False
    builder: str | None = None
    ca_bundle: Path | None = None
    progress: str = "auto"
    model: Path | None = None
    allow_no_smoke: bool = False
    user: str = "user"
    gpus: tuple[int, ...] | None = None  # None: every GPU
    container_user: str | None = None  # UID[:GID]; None: the image's user
    device: str | None = None  # `nox -s validate --device`
    registry: str = "atom-build"
    cache: str = "auto"
    cache_dir: Path = REPO_ROOT / ".cache"
    src: tuple[str, ...] = ()  # --src COMPONENT=PATH, resolved against the profile by cleanbuild.checkout

    def options(self, arch: Arch) -> Options:
        """The Options of one build for arch: this request plus today's date and a new run ID."""
        return Options(
            arch=arch, ck_free=self.ck_free, builder=self.builder, progress=self.progress, ca_bundle=self.ca_bundle,
            model=self.model, allow_no_smoke=self.allow_no_smoke, user=self.user, date=today(),
            registry=self.registry, run_id=new_run_id(), cache_dir=self.cache_dir, cache=self.cache,
            validation_device=self.device, gpus=self.gpus, container_user=self.container_user,
        )


def resolve(flags: Mapping[str, object], raw_config: object, *, matrix: bool = False) -> Request:
    """Task flags (by parameter name, FLAGS) and invoke.yaml's `cleanbuild:` section -> a checked Request, without
    probing the host or the engine. matrix: --arch may list several archs (build-clean, plan, wheels, clean)."""
    unknown = sorted(set(flags) - FLAGS)
    if unknown:
        raise TypeError(f"not request flags: {unknown}")
    config = site_config(raw_config)
    name = given(flags, config, "profile", "profile")
    extra = {**table(config.get("overrides") or {}), **parse_sets(list(_strings(flags.get("set"))))}
    return Request(
        profile=profile(str(name.value), extra), profile_from=name.where, overrides=extra,
        archs=parse_arch(_text(flags.get("arch")), matrix=matrix), ck_free=bool(flags.get("ck_free")),
        builder=_builder(given(flags, config, "builder", "builder")),
        ca_bundle=ca_bundle(*_pair(given(flags, config, "ca_bundle", "ca_bundle"))),
        progress=_one_of(given(flags, config, "progress", "progress"), PROGRESS),
        model=_model(flags.get("model")), allow_no_smoke=bool(flags.get("allow_no_smoke")),
        user=_user(given(flags, config, "user", "user")),
        gpus=_gpus(given(flags, config, "gpus", "gpu", empty_is_given=True)),
        container_user=_container_user(given(flags, config, "container_user", "user_id", empty_is_given=True)),
        device=_device(flags.get("device")), registry=_registry(given(flags, config, "registry", "registry")),
        cache=_one_of(given(flags, config, "cache"), CACHE), cache_dir=_cache_dir(given(flags, config, "cache_dir")),
        src=tuple(_strings(flags.get("src"))),
    )


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _strings(value: object) -> tuple[str, ...]:
    """An iterable flag (--set, --src: invoke gives a list, or None when not given)."""
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def _pair(value: Given) -> tuple[object, str]:
    return value.value, value.where


def parse_arch(text: str | None, *, matrix: bool = False) -> tuple[Arch, ...]:
    """The one place an arch name (--arch, an image's arch label) becomes an Arch. matrix: a list such as
    gfx942,gfx950 (build-clean, plan, wheels, clean); else exactly one name. Empty: ()."""
    if not text:
        return ()
    return Arch.parse_list(text) if matrix else (Arch.parse(text),)


def profile(name: str, overrides: Mapping[str, object]) -> Profile:
    """A profile by name or .toml path, with the overrides in force, checked (the request's, or an image's label)."""
    path = Path(name) if name.endswith(".toml") else None
    return checked_profile(load(Path(name).stem if path else name, overrides, path))


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


def _one_of(value: Given, allowed: tuple[str, ...]) -> str:
    """A value from a fixed list (--progress, cleanbuild.cache), refused naming where it came from."""
    text = str(value.value)
    if text not in allowed:
        raise UsageError(f"{value.where} {text!r} is not one of {', '.join(allowed)}. To fix, use one of those.")
    return text


def _model(value: object) -> Path | None:
    """--model: a folder (config.json and weights)."""
    if not value:
        return None
    path = Path(str(value)).resolve()
    if not path.is_dir():
        raise UsageError(f"--model {value} is not a folder. To fix, pass a model folder (config.json and weights).")
    return path


def _device(value: object) -> str | None:
    """--device of `nox -s validate` (its parser also limits it; checked here for every caller)."""
    if value is not None and value not in DEVICES:
        raise UsageError(f"--device {value!r} is not cpu or cuda. To fix, pass --device cpu or --device cuda.")
    return None if value is None else str(value)


def _user(value: Given) -> str:
    """The user part of a release tag: --user, invoke.yaml, else the login name."""
    if value.value:
        return str(value.value)
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "user")


def _cache_dir(value: Given) -> Path:
    return Path(str(value.value)).resolve() if value.value else REPO_ROOT / ".cache"


def _registry(value: Given) -> str:
    text = str(value.value)
    if REGISTRY.match(text) and not port_in_range(text.split("/", 1)[0]):
        raise UsageError(f"{value.where} {text!r} names a port outside 1-65535. To fix, correct {value.where} "
                         "(e.g. localhost:5000/atom-build).")
    if not REGISTRY.match(text):
        raise UsageError(f"{value.where} {text!r} is not a valid image repository prefix (host[:port]/path, lower "
                         f"case). To fix, correct {value.where}.")
    return text


def _gpus(value: Given) -> tuple[int, ...] | None:
    """--gpu (or invoke.yaml gpus): indices, or None for every GPU ("all" or not given). An empty list is refused:
    `--gpu ''` or `--gpu ,` must not silently mean every GPU."""
    if value.value is None:
        return None
    text = str(value.value).strip()
    if text.lower() == "all":
        return None
    if not [p for p in re.split(r"[,\s]+", text) if p]:
        raise UsageError(f"{value.where} {value.value!r} names no GPU. To fix, pass indices (--gpu 0 or --gpu 0,1), "
                         "--gpu all, or leave it out to use every GPU.")
    return parse_gpus(text, value.where)


BUILDER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
USER_ID = re.compile(r"^[0-9]+(:[0-9]+)?$")


def _builder(value: Given) -> str | None:
    if value.value is None:
        return None
    text = str(value.value)
    if not BUILDER.match(text):
        raise UsageError(f"{value.where} {text!r} is not a buildx builder name. To fix, pass a name `docker buildx "
                         "ls` lists (letters, digits, '_', '.', '-'; not starting with '-').")
    return text


def _container_user(value: Given) -> str | None:
    """--user-id UID[:GID] (or invoke.yaml container_user), numeric: a name may not exist in the image."""
    if value.value is None:
        return None
    if not USER_ID.match(str(value.value)):
        raise UsageError(f"{value.where} {value.value!r} is not UID or UID:GID. To fix, use numbers, e.g. 1000 or "
                         "1000:1000.")
    return str(value.value)


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


def new_run_id(now: dt.datetime | None = None) -> str:
    """Unique per build, so two builds at once never share a container or a temporary name."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%d%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"
