"""The locked dependency closure of a profile: exact versions and sha256 hashes of every wheel, refreshed on purpose.

Resolver: uv's `pip compile --generate-hashes`, because it resolves for ANOTHER interpreter and platform
(--python-version, --python-platform: the base image's Python and glibc, not this host's), can leave packages
out of the resolution (--excludes: the accelerator stack) and out of the output (--no-emit-package), and takes
about a second; pip-tools resolves only for the running interpreter.

Inputs, read from the pinned sources themselves (never typed by hand):
- aiter's install_requires at the aiter ref (setup.py; the full build's list, with FLYDSL_VERSION), so flydsl is
  exactly what aiter pins;
- ATOM's [project].dependencies at the ATOM ref (pyproject.toml);
- torch's (and torchvision's, torchaudio's) own requirements from their PyPI release of the same version, minus
  the accelerator stack (nvidia-*, cuda-*, triton*): the ROCm wheels come from PyTorch's index with their triton.
The lock file starts with `# atom-build-lock {json}`: the inputs and the refs they came from. The wheels stage
refuses a lock made for other refs, and `invoke lock --check` exits 1 when the pins moved and the lock did not.
"""

from __future__ import annotations

import ast
import json
import re
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cleanbuild.core.atomic import replace_all
from cleanbuild.core.errors import EnvironmentProblem, StepFailed, UsageError
from cleanbuild.core.run import CommandFailed, run
from cleanbuild.upstream.gitrepo import Repo
from cleanbuild.upstream.profiles import Profile

HEADER = "# atom-build-lock "
ACCELERATOR = re.compile(r"^(nvidia-|cuda-|triton|pytorch-triton)")
COMPONENT_PACKAGES = ("torch", "torchvision", "torchaudio")
BUILD_TOOLS = ("setuptools", "setuptools_scm<10", "wheel", "packaging")  # aiter's CI: setuptools_scm<10; plus aiter's setup_requires and ATOM's build-system requires


@dataclass(frozen=True)
class Inputs:
    python: str
    platform: str
    aiter_ref: str
    atom_ref: str
    aiter: tuple[str, ...]
    atom: tuple[str, ...]
    torch: tuple[str, ...]
    build: tuple[str, ...] = BUILD_TOOLS
    sdist: tuple[str, ...] = ()  # built from their sdist on purpose (components.deps.build); all else binary only

    def to_json(self) -> dict[str, Any]:
        return {"python": self.python, "platform": self.platform, "aiter_ref": self.aiter_ref,
                "atom_ref": self.atom_ref, "aiter": list(self.aiter), "atom": list(self.atom),
                "torch": list(self.torch), "build": list(self.build), "sdist": list(self.sdist)}


def lock_paths(profile: Profile) -> tuple[Path, Path]:
    """<profile>.lock (runtime closure) and <profile>.build.lock (build tools), next to the profile file."""
    stem = profile.file.with_suffix("")
    return stem.with_name(stem.name + ".lock"), stem.with_name(stem.name + ".build.lock")


# ---- inputs from the pinned sources -------------------------------------------------------------------------

def inputs(profile: Profile) -> Inputs:
    platform = profile.lock.python_platform
    aiter_ref, atom_ref = profile.component("aiter").ref, profile.component("atom").ref
    # Read where the profile reads them (a mirror's copy, else the repo): the same commits, so the same lock.
    setup = _read(profile.read_from("aiter"), aiter_ref, "setup.py")
    pyproject = _read(profile.read_from("atom"), atom_ref, "pyproject.toml")
    build = sorted({*BUILD_TOOLS, *string_list(setup, "setup_requires"), *atom_build_requires(pyproject)})
    sdist = tuple(sorted(profile.component("deps").build))
    return Inputs(profile.python, platform, aiter_ref, atom_ref, tuple(aiter_requirements(setup, aiter_ref)),
                  tuple(atom_requirements(pyproject, atom_ref)), tuple(torch_requirements(profile)), tuple(build), sdist)


def _read(repo: object, ref: str, path: str) -> bytes:
    source = Repo(str(repo))
    source.fetch(ref)
    data = source.show(ref, path)
    if data is None:
        raise UsageError(f"{repo} @ {ref[:12]} has no {path}. To fix, check the pin (`invoke pins`).")
    return data


