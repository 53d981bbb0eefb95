"""Every common option of the host CLIs, declared once (as nox's `_options.py` declares its options).

An Option is one row: its name is the Python parameter of every task that takes it, the invoke.yaml key under
`cleanbuild:` and, dashed, the flag (`ca_bundle` -> `--ca-bundle`). The row carries the help, the default, the
types invoke.yaml may hold, the check that turns a raw value into a typed one (refusing it in a message that names
where it came from), whether the flag repeats, an optional environment variable, and whether it is a flag, an
invoke.yaml key, or both. From this table come the task signatures and their help (cleanbuild.cli.main), the invoke.yaml
check and the Request (cleanbuild.cli.settings) and README's options table (cleanbuild.cli.clidoc).

Precedence, in `given`: the flag, else the environment variable, else invoke.yaml, else the default.
"""

from __future__ import annotations

import getpass
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cleanbuild.core.errors import UsageError
from cleanbuild.core.refs import port_in_range
from cleanbuild.core.spec import REPO_ROOT
from cleanbuild.gpuhost.gpu import parse_gpus
from cleanbuild.upstream import mirror as mirrors
from cleanbuild.upstream import wheelindex

PROGRESS = ("auto", "plain", "tty", "quiet")
CACHE = ("auto", "inline", "registry", "none")
DEVICES = ("cpu", "cuda")
# host[:port]/path, lower case (Docker's reference grammar, without the tag).
REGISTRY = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")
BUILDER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
USER_ID = re.compile(r"^[0-9]+(:[0-9]+)?$")
HOST_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


def flag_name(name: str) -> str:
    """An option or task parameter as the user types it: ca_bundle -> --ca-bundle."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class Given:
    """One value before it is checked, and where it came from: the words an error message names it by."""

    value: object
    where: str


# ---- the checks: a raw value (and where it came from) -> a typed value --------------------------------------

def _as_is(value: Given) -> Any:
    return value.value


def _switch(value: Given) -> bool:
    return bool(value.value)


def _text(value: Given) -> str | None:
    return None if value.value is None else str(value.value)


def _strings(value: Given) -> tuple[str, ...]:
    """A repeatable flag: invoke gives a list (or None when not given)."""
    return tuple(str(v) for v in value.value) if isinstance(value.value, list | tuple) else ()


def _one_of(allowed: tuple[str, ...]) -> Callable[[Given], str]:
    def check(value: Given) -> str:
        text = str(value.value)
        if text not in allowed:
            raise UsageError(f"{value.where} {text!r} is not one of {', '.join(allowed)}. To fix, use one of those.")
        return text

    return check


def _model(value: Given) -> Path | None:
    """--model: a folder (config.json and weights)."""
    if not value.value:
        return None
    path = Path(str(value.value)).resolve()
    if not path.is_dir():
        raise UsageError(f"{value.where} {value.value} is not a folder. To fix, pass a model folder (config.json and "
                         "weights).")
    return path


def _device(value: Given) -> str | None:
    if value.value is not None and value.value not in DEVICES:
        raise UsageError(f"{value.where} {value.value!r} is not cpu or cuda. To fix, pass {value.where} cpu or "
                         f"{value.where} cuda.")
    return None if value.value is None else str(value.value)


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


def _gpu(value: Given) -> tuple[int, ...] | None:
    """GPU indices, or None for every GPU ("all" or not given). An empty list is refused: `--gpu ''` or
    `--gpu ,` must not silently mean every GPU."""
    if value.value is None:
        return None
    text = str(value.value).strip()
    if text.lower() == "all":
        return None
    if not [p for p in re.split(r"[,\s]+", text) if p]:
        raise UsageError(f"{value.where} {value.value!r} names no GPU. To fix, pass indices (--gpu 0 or --gpu 0,1), "
                         "--gpu all, or leave it out to use every GPU.")
    return parse_gpus(text, value.where)


def _builder(value: Given) -> str | None:
    if value.value is None:
        return None
    text = str(value.value)
    if not BUILDER.match(text):
        raise UsageError(f"{value.where} {text!r} is not a buildx builder name. To fix, pass a name `docker buildx "
                         "ls` lists (letters, digits, '_', '.', '-'; not starting with '-').")
    return text


def _user_id(value: Given) -> str | None:
    """UID[:GID], numeric: a name may not exist in the image."""
    if value.value is None:
        return None
    if not USER_ID.match(str(value.value)):
        raise UsageError(f"{value.where} {value.value!r} is not UID or UID:GID. To fix, use numbers, e.g. 1000 or "
                         "1000:1000.")
    return str(value.value)


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


# ---- the table ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Option:
    """One common option. flag: a task flag; config: invoke.yaml may set it (both, usually). types: what an
    invoke.yaml value may be (bool for a switch). empty_is_given: an empty value is refused, not "not given"."""

    name: str
    help: str
    default: object = None
    types: tuple[type, ...] = (str,)
    check: Callable[[Given], Any] = _as_is
    repeatable: bool = False
    env: str | None = None
    flag: bool = True
    config: bool = True
    empty_is_given: bool = False

    @property
    def flag_name(self) -> str:
        return flag_name(self.name)

    @property
    def key(self) -> str:
        return f"cleanbuild.{self.name}"

    @property
    def switch(self) -> bool:
        return self.types == (bool,)

    def parameter_default(self) -> object:
        """The default in a task's signature: False for a switch, else None, so "not given" reaches the cascade."""
        return False if self.switch else None


