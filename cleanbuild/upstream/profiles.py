"""Build profiles: every pinned input of a build, as data (cleanbuild/profiles/*.toml), checked against a schema.

A profile may inherit another (`inherits = "default"`) and list only what it substitutes: tables merge key by key,
anything else replaces. Precedence: a command-line `--set` beats invoke.yaml `cleanbuild.overrides`, which beats
the profile file. Override values are strings from a command line or YAML values; both are converted to the type
the schema gives the key ("false" for a bool, "3.12" for a string), and a value of the wrong type is exit 2.

load() resolves the checked profile once into frozen, typed values (Profile, Component, Base, Smoke ...), every key
a profile leaves out at the default SCHEMA gives it; the rest of cleanbuild reads their attributes, never the TOML.
"""

from __future__ import annotations

import copy
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cleanbuild.core.errors import UsageError

PROFILE_DIR = Path(__file__).parent.parent / "profiles"  # package data: cleanbuild/profiles
PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")  # a built-in profile: one file name, no dots, no '/'
SOURCES = ("index", "pypi", "git", "local", "none", "torch", "aiter")
# The sources Dockerfile.wheels has a stage for, per component (torchvision/torchaudio follow torch).
ALLOWED_SOURCES = {"torch": ("index", "local"), "triton": ("torch", "pypi", "none"), "flydsl": ("aiter", "none"),
                   "mori": ("pypi", "git", "none"), "aiter": ("git",), "atom": ("git",), "deps": ("pypi",),
                   "installer": ("pypi", "none")}
COMPONENTS = ("torch", "torchvision", "torchaudio", "triton", "flydsl", "mori", "aiter", "atom", "deps", "installer")
REQUIRED_COMPONENTS = ("torch", "triton", "aiter", "atom", "deps")
# Keys of a component table that become build arguments (COMPONENT_KEY); the rest is provenance for the report.
ARG_KEYS = ("source", "version", "repo", "ref", "index_url", "package")

class SIZES:  # noqa: N801 - a schema type, named like the others' `list`, `int`
    """A list of whole numbers of at least 1 (tensor-parallel sizes); --set takes them comma-separated: 1,8."""


@dataclass(frozen=True)
class Default:
    """A schema entry whose key, left out of a profile, reads as `value` (a bare entry reads as its type's empty
    value: "", false, 0, (), {}); the one place a profile's defaults are written."""

    spec: object
    value: object


_COMPONENT = {"source": Default(SOURCES, "none"), "version": str, "repo": str, "ref": str, "branch": str,
              "index_url": str, "package": str, "prebuild_kernels": Default(bool, True), "triton_only": bool,
              "hsa_standin": bool, "max_jobs": Default(int, 0), "build": list}
SCHEMA: dict[str, object] = {
    "name": str, "description": str, "inherits": str, "pinned": str, "offline": bool, "substitutes": list,
    "python": str, "disk_gib": Default(float, 20.0),
    "base": {"image": str, "digest": str, "rocm": str, "standin": bool},
    "components": {name: _COMPONENT for name in COMPONENTS},
    "lock": {"python_platform": Default(str, "x86_64-manylinux_2_28"), "exclude": list},
    "validation": {"device": Default(("cuda", "cpu"), "cuda"), "env": dict},
    "smoke": {"mode": Default(("atom", "cpu"), "atom"), "command": list, "min_tokens": Default(int, 10),
              "gpu": Default(bool, True)},
    "standin": {"suite": Default(str, "bookworm"), "base_packages": list},
    "warm": {"enabled": Default(bool, True), "models": list, "tp": Default(SIZES, (1, 8))},  # tp = []: (1, 8)
}
REQUIRED = ("name", "python", "base", "components")


# ---- the resolved profile: frozen, typed, defaults filled in ----------------------------------------------------

