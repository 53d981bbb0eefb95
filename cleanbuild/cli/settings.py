"""Task flags + the environment + invoke.yaml (`cleanbuild:` section) -> one Request, resolved once at the edge.

The options and their checks are one table (cleanbuild.cli.options); this module applies it: the precedence (flag, then
environment variable, then invoke.yaml, then default), an error that names where a bad value came from (the flag
`--progress`, `$VAR` or the key `invoke.yaml: cleanbuild.progress`), and the site config checked like a profile: a
wrong type, an unknown key or an old key name is a one-line error (exit 2) naming the key. Both front doors also
check that every config file invoke reads parses at all, before invoke reads it (site_file, for
cleanbuild.cli.invokefiles).
"""

from __future__ import annotations

import json
import types
from collections.abc import Mapping
from pathlib import Path

from cleanbuild.cli.options import BY_NAME, CONFIG_KEYS, OPTIONS, RENAMED, given
from cleanbuild.core.errors import UsageError
from cleanbuild.core.spec import new_run_id
from cleanbuild.request.build import Request
from cleanbuild.request.load import load_profile, parse_arch
from cleanbuild.upstream.profiles import parse_sets, table

__all__ = ["Request", "new_run_id", "resolve", "site_config", "site_file"]


def site_config(raw: object) -> dict[str, object]:
    """The `cleanbuild:` section of invoke.yaml, checked: a mapping of known keys with values of the right type."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise UsageError(f"invoke.yaml: `cleanbuild:` must be a mapping, not {type(raw).__name__}. To fix, see the README's invoke.yaml example.")
    out = {}
    for key, value in raw.items():
        if key in RENAMED:
            raise UsageError(f"invoke.yaml: cleanbuild.{key} is now cleanbuild.{RENAMED[key]} (the same name as the "
                             f"flag). To fix, rename the key to {RENAMED[key]}.")
        if key not in CONFIG_KEYS:
            raise UsageError(f"invoke.yaml: unknown key cleanbuild.{key}. To fix, use one of: {', '.join(sorted(CONFIG_KEYS))}.")
        types = BY_NAME[key].types
        if value is not None and not isinstance(value, types):
            raise UsageError(f"invoke.yaml: cleanbuild.{key} is {value!r}, not {' or '.join(t.__name__ for t in types)}. To fix, correct it.")
        out[key] = value
    return out


# The config file types invoke reads, by suffix (invoke's Config._file_suffixes), in the order it looks for them.
CONFIG_TYPES = ("yaml", "yml", "json", "py")


def site_file(path: Path, *, given: bool = False) -> dict[str, object]:
    """The checked `cleanbuild:` section of a config file invoke reads (cleanbuild.cli.invokefiles finds them), parsed as
    invoke parses it. given: the user named this file (-f, INVOKE_RUNTIME_CONFIG), so a missing file or a folder is
    bad input, not "no config"."""
    if path.is_dir() or (given and not path.exists()):
        what = "a folder" if path.is_dir() else "missing"
        fix = ("name an invoke.yaml file (-f FILE or INVOKE_RUNTIME_CONFIG=FILE) or unset it" if given else
               "remove that folder (invoke reads a config file by that name)")
        raise UsageError(f"the site config {path} is {what}, not a YAML file. To fix, {fix}.")
    if path.suffix.lstrip(".") not in CONFIG_TYPES:
        raise UsageError(f"the site config {path} is of a type invoke does not read (it reads .yaml, .yml, .json and "
                         ".py). To fix, name an invoke.yaml file (-f FILE or INVOKE_RUNTIME_CONFIG=FILE) or unset it.")
    if not path.is_file():
        return {}
    data = _config_data(path)
    try:
        if data is not None and not isinstance(data, dict):
            raise UsageError(f"the file must hold a mapping (cleanbuild: ...), not {type(data).__name__}")
        return site_config((data or {}).get("cleanbuild"))
    except UsageError as exc:
        detail, _, fix = str(exc).partition(". To fix, ")
        fix = fix if fix.startswith("rename") else "correct it or remove it."  # an old key: its new name
        raise UsageError(f"{path} is not a valid site config ({detail.removeprefix('invoke.yaml: ')}). To fix, {fix}") from None


def _config_data(path: Path) -> object:
    """What invoke would load from path (YAML, JSON, or a Python file's variables), or one line naming the file."""
    from invoke.vendor import yaml

    try:
        if path.suffix == ".py":
            return _python_config(path)
        text = path.read_bytes().decode("utf-8")
        # invoke's vendored PyYAML has no annotations (types-PyYAML covers `yaml`, not `invoke.vendor.yaml`).
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)  # type: ignore[no-untyped-call]
    except OSError as exc:
        raise UsageError(f"the site config {path} cannot be read ({exc.strerror}). To fix, make it readable or "
                         "remove it.") from None
    except (yaml.YAMLError, UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise UsageError(f"{path} is not a valid site config ({str(exc).replace(chr(10), ' ')[:300]}). To fix, correct it or remove it.") from None


def _python_config(path: Path) -> dict[str, object]:
    """A .py config's variables, run by invoke's own loader (invoke runs it again when it reads it): any error it
    raises, or a module among its values (invoke refuses those), is the file's fault."""
    from invoke.config import load_source

    try:
        data = {k: v for k, v in load_source("mod", str(path)).items() if not k.startswith("__")}
    except Exception as exc:  # noqa: BLE001 - whatever the file raises is the file's error, named as such
        raise UsageError(f"{path} is not a valid site config (running it raised {type(exc).__name__}: {exc}). To fix, "
                         "correct it or remove it.") from None
    modules = sorted(k for k, v in data.items() if isinstance(v, types.ModuleType))
    if modules:
        raise UsageError(f"{path} is not a valid site config ({modules[0]} is a module, which invoke cannot keep as a "
                         "value). To fix, import it inside a function or remove it.")
    return data


REQUEST_FLAGS = frozenset(o.name for o in OPTIONS if o.flag)  # the task parameters that reach the request


def resolve(flags: Mapping[str, object], raw_config: object, *, matrix: bool = False,
            environ: Mapping[str, str] | None = None) -> Request:
    """Task flags (by option name), the environment and invoke.yaml's `cleanbuild:` section -> a checked Request,
    one field per option (cleanbuild.cli.options), without probing the host or the engine. matrix: --arch may list
    several archs (build-clean, plan, wheels, clean)."""
    unknown = sorted(set(flags) - REQUEST_FLAGS)
    if unknown:
        raise TypeError(f"not request flags: {unknown}")
    config = site_config(raw_config)
    values = {o.name: o.check(given(o, flags, config, environ)) for o in OPTIONS}
    overrides = {**table(values.pop("overrides") or {}), **parse_sets(list(values.pop("set")))}
    name = given(BY_NAME["profile"], flags, config, environ)
    mirror_from = given(BY_NAME["mirror"], flags, config, environ).where
    loaded = load_profile(str(values["profile"]), overrides, values["mirror"], mirror_from, values["torch_index"])
    return Request(**{**values, "profile": loaded, "profile_from": name.where,
                      "overrides": overrides, "arch": parse_arch(values["arch"], matrix=matrix)})