OPTIONS: tuple[Option, ...] = (
    Option("arch", "gfx942 or gfx950 (build-clean, plan, wheels, clean also take gfx942,gfx950); detected on the "
           "host when omitted", check=_text, config=False),
    Option("ck_free", "build aiter without CK (ENABLE_CK=0) and set ATOM_CK_FREE=1 in the image", False, (bool,),
           _switch, config=False),
    Option("profile", "build profile: default (real ROCm host), offline (CPU stand-in), or a .toml path", "default",
           check=_text),
    Option("set", "override one profile entry, KEY=VALUE (repeatable), e.g. components.aiter.ref=0123abc",
           check=_strings, repeatable=True, config=False),
    Option("overrides", "profile entries to override, as dotted keys (`--set` wins)", {}, (dict,), flag=False),
    Option("builder", "buildx builder to build on (e.g. a remote BuildKit)", check=_builder),
    Option("ca_bundle", "PEM CA bundle for pip/apt/git inside builds, as a BuildKit secret (never a layer); default "
           "auto: what this host trusts; none: no bundle", "auto", check=lambda v: ca_bundle(v.value, v.where)),
    Option("progress", "BuildKit progress output: auto, plain, tty, quiet", "auto", check=_one_of(PROGRESS)),
    Option("model", "model folder (config.json and weights) for the 10-token smoke test", check=_model,
           config=False),
    Option("allow_no_smoke", "tag the release even without a smoke test", False, (bool,), _switch, config=False),
    Option("allow_unservable", "tag a CK-free release whose route needs a module it lacks (validation warns, the report "
           "says so)", False, (bool,), _switch, config=False),
    Option("user", "user part of the release tag (default: login name)", check=_user),
    Option("gpu", "GPU indices for GPU steps, e.g. 0 or 0,1, or all (default: every GPU)", types=(str, int),
           check=_gpu, empty_is_given=True),
    Option("user_id", "run GPU containers as this user (UID[:GID]); default: the image's user", types=(str, int),
           check=_user_id, empty_is_given=True),
    Option("device", "where the validation kernels run: cuda (a ROCm host) or cpu (default: the profile's)",
           check=_device, config=False),
    Option("registry", "image name prefix HOST[:PORT]/PATH: with a host, images are pulled and pushed there by "
           "content key", "atom-build", check=_registry),
    Option("cache", "build cache through the registry: auto (inline when the registry is remote), inline, "
           "registry, none", "auto", check=_one_of(CACHE), flag=False),
    Option("cache_dir", "where build contexts, run folders and fetched sources live (default: .cache in this "
           "checkout)", check=_cache_dir, flag=False),
    Option("src", "build from a local checkout as it is on disk, COMPONENT=PATH (aiter or atom; repeatable): "
           "Python/CSV/JSON edits of the package become a layer over the clean image, anything else rebuilds that "
           "wheel; dev tag only", check=_strings, repeatable=True, config=False),
    Option("mirror", "folder of local copies of the git repos (aiter.git, atom.git: the URL's last part, lower case) "
           "to read instead of their URLs; reports, labels, keys and the lock still name the public URLs",
           check=lambda v: mirrors.folder(v.value, v.where), env=mirrors.ENV),
    Option("torch_index", "where the offline profile's CPU torch wheel is fetched: a mirror of the index the "
           "profile names (PyTorch's CPU index) or a folder holding the wheel; the profile's version keeps its +cpu "
           "label, so no other build can stand in", check=lambda v: wheelindex.location(v.value, v.where),
           env=wheelindex.ENV, flag=False),
)
BY_NAME: Mapping[str, Option] = {o.name: o for o in OPTIONS}
CONFIG_KEYS = tuple(o.name for o in OPTIONS if o.config)
# Old invoke.yaml keys, refused with the new name: one name per option, the flag's.
RENAMED = {"gpus": "gpu", "container_user": "user_id"}

# Task switches that never reach the request: one meaning and one help each, wherever a task takes them.
SWITCHES: Mapping[str, str] = {
    "json": "print the result as JSON on standard output",
    "dry_run": "print what would run, run nothing",
    "debug": "show the traceback on failure",
}


def given(option: Option, flags: Mapping[str, object], config: Mapping[str, object],
          environ: Mapping[str, str] | None = None) -> Given:
    """The precedence rule, in one place: the flag, else the environment variable, else invoke.yaml's key, else
    the default. An empty value falls through, unless the option says empty_is_given."""
    empty: tuple[object, ...] = (None,) if option.empty_is_given else (None, "")
    env = os.environ if environ is None else environ
    if option.flag and flags.get(option.name) not in empty:
        return Given(flags[option.name], option.flag_name)
    if option.env and env.get(option.env) not in empty:
        return Given(env[option.env], f"${option.env}")
    if option.config and config.get(option.name) not in empty:
        return Given(config[option.name], f"invoke.yaml: {option.key}")
    return Given(option.default, f"the default {option.name}")