@dataclass(frozen=True, slots=True)
class Component:
    """One [components.NAME] table. `given` names the keys the profile set: only those become build arguments
    (their presence is part of the wheels' keys) and only those are what the report prints."""

    name: str
    source: str
    version: str
    repo: str
    ref: str
    branch: str
    index_url: str
    package: str
    prebuild_kernels: bool
    triton_only: bool
    hsa_standin: bool
    max_jobs: int
    build: tuple[str, ...]  # what the deps stage builds from its sdist
    given: tuple[str, ...] = ()  # in the order the profile (after inheritance and overrides) has them

    @property
    def distribution(self) -> str:
        """The package on the index: `package`, else the component's name."""
        return self.package or self.name

    def build_args(self) -> dict[str, str]:
        prefix = self.name.upper()
        return {f"{prefix}_{k.upper()}": str(getattr(self, k)) for k in ARG_KEYS if k in self.given}

    def as_given(self) -> dict[str, object]:
        """The table as the profile wrote it (after inheritance and overrides): the keys it set, nothing defaulted."""
        return {key: getattr(self, key) for key in self.given}

    def provenance(self) -> str:
        """One-line provenance: 'repo@ref', 'pypi:name==version', 'as torch requires', 'none'."""
        if self.source == "git":
            return f"{self.repo}@{self.ref}"
        if self.source in ("pypi", "index"):
            return f"{self.source}:{self.distribution}=={self.version}"
        return {"torch": "as the torch wheel requires", "aiter": "as the aiter pin requires"}.get(self.source, self.source)


@dataclass(frozen=True, slots=True)
class Base:
    image: str
    digest: str  # "" when unpinned
    rocm: str
    standin: bool  # built on demand by the prepare step (cleanbuild.images.standin)


@dataclass(frozen=True, slots=True)
class Lock:
    python_platform: str
    exclude: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Validation:
    device: str
    env: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Smoke:
    mode: str  # atom: ATOM's own example; cpu: what a CPU can prove
    command: tuple[str, ...]
    min_tokens: int
    gpu: bool


@dataclass(frozen=True, slots=True)
class Standin:
    suite: str
    base_packages: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Warm:
    enabled: bool
    models: tuple[str, ...]
    tp: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    file: Path
    description: str
    pinned: str
    offline: bool
    substitutes: tuple[str, ...]  # what an offline profile puts in place of the real thing; () when not offline
    python: str
    disk_gib: float
    base: Base
    components: tuple[Component, ...]  # those the profile has, in COMPONENTS order
    lock: Lock
    validation: Validation
    smoke: Smoke
    standin: Standin
    warm: Warm
    # The mirror folder in force (cleanbuild.upstream.mirror.attach) and, per git component, the copy in it its
    # commits are read from (per `local` wheel: the index or folder it is fetched from, cleanbuild.upstream.wheelindex). The profile's own repo (the public URL) stays what reports, labels, keys and the lock
    # name: a mirror is where the bytes come from, not what they are.
    mirror: Path | None = None
    reads: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def read_from(self, name: str) -> str:
        """Where a component's bytes are read: a git component's mirror copy, else the repo the profile pins; a
        `local` wheel's copy (cleanbuild.upstream.wheelindex), else the index the profile names."""
        comp = self.component(name)
        return self.reads.get(name) or comp.repo or comp.index_url

    @property
    def base_ref(self) -> str:
        """image:tag@digest when a digest is pinned, else image:tag."""
        return f"{self.base.image}@{self.base.digest}" if self.base.digest else self.base.image

    def component(self, name: str) -> Component:
        """The component's table; one with source "none" (and every default) when the profile has none."""
        return next((c for c in self.components if c.name == name), _component(name, {}))


def _resolve(data: Mapping[str, Any], name: str, file: Path) -> Profile:
    """The merged, checked profile as typed values: every key it leaves out reads as SCHEMA's default."""
    top = _values(data, {k: v for k, v in SCHEMA.items() if not isinstance(v, Mapping)})
    comps = table(data["components"])
    return Profile(
        name=name, file=file, description=top["description"], pinned=top["pinned"], offline=top["offline"],
        substitutes=top["substitutes"] if top["offline"] else (), python=top["python"],
        disk_gib=float(top["disk_gib"]), base=Base(**_section(data, "base")),
        components=tuple(_component(n, table(comps[n])) for n in COMPONENTS if n in comps),
        lock=Lock(**_section(data, "lock")), validation=Validation(**_section(data, "validation")),
        smoke=Smoke(**_section(data, "smoke")), standin=Standin(**_section(data, "standin")), warm=_warm(data),
    )


def _component(name: str, raw: Mapping[str, Any]) -> Component:
    return Component(name, given=tuple(raw), **_values(raw, _COMPONENT))


def _warm(data: Mapping[str, Any]) -> Warm:
    values = _section(data, "warm")
    return Warm(**{**values, "tp": values["tp"] or _default(table(SCHEMA["warm"])["tp"])})  # tp = [] reads as the default