def aiter_requirements(setup_py: bytes, ref: str = "") -> list[str]:
    """The full build's install_requires of aiter's setup.py, FLYDSL_VERSION substituted."""
    tree = _parse(setup_py, ref)
    consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
              for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value.value, str)}
    lists = [node.value for node in ast.walk(tree) if isinstance(node, ast.Assign) and isinstance(node.value, ast.List)
             and any(isinstance(t, ast.Name) and t.id == "install_requires" for t in node.targets)]
    if not lists:
        raise UsageError(f"aiter setup.py @ {ref[:12]} has no `install_requires = [...]`. To fix, update cleanbuild/upstream/lock.py for its new shape.")
    full = max(lists, key=lambda node: len(node.elts))  # the full build's list; AITER_TRITON_ONLY's is a subset
    out = []
    for elt in full.elts:
        value = elt.value if isinstance(elt, ast.Constant) else consts.get(elt.id) if isinstance(elt, ast.Name) else None
        if not isinstance(value, str):
            raise UsageError(f"aiter setup.py @ {ref[:12]}: install_requires holds {ast.unparse(elt)}, not a string. To fix, update cleanbuild/upstream/lock.py.")
        out.append(_canonical(value))
    return out


def _parse(source: bytes, ref: str = "") -> ast.Module:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        raise UsageError(f"aiter setup.py @ {ref[:12] or 'the pin'} is not Python this host can read ({exc}). "
                         "To fix, check the aiter pin (`invoke pins`).") from None


