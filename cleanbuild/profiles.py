"""Build profiles: every pinned input of a build, as data (cleanbuild/profiles/*.toml).

Precedence: a command-line flag beats config (invoke.yaml `cleanbuild.overrides`), config beats the profile file.
Overrides are dotted keys, e.g. `components.aiter.ref=0123abc` or `base.image=registry.local/rocm:7.2`.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from .errors import UsageError

PROFILE_DIR = Path(__file__).parent / "profiles"
# Keys of a component table that become build arguments (COMPONENT_KEY); the rest is provenance for the report.
ARG_KEYS = ("source", "version", "repo", "ref", "index_url", "package")
SOURCES = {"index", "pypi", "git", "local", "none"}
REQUIRED_COMPONENTS = ("torch", "triton", "aiter", "atom", "deps")


@dataclass(frozen=True)
class Component:
    name: str
    fields: Mapping[str, object]

    @property
    def source(self) -> str | None:
        value = self.fields.get("source")
        return str(value) if value is not None else None

    def build_args(self) -> dict[str, str]:
        prefix = self.name.upper()
        return {f"{prefix}_{k.upper()}": str(self.fields[k]) for k in ARG_KEYS if k in self.fields}

    def ref(self) -> str:
        """The one-line provenance of this component: 'repo@ref', 'pypi version', 'local', ..."""
        f = self.fields
        if f.get("source") == "git":
            return f"{f.get('repo')}@{f.get('ref')}"
        if f.get("source") in ("pypi", "index"):
            return f"{f.get('source')}:{f.get('package', self.name)}=={f.get('version', '')}"
        return str(f.get("source", "pinned-with-torch"))


@dataclass(frozen=True)
class Profile:
    name: str
    data: Mapping[str, object]

    @property
    def offline(self) -> bool:
        return bool(self.data.get("offline", False))

    @property
    def python(self) -> str:
        return str(self.data["python"])

    @property
    def pinned(self) -> str:
        return str(self.data.get("pinned", ""))

    @property
    def base(self) -> Mapping[str, object]:
        return self.data["base"]  # type: ignore[return-value]

    @property
    def base_ref(self) -> str:
        """image:tag@digest when a digest is pinned, else image:tag."""
        digest = self.base.get("digest")
        return f"{self.base['image']}@{digest}" if digest else str(self.base["image"])

    @property
    def components(self) -> tuple[Component, ...]:
        comps = self.data["components"]
        return tuple(Component(name, MappingProxyType(dict(fields))) for name, fields in comps.items())  # type: ignore[union-attr]

    def component(self, name: str) -> Component:
        for comp in self.components:
            if comp.name == name:
                return comp
        raise UsageError(f"profile {self.name!r} has no component {name!r}.")

    def section(self, name: str) -> Mapping[str, object]:
        return self.data.get(name, {})  # type: ignore[return-value]


def available() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def load(name: str, overrides: Mapping[str, object] | None = None, path: Path | None = None) -> Profile:
    """Read a profile by name (or from a path), apply dotted overrides, validate."""
    file = path or PROFILE_DIR / f"{name}.toml"
    if not file.is_file():
        raise UsageError(f"profile {name!r} not found. To fix, pass --profile {'|'.join(available())} or a .toml path.")
    try:
        data = tomllib.loads(file.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"profile {file} is not valid TOML ({exc}). To fix, correct the file.") from None
    data = apply_overrides(data, overrides or {})
    profile = Profile(str(data.get("name", name)), _freeze(data))
    validate(profile, file)
    return profile


def apply_overrides(data: dict, overrides: Mapping[str, object]) -> dict:
    out = copy.deepcopy(data)
    for dotted, value in overrides.items():
        keys = str(dotted).split(".")
        node = out
        for key in keys[:-1]:
            if not isinstance(node.get(key), dict):
                raise UsageError(f"override {dotted!r} does not name a profile entry. To fix, use a key such as components.aiter.ref.")
            node = node[key]
        node[keys[-1]] = value
    return out


def parse_sets(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """--set KEY=VALUE flags -> overrides."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--set {item!r} is not KEY=VALUE. To fix, write e.g. --set components.aiter.ref=0123abc.")
        out[key.strip()] = value
    return out


def validate(profile: Profile, file: Path) -> None:
    for key in ("python", "base", "components"):
        if key not in profile.data:
            raise UsageError(f"profile {file} lacks [{key}]. To fix, add it (see cleanbuild/profiles/default.toml).")
    if "image" not in profile.base:
        raise UsageError(f"profile {file} lacks base.image. To fix, pin the base image.")
    names = {c.name for c in profile.components}
    missing = [c for c in REQUIRED_COMPONENTS if c not in names]
    if missing:
        raise UsageError(f"profile {file} lacks components {', '.join(missing)}. To fix, add their tables.")
    for comp in profile.components:
        src = comp.source
        if src is not None and src not in SOURCES:
            raise UsageError(f"profile {file}: components.{comp.name}.source is {src!r}; use one of {sorted(SOURCES)}.")
        if src == "git" and not (comp.fields.get("repo") and comp.fields.get("ref")):
            raise UsageError(f"profile {file}: components.{comp.name} is a git source without repo and ref. To fix, pin both.")


def _freeze(data: object) -> object:
    if isinstance(data, dict):
        return MappingProxyType({k: _freeze(v) for k, v in data.items()})
    if isinstance(data, list):
        return tuple(_freeze(v) for v in data)
    return data