def _section(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    return _values(table(data.get(name, MappingProxyType({}))), table(SCHEMA[name]))


def _values(raw: Mapping[str, Any], schema: Mapping[str, object]) -> dict[str, Any]:
    """Every key of a schema table: the profile's value (checked, frozen), else the schema's default."""
    return {key: raw[key] if key in raw else _default(entry) for key, entry in schema.items()}


_EMPTY: dict[object, object] = {str: "", bool: False, int: 0, float: 0.0, list: (), SIZES: (), dict: MappingProxyType({})}


def _default(entry: object) -> object:
    if isinstance(entry, Default):
        return entry.value
    return _EMPTY[entry]


def _spec(entry: object) -> object:
    """A schema entry's type, its default aside."""
    return entry.spec if isinstance(entry, Default) else entry


def table(value: object) -> Mapping[str, object]:
    """A profile table (the schema checked its keys and types) as a Mapping; TypeError for anything else."""
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a table, got {value!r}")
    return value


def available() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def load(name: str, overrides: Mapping[str, object] | None = None, path: Path | None = None) -> Profile:
    """Read a profile by name (or from a .toml path), resolve `inherits`, apply typed overrides, validate."""
    if path is None and not PROFILE_NAME.match(name):  # a name becomes a file under PROFILE_DIR: never ../x
        raise UsageError(f"profile name {name!r} is not a profile name. To fix, pass --profile "
                         f"{'|'.join(available())} or the path of a .toml profile.")
    file = path or PROFILE_DIR / f"{name}.toml"
    data = _read_chain(file, name, seen=())
    data.pop("inherits", None)
    for dotted, value in (overrides or {}).items():
        set_key(data, str(dotted), value, file)
    _check_required(data, file)
    return _resolve(table(_freeze(data)), str(data.get("name", name)), file)


def _read_chain(file: Path, name: str, seen: tuple[Path, ...]) -> dict[str, Any]:
    if not file.is_file():
        if file.parent.resolve() != PROFILE_DIR.resolve():
            raise UsageError(f"profile file {file} does not exist or is not a file. To fix, pass --profile "
                             f"{'|'.join(available())} or the path of a .toml profile.")
        raise UsageError(f"profile {name!r} not found. To fix, pass --profile {'|'.join(available())} or a .toml path.")
    if file.resolve() in seen:
        raise UsageError(f"profile {file} inherits itself. To fix, remove the loop of `inherits` entries.")
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"profile {file} cannot be read ({exc.strerror}). To fix, make it readable.") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"profile {file} is not valid TOML ({exc}). To fix, correct the file.") from None
    check(data, SCHEMA, file, "")
    parent = _parent(file, data)
    if parent is None:
        return data
    if not parent.is_file():
        raise UsageError(f"profile {file} inherits {str(data['inherits'])!r}, which is neither a file beside it nor a "
                         f"built-in profile ({', '.join(available())}). To fix, correct its `inherits` line.")
    base = _read_chain(parent, str(data["inherits"]), (*seen, file.resolve()))
    return merge(base, data)


def chain(file: Path) -> list[Path]:
    """The files load() merges for `file`, child first: file, the profile it inherits, that one's parent ...

    For callers that edit one file of the chain (pins --bump). It stops quietly where load() would refuse (a
    missing parent, a loop); an unreadable or invalid file raises OSError, UnicodeDecodeError or TOMLDecodeError.
    """
    out = [file]
    while True:
        parent = _parent(out[-1], tomllib.loads(out[-1].read_text(encoding="utf-8")))
        if parent is None or not parent.is_file() or parent.resolve() in {f.resolve() for f in out}:
            return out
        out.append(parent)


def _parent(file: Path, data: Mapping[str, object]) -> Path | None:
    """The file a profile's `inherits` names (it may not exist), or None when it inherits nothing."""
    parent = data.get("inherits")
    return _sibling(file, str(parent)) if parent else None


def _sibling(file: Path, parent: str) -> Path:
    """`inherits` names a profile next to the child (a copied profile folder stays self-contained), else a built-in."""
    name = parent if parent.endswith(".toml") else f"{parent}.toml"
    beside = file.parent / name
    return beside if beside.is_file() else PROFILE_DIR / name