def string_list(source: bytes, name: str) -> list[str]:
    """The strings of a module's `name = [...]` assignments (aiter's setup_requires: what setuptools would fetch)."""
    found = []
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found += [_canonical(e.value) for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return found


def atom_build_requires(pyproject: bytes) -> list[str]:
    try:
        data = tomllib.loads(pyproject.decode(errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"ATOM pyproject.toml is not valid TOML ({exc}). To fix, check the ATOM pin (`invoke pins`).") from None
    return [_canonical(r) for r in data.get("build-system", {}).get("requires", [])]


def atom_requirements(pyproject: bytes, ref: str = "") -> list[str]:
    try:
        deps = tomllib.loads(pyproject.decode(errors="replace"))["project"]["dependencies"]
    except (tomllib.TOMLDecodeError, KeyError) as exc:
        raise UsageError(f"ATOM pyproject.toml @ {ref[:12]} has no [project].dependencies ({exc}). To fix, update cleanbuild/upstream/lock.py.") from None
    return [_canonical(d) for d in deps]


def torch_requirements(profile: Profile) -> list[str]:
    """torch and its pair at their upstream release (local version label dropped), for their own requirements."""
    out = []
    for name in COMPONENT_PACKAGES:
        version = profile.component(name).version
        if version:
            try:
                out.append(f"{name}=={Version(version).public}")
            except InvalidVersion:
                raise UsageError(f"components.{name}.version {version!r} is not a version (PEP 440). To fix, "
                                 f"correct it in {profile.file} or in --set.") from None
    return out


def _canonical(text: str) -> str:
    try:
        return str(Requirement(text))
    except InvalidRequirement as exc:
        raise UsageError(f"requirement {text!r} is not valid ({exc}). To fix, check the pinned source.") from None


# ---- compile, write, check ----------------------------------------------------------------------------------

def compile_lock(inp: Inputs, *, upgrade: tuple[str, ...] = (), previous: Path | None = None) -> tuple[str, str]:
    """(runtime lock text, build lock text), resolved with uv for the profile's Python and platform."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        excludes = work / "excludes.txt"
        excludes.write_text("\n".join(_accelerator_packages(inp, work)) + "\n")
        runtime = _uv_compile(inp, work, "runtime", [*inp.aiter, *inp.atom, *inp.torch], excludes,
                              no_emit=[Requirement(r).name for r in inp.torch], upgrade=upgrade, previous=previous)
        build = _uv_compile(inp, work, "build", list(inp.build), None, no_emit=[], upgrade=upgrade,
                            previous=previous.with_name(previous.name.replace(".lock", ".build.lock")) if previous else None)
    meta = json.dumps(inp.to_json(), sort_keys=True)
    return f"{HEADER}{meta}\n{runtime}", f"{HEADER}{meta}\n{build}"


def _accelerator_packages(inp: Inputs, work: Path) -> list[str]:
    """What torch's PyPI release pulls in for CUDA (and triton): left out of the resolution."""
    if not inp.torch:
        return []
    req = work / "torch.in"
    req.write_text("\n".join(inp.torch) + "\n")
    out = _uv(["pip", "compile", str(req), "--python-version", inp.python, "--python-platform", inp.platform,
               "--no-header", "--no-annotate", "--quiet"])
    names = [line.split("==")[0] for line in out.splitlines() if "==" in line and not line.startswith(" ")]
    return sorted(n for n in names if ACCELERATOR.match(n))


def _uv_compile(inp: Inputs, work: Path, name: str, reqs: list[str], excludes: Path | None, *, no_emit: list[str],
                upgrade: tuple[str, ...], previous: Path | None) -> str:
    req, out = work / f"{name}.in", work / f"{name}.txt"
    req.write_text("\n".join(reqs) + "\n")
    if previous is not None and previous.is_file():
        out.write_text(_text(previous))  # uv keeps what the old lock pins unless told to upgrade
    # Relative names, run in the work folder: the lock's "# via -r runtime.in" comments stay the same every time.
    argv = ["pip", "compile", req.name, "-o", out.name, "--python-version", inp.python, "--python-platform",
            inp.platform, "--generate-hashes", "--no-header", "--quiet", "--annotation-style", "line"]
    argv += [x for n in no_emit for x in ("--no-emit-package", n)]
    argv += [x for p in upgrade for x in ("--upgrade-package", p)]
    if name == "runtime":
        # As the wheels stage downloads: binary only for the base's platform, but what the profile builds from its
        # sdist on purpose. A package with no wheel for the target fails here, at lock time, naming it.
        argv += ["--only-binary", ":all:", *[x for n in inp.sdist for x in ("--no-binary", n)]]
    if excludes is not None:
        argv += ["--excludes", excludes.name]
    _uv(argv, cwd=work)
    return "".join(line for line in out.read_text().splitlines(keepends=True) if not line.startswith(HEADER))


def _uv(args: list[str], cwd: Path | None = None) -> str:
    env = {"UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"}
    for ca in ("/etc/ssl/certs/ca-certificates.crt",):
        if Path(ca).is_file():
            env["SSL_CERT_FILE"] = ca
    try:
        return run(["uv", *args], capture=True, echo=False, env=env, timeout=600, cwd=cwd).stdout
    except CommandFailed as exc:
        raise StepFailed(f"uv could not resolve the closure: {exc}. To fix, read uv's message; a pin may ask for a version PyPI lacks.") from None


def _text(path: Path) -> str:
    """A lock file's text; a binary or undecodable file is bad input naming the file (exit 2)."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not a text lock file (not UTF-8). To fix, restore it from git or remake it "
                         "with `invoke lock`.") from None


def read_header(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    first = _text(path).splitlines()[:1]
    if not first or not first[0].startswith(HEADER):
        return None
    try:
        header = json.loads(first[0][len(HEADER):])
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise UsageError(f"{path}: its atom-build-lock header is not a JSON object. To fix, restore it from git or "
                         "remake it with `invoke lock`.")
    return header


def check(profile: Profile) -> list[str]:
    """Problems that make the committed lock stale for the profile's pins (empty when it matches)."""
    runtime, build = lock_paths(profile)
    header = read_header(runtime)
    if header is None:
        return [f"{runtime} is missing or has no atom-build-lock header. To fix, run `invoke lock --profile {profile.name}`."]
    want = inputs(profile).to_json()
    problems = [f"lock {key}: {header.get(key)!r} != pins {value!r}" for key, value in want.items()
                if header.get(key) != value]
    if read_header(build) != header:
        problems.append(f"{build} was not made with {runtime.name}. To fix, run `invoke lock --profile {profile.name}`.")
    return problems


def render(profile: Profile, *, upgrade: tuple[str, ...] = ()) -> dict[Path, str]:
    """Both lock files' new texts (runtime first), written nowhere: callers write them with replace_all."""
    runtime, build = lock_paths(profile)
    check_upgrades(profile, upgrade)
    text, build_text = compile_lock(inputs(profile), upgrade=upgrade, previous=runtime if runtime.is_file() else None)
    return {runtime: text, build: build_text}


def write(profile: Profile, *, upgrade: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """Remake both locks; the pair is replaced together or not at all (cleanbuild.core.atomic)."""
    files = render(profile, upgrade=upgrade)
    replace_all(files)
    runtime, build = files
    return runtime, build


def check_upgrades(profile: Profile, upgrade: tuple[str, ...]) -> None:
    """--upgrade-package NAME must name a package the lock holds: anything else would be silently ignored."""
    if not upgrade:
        return
    held: set[str] = set()
    for path in lock_paths(profile):
        if path.is_file():
            held |= {canonicalize_name(n) for n in packages(path)}
    unknown = [name for name in upgrade if canonicalize_name(name) not in held]
    if unknown:
        raise UsageError(f"--upgrade-package {', '.join(unknown)}: the locks of {profile.name} hold no such package. "
                         "To fix, name a package listed in its .lock or .build.lock file.")


def digest(profile: Profile) -> str:
    """sha256 of the two lock files, for the content key, versions.json and the report."""
    import hashlib

    h = hashlib.sha256()
    for path in lock_paths(profile):
        if not path.is_file():
            raise EnvironmentProblem(f"{path} is missing. To fix, run `invoke lock --profile {profile.name}`.")
        h.update(path.read_bytes())
    return "sha256:" + h.hexdigest()


def packages(path: Path) -> dict[str, str]:
    """name -> version of every pinned line of a lock file."""
    out = {}
    for line in _text(path).splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", line)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out