def merge(base: dict[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """Child tables merge into the parent's key by key; any other value replaces the parent's."""
    out = copy.deepcopy(base)
    for key, value in child.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict) and key != "env":
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def check(data: object, schema: Mapping[str, object], file: Path, prefix: str) -> None:
    """Unknown keys and values of the wrong type are errors that name the key and the file."""
    if not isinstance(data, Mapping):
        raise UsageError(f"profile {file}: {prefix.rstrip('.') or 'the file'} must be a table. To fix, see cleanbuild/profiles/default.toml.")
    for key, value in data.items():
        where = f"{prefix}{key}"
        if key not in schema:
            known = ", ".join(sorted(schema))
            raise UsageError(f"profile {file}: unknown key {where!r}. To fix, use one of: {known}.")
        spec = _spec(schema[key])
        if isinstance(spec, Mapping):
            check(value, spec, file, f"{where}.")
        elif not _fits(value, spec):
            raise UsageError(f"profile {file}: {where} is {value!r}, not {_describe(spec)}. To fix, correct that value.")


def _fits(value: object, spec: object) -> bool:
    if isinstance(spec, tuple):
        return value in spec
    if spec is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if spec is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if spec is list:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if spec is SIZES:
        return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
    if spec is dict:
        return isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values())
    return isinstance(spec, type) and isinstance(value, spec)


def _describe(spec: object) -> str:
    if isinstance(spec, tuple):
        return "one of " + ", ".join(map(repr, spec))
    names: dict[object, str] = {str: "a string (quote it, e.g. \"3.12\")", bool: "true or false",
                                int: "a whole number", float: "a number", list: "a list of strings",
                                SIZES: "a list of whole numbers of at least 1 (e.g. [1, 8]; --set: 1,8)",
                                dict: "a table of strings"}
    return names.get(spec, str(spec))


def _check_required(data: Mapping[str, Any], file: Path) -> None:
    for key in REQUIRED:
        if key not in data:
            raise UsageError(f"profile {file} lacks {key}. To fix, add it (see cleanbuild/profiles/default.toml).")
    if "image" not in data["base"]:
        raise UsageError(f"profile {file} lacks base.image. To fix, pin the base image.")
    missing = [c for c in REQUIRED_COMPONENTS if c not in data["components"]]
    if missing:
        raise UsageError(f"profile {file} lacks components {', '.join(missing)}. To fix, add their tables.")
    for name, comp in data["components"].items():
        allowed = ALLOWED_SOURCES.get(name)
        if allowed and comp.get("source", allowed[0]) not in allowed:
            raise UsageError(f"profile {file}: components.{name}.source is {comp.get('source')!r}; use one of {', '.join(allowed)}.")
        if comp.get("source") == "git" and not (comp.get("repo") and comp.get("ref")):
            raise UsageError(f"profile {file}: components.{name} is a git source without repo and ref. To fix, pin both.")


# ---- overrides: dotted keys, values converted to the schema's type -------------------------------------------

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def set_key(data: dict[str, Any], dotted: str, value: object, file: Path) -> None:
    keys = dotted.split(".")
    spec: object = SCHEMA
    node = data
    for i, key in enumerate(keys):
        if not isinstance(spec, Mapping) or key not in spec:
            raise UsageError(f"override {dotted!r} does not name a profile entry. To fix, use a key such as components.aiter.ref.")
        spec = _spec(spec[key])
        if i < len(keys) - 1:
            if isinstance(spec, Mapping):
                node = node.setdefault(key, {})
            elif spec is dict:  # a table of strings, e.g. validation.env.GPU_ARCHS
                node = node.setdefault(key, {})
                node[keys[-1]] = str(value)
                return
    if isinstance(spec, Mapping):
        raise UsageError(f"override {dotted!r} names a table, not a value. To fix, name one of its keys.")
    node[keys[-1]] = coerce(value, spec, dotted, file)


def coerce(value: object, spec: object, dotted: str, file: Path) -> object:
    if not isinstance(value, str):
        converted = float(value) if spec is float and isinstance(value, int) and not isinstance(value, bool) else value
    elif spec is bool:
        converted = True if value.lower() in _TRUE else False if value.lower() in _FALSE else value
    elif spec in (int, float):
        try:
            converted = spec(value)
        except ValueError:
            converted = value
    elif spec is list:
        converted = [v.strip() for v in value.split(",") if v.strip()]
    elif spec is SIZES:
        parts = [v.strip() for v in value.split(",") if v.strip()]
        converted = [int(v) for v in parts] if all(v.isdigit() for v in parts) else value
    else:
        converted = value
    if not _fits(converted, spec):
        raise UsageError(f"override {dotted}={value!r} is not {_describe(spec)}. To fix, pass a value of that type.")
    return converted


def parse_sets(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """--set KEY=VALUE flags -> overrides."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r} is not KEY=VALUE. To fix, write e.g. --set components.aiter.ref=0123abc.")
        out[key.strip()] = value
    return out


def _freeze(data: object) -> object:
    if isinstance(data, dict):
        return MappingProxyType({k: _freeze(v) for k, v in data.items()})
    if isinstance(data, list):
        return tuple(_freeze(v) for v in data)
    return data
