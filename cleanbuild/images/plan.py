"""The pure planner: (profile, options) -> an immutable Plan. No Docker, no network, no clock, no files written.

Everything a build does is decided here: what the prepare step puts in the build context, build arguments, image
names and their content keys, the containers validation and the smoke test run in, the release repository.
The steps (cleanbuild.images.steps) only carry it out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from cleanbuild.core import metadata
from cleanbuild.core.errors import UsageError
from cleanbuild.core.spec import DOCKER_DIR, REPO_ROOT, BuildSpec, RunSpec
from cleanbuild.images import buildx_argv, srcplan
from cleanbuild.images.components import (
    BUILD_ENVS,
    WHEEL_UNITS,
    Unit,
    make_unit,
    text_digest,
)
from cleanbuild.images.dockerfile import base_image, used_args
from cleanbuild.request.build import Build
from cleanbuild.request.checkout import Checkout
from cleanbuild.upstream import lock, lockfile
from cleanbuild.upstream.gitrepo import is_url, local_path
from cleanbuild.upstream.profiles import Profile

STEPS = ("preflight", "prepare", "wheels", "clean", "patch", "validate", "smoke", "tag", "report")
DEV_STEPS = (*STEPS[:4], "dev", *STEPS[4:])  # --src with Python-only edits: the overlay layer before the patches
IN_IMAGE = metadata.IN_IMAGE
# The stand-in base (offline profile) is `mmdebstrap SUITE` with these options and SOURCE_DATE_EPOCH set (every
# file's time, no host time or log in the tar: the same archive gives a byte-identical tar), then that tar added
# FROM scratch by the engine's own BuildKit (STANDIN_DOCKERFILE; SOURCE_DATE_EPOCH dates its config, so the same
# tar gives the same image ID, where `docker import` dates the image by the import). The hook drops the two files
# mmdebstrap copies from the host (its manual, "SOURCE_DATE_EPOCH"); the engine mounts its own at run time.
STANDIN_MMDEBSTRAP = ("--variant=minbase", "--format=tar", '--customize-hook=rm -f "$1"/etc/resolv.conf "$1"/etc/hostname')
STANDIN_DOCKERFILE = DOCKER_DIR / "standin" / "Dockerfile"
# The whole environment mmdebstrap runs with, and so every maintainer script in the chroot: none of the caller's but
# STANDIN_PASSED (where the rootfs is made, how the archive is reached: neither is in the tar) and SOURCE_DATE_EPOCH.
# PYTHONDONTWRITEBYTECODE=1: without it each Python a maintainer script starts writes timestamped .pyc for what it
# imports (py3compile's own debpython modules, setuptools' _distutils_hack through its .pth) and py3compile then skips
# those as up to date, so the tar followed the caller's environment. Measured 2026-12-05: in CI's fresh clone the
# session's build and the rebuild from nothing got two tars from one archive state, differing in exactly those six .pyc
# (timestamped against hash-checked); standin.make run twice, the variable unset then set, gave the same two tars.
# With it py3compile writes every .pyc, hash-checked (SOURCE_DATE_EPOCH); tests/integration/test_reproducible_digests.py
# rebuilds with the variable flipped and reads every .pyc header of the tar.
STANDIN_ENV = (("LC_ALL", "C.UTF-8"), ("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
               ("PYTHONDONTWRITEBYTECODE", "1"))
STANDIN_PASSED = ("TMPDIR", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


@dataclass(frozen=True)
class Standin:
    """The stand-in base (offline profile): mmdebstrap of a Debian suite with these packages at a fixed
    SOURCE_DATE_EPOCH, added FROM scratch by BuildKit. What the Debian archive serves that day is outside the pins:
    the prepare step records it (cleanbuild.images.standin)."""

    suite: str
    packages: tuple[str, ...]  # sorted
    epoch: int  # SOURCE_DATE_EPOCH of the tar and of the image's config
    dockerfile: str  # sha256 of STANDIN_DOCKERFILE's text

    def inputs(self) -> dict[str, object]:
        """Everything its bytes are made from but the archive's state: its key, and a label of the image."""
        return {"suite": self.suite, "packages": list(self.packages), "epoch": self.epoch,
                "mmdebstrap": list(STANDIN_MMDEBSTRAP), "env": dict(STANDIN_ENV), "dockerfile": self.dockerfile}

    def environment(self, caller: Mapping[str, str]) -> dict[str, str]:
        """mmdebstrap's whole environment (STANDIN_ENV): the caller's only for STANDIN_PASSED."""
        passed = {name: caller[name] for name in STANDIN_PASSED if name in caller}
        return {**passed, **dict(STANDIN_ENV), "SOURCE_DATE_EPOCH": str(self.epoch)}


@dataclass(frozen=True)
class Prepare:
    """What the prepare step puts in the wheels build context (and the stand-in base it builds), as data."""

    context: Path
    key: str
    lock_files: tuple[Path, Path]  # runtime, build
    lock_texts: tuple[tuple[str, str], ...]  # lock/<name> -> its text: requirement blocks only, never the header
    lock_problem: str | None  # the locks are missing or were made for other pins: the prepare step refuses
    lock_digest: str  # sha256 of the two lock files, as they are (header included): manifest, labels, report
    # (component, pip requirement, where from: an index URL or a folder) fetched into local/<component>/; where
    # from is not in the key (a copy of the index gives the same wheel, which the requirement's +local label names).
    local_wheels: tuple[tuple[str, str, str], ...]
    repos: tuple[tuple[str, Path], ...]  # (component, local repository) copied into local/repos/<component>.git
    standin: Standin | None  # the stand-in base, when the profile's base is one


@dataclass(frozen=True)
class Plan:
    profile: Profile
    options: Build
    base_image: str
    prepare: Prepare
    wheels: BuildSpec
    clean: BuildSpec
    patch: BuildSpec
    validate: RunSpec
    smoke: RunSpec | None
    smoke_skip_reason: str | None
    release_repo: str
    wheels_key: str
    units: tuple[Unit, ...] = ()  # every keyed image, in build order (cleanbuild.images.components)
    steps: tuple[str, ...] = field(default=STEPS)

    @property
    def builds(self) -> tuple[BuildSpec, ...]:
        dev = tuple(build_spec(u) for u in self.units if u.name == "dev")
        return (self.wheels, self.clean, *dev, self.patch)

    def unit(self, name: str) -> Unit:
        return next(u for u in self.units if u.name == name)

    def below(self, unit: Unit) -> Unit | None:
        """The unit of this plan whose image unit's target starts FROM (clean: the ATOM layer's), or None (the
        base image, scratch): what a found image of unit must be built on to share its layers byte for byte."""
        base = base_image(unit.dockerfile, unit.target, dict(unit.args))
        return next((u for u in self.units if u.image == base), None)

    def needs(self, unit: Unit) -> tuple[str, ...]:
        """The units of this plan whose images unit's build reads (a build argument its target reads names one's
        image; a target-less Dockerfile reads them all): what must be had before unit is built."""
        args = dict(unit.args)
        read = used_args(unit.dockerfile, unit.target, args) if unit.target else set(args)
        by_image = {u.image: u.name for u in self.units}
        return tuple(sorted({by_image[v] for k, v in unit.args if k in read and by_image.get(v, unit.name) != unit.name}))

    def step_units(self, step: str) -> tuple[Unit, ...]:
        """The units a build step makes: wheels (every component, then the assembly), clean (the three layers)."""
        names = {"wheels": (*BUILD_ENVS, *WHEEL_UNITS, "wheels"), "clean": CLEAN_UNITS, "dev": ("dev",),
                 "patch": ("candidate",)}[step]
        return tuple(u for u in self.units if u.name in names)

    @property
    def stem(self) -> str:
        return f"{self.options.arch.value}-{self.options.ck_mode}"

    def variant(self, unit: Unit) -> str:
        """The variant unit's tags name: the stem for one image per arch and CK mode, else "" (engine.last_inputs)."""
        return self.stem if unit.variant else ""

    @property
    def dirty(self) -> bool:
        """Built from a local checkout with changes (--src): labelled dirty, dev-tagged, never released."""
        return bool(srcplan.dirty(self.options.src))

    @property
    def src_contexts(self) -> tuple[tuple[Checkout, Path], ...]:
        """(checkout, build context) of each component whose wheel is built from a checkout."""
        return tuple((c, self.unit(c.component).context) for c in srcplan.on_route(self.options.src, "wheel"))


CLEAN_UNITS = ("venv", "atom-layer", "clean")
# Scripts only the clean image's stages run: no wheel's bytes depend on them, so they are in no wheel's key.
CLEAN_ONLY_SCRIPTS = frozenset({"install.sh", "compile_new.py", "smoke.py", "structure_check.py", "write_versions.py"})
COMMON_UNITS = ("torch", "triton", "deps", "sdists", "mori", "installer")  # what the venv layer installs


def make_plan(profile: Profile, options: Build) -> Plan:
    prep = _prepare(profile, options)
    base = standin_image(prep.standin) if prep.standin else profile.base_ref
    units = make_units(profile, options, base, prep)
    by = {u.name: u for u in units}
    smoke, skip = _smoke(profile, options)
    below = by["dev"] if "dev" in by else by["clean"]
    return Plan(
        profile=profile, options=options, base_image=base, prepare=prep,
        wheels=build_spec(by["wheels"]), clean=build_spec(by["clean"]),
        patch=patch_build(below.image, by["candidate"].image, warm=warm_args(profile, options)),
        validate=_validate(profile, options), smoke=smoke, smoke_skip_reason=skip,
        release_repo=metadata.release_repo(options.request.registry, options.arch.value, options.ck_mode),
        wheels_key=by["wheels"].key, units=units, steps=DEV_STEPS if "dev" in by else STEPS,
    )


def build_spec(unit: Unit) -> BuildSpec:
    return BuildSpec(unit.name, unit.dockerfile, unit.context, unit.target, unit.args, unit.image)


def make_units(profile: Profile, options: Build, base: str, prep: Prepare) -> tuple[Unit, ...]:
    """Every image of the build, keyed by its own inputs (cleanbuild.images.components), in build order."""
    args = _wheels_args(profile, options, base)
    locks = dict(prep.lock_texts)
    shared = {"python": profile.python, "scripts": _tree_digest(DOCKER_DIR / "scripts", skip=CLEAN_ONLY_SCRIPTS),
              "build-lock": text_digest(locks.get("build.txt", ""))}
    extra = {"deps": {"lock": text_digest(locks.get("deps.txt", ""))},
             "sdists": {"lock": text_digest(locks.get("sdists.txt", ""))},
             "aiter": {"lock": text_digest(locks.get("aiter-build.txt", ""))}}
    for name, requirement, _ in prep.local_wheels:  # where it is fetched from is not what it is
        extra.setdefault(name, {})["local-wheel"] = requirement
    for comp in profile.components:
        if comp.source == "git":
            extra.setdefault(comp.name, {})["repository"] = comp.repo
    reg, stem = options.request.registry, f"{options.arch.value}-{options.ck_mode}"
    keys: dict[str, str] = {}
    units: list[Unit] = []

    def add(unit: Unit) -> Unit:
        keys[unit.name] = unit.key
        units.append(unit)
        return unit

    wheels_df = (DOCKER_DIR / "Dockerfile.wheels", prep.context)
    for name, (target, arg) in BUILD_ENVS.items():  # the build environments first: every wheel starts FROM them
        unit = add(make_unit(name, (wheels_df[0], target, wheels_df[1]), args, keys, shared, f"{reg}/{name}:"))
        args[arg] = unit.image
    from_src = {c.component: c for c in srcplan.on_route(options.src, "wheel")}
    for checkout in from_src.values():  # its REF (so its key, and the manifest's source) names the snapshot
        args = srcplan.wheel_args(args, checkout)
    for name in WHEEL_UNITS:
        prefix = f"{reg}/wheel-{name}:" + (f"{stem}-" if name in ("aiter", "mori") else "")
        # aiter's build reads the deps images for the lock lines its environment installs: those lines are in
        # its key (extra["aiter"]), the rest of the closure is not.
        skip = frozenset({"DEPS_WHEELS", "SDISTS_WHEELS"}) if name == "aiter" else frozenset()
        context, own = wheels_df[1], extra.get(name, {})
        if name in from_src:  # its own context: the profile's, with the checkout's history as the repository
            context, own = srcplan.src_context(prep.context, from_src[name]), {**own, "repository": "checkout"}
        own_args = _aiter_args(args) if name == "aiter" else args
        unit = add(make_unit(name, (wheels_df[0], f"{name}-out", context), own_args, keys, own, prefix,
                             not_in_key=skip))
        args[f"{name.upper()}_WHEELS"] = unit.image
    assembly = {**args, "LOCK_SHA256": prep.lock_digest,
                "COMPONENT_KEYS": " ".join(f"{n}={keys[n]}" for n in WHEEL_UNITS)}
    add(make_unit("wheels", (wheels_df[0], "wheels", wheels_df[1]), assembly, keys, {}, f"{reg}/wheels:{stem}-"))
    clean_df = DOCKER_DIR / "Dockerfile.clean"
    root = options.repo_root
    layer = {"WHEELS_IMAGE": units[-1].image, "BASE_IMAGE": base, "GPU_ARCH": options.arch.value,
             "ENABLE_CK": "0" if options.request.ck_free else "1"}
    # The install layers run every script in docker/scripts (install.sh, compile_new.py, ... which the wheels
    # context leaves out), and the clean target runs the payload reader (validation/gpucode, .dockerignore).
    scripts = {"scripts": _tree_digest(DOCKER_DIR / "scripts"), "python": profile.python}
    venv = add(make_unit("venv", (clean_df, "venv", root), layer, keys,
                         {**scripts, **{f"unit:{n}": keys[n] for n in COMMON_UNITS}}, f"{reg}/layer-venv:",
                         not_in_key=frozenset({"WHEELS_IMAGE"})))
    atom = add(make_unit("atom-layer", (clean_df, "atom", root), {**layer, "VENV_IMAGE": venv.image}, keys,
                         {**scripts, "unit:atom": keys["atom"], "unit:installer": keys["installer"]},
                         f"{reg}/layer-atom:", not_in_key=frozenset({"WHEELS_IMAGE"})))
    # The clean image's labels name the profile (record.clean_labels): they are part of what it is.
    labelled = {**scripts, "profile": profile.name, "pinned": profile.pinned, "payload-reader": reader_digest()}
    clean = add(make_unit("clean", (clean_df, "clean", root), {**layer, "ATOM_IMAGE": atom.image}, keys, labelled,
                          f"{reg}/clean:{stem}-"))
    below = clean
    patches = {"patches": _tree_digest(REPO_ROOT / "patches"), "clamp-script": srcplan.clamp_digest()}
    if srcplan.on_route(options.src, "overlay"):
        below = add(make_unit("dev", (DOCKER_DIR / "Dockerfile.dev", None, srcplan.dev_context(options.request.cache_dir, options.src)),
                              {"IMAGE": clean.image}, keys, srcplan.dev_inputs(options.src), f"{reg}/dev:{stem}-"))
        patches["unit:dev"] = below.key  # IMAGE stands for the clean image's key in make_unit: name the dev layer's
    patches["warm-code"] = warm_code_digest()
    add(make_unit("candidate", (DOCKER_DIR / "Dockerfile.patch", None, REPO_ROOT),
                  {"IMAGE": below.image, **dict(warm_args(profile, options))}, keys, patches, f"{reg}/candidate:{stem}-"))
    return tuple(units)


def _aiter_args(args: dict[str, str]) -> dict[str, str]:
    """The build arguments of aiter's wheel. Under AITER_TRITON_ONLY=1 aiter's setup.py forces ENABLE_CK and
    PREBUILD_KERNELS off and compiles nothing for a GPU (it imports none of its JIT, which is what reads GPU_ARCHS):
    aiter 79366eb8, setup.py lines 24-27 and 200. So its wheel is one for every arch and CK mode (the four variants'
    wheels were byte-identical, 2026-12-03), and the unit gets one key: a matrix builds it once. Which arch and CK
    mode an image is stays in the wheels, clean and candidate images (their GPU_ARCH and ENABLE_CK)."""
    if args.get("AITER_TRITON_ONLY") != "1":
        return args
    return {**args, "GPU_ARCH": "", "ENABLE_CK": "0"}


# ---- the wheels build context -------------------------------------------------------------------------------

def _prepare(profile: Profile, options: Build) -> Prepare:
    runtime, build = lock.lock_paths(profile)
    wheels = tuple((c.name, f"{c.name}=={c.version}") for c in profile.components if c.source == "local")
    fetched = tuple((name, req, profile.read_from(name)) for name, req in wheels)
    repos = tuple((c.name, local_path(profile.read_from(c.name), options.repo_root)) for c in profile.components
                  if c.source == "git" and not is_url(profile.read_from(c.name)))
    standin = None
    if profile.base.standin:
        conf = profile.standin
        standin = Standin(conf.suite, tuple(sorted(conf.base_packages)), buildx_argv.SOURCE_DATE_EPOCH,
                          text_digest(STANDIN_DOCKERFILE.read_text()))
    texts, problem = lock_texts(profile, runtime, build)
    lock_digest = "sha256:" + hashlib.sha256(b"".join(p.read_bytes() for p in (runtime, build) if p.is_file())).hexdigest()
    key = _digest({"lock": dict(texts), "wheels": wheels, "python": profile.python,
                   "repos": [(n, str(p)) for n, p in repos],
                   "scripts": _tree_digest(DOCKER_DIR / "scripts", skip=CLEAN_ONLY_SCRIPTS)})
    context = options.request.cache_dir / "contexts" / f"{profile.name}-{key[:12]}"
    return Prepare(context, key, (runtime, build), texts, problem, lock_digest, fetched, repos, standin)


def lock_texts(profile: Profile, runtime: Path, build: Path) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """The lock/ folder of the build context, from the profile's two lock files: build.txt (the build tools),
    deps.txt (the closure, binary only), sdists.txt (what components.deps.build builds from its sdist) and
    aiter-build.txt (aiter's build environment: aiter's and torch's requirements closed over the lock). Requirement
    blocks only: the header names both pins and must not reach a stage. Also the reason to refuse the locks: missing,
    unreadable, or made for other aiter/ATOM commits than the profile pins."""
    if not (runtime.is_file() and build.is_file()):
        return (), f"{runtime if not runtime.is_file() else build} is missing. To fix, run `invoke lock --profile {profile.name}` and commit the file."
    try:
        text, build_text = runtime.read_text(), build.read_text()
        head = lockfile.header(text) or {}
        binary, source = lockfile.split(text, set(profile.component("deps").build))
        seeds = {Requirement(r).name for r in (*head.get("aiter", ()), *head.get("torch", ()))}
        aiter_env = lockfile.pins(lockfile.closure(text, seeds))
        build_lines = lockfile.package_lines(build_text)
    except (OSError, UnicodeDecodeError, ValueError, InvalidRequirement) as exc:
        return (), f"{runtime} cannot be read as a lock ({exc}). To fix, run `invoke lock --profile {profile.name}`."
    problem = None
    for name in ("aiter", "atom"):
        made, pinned = head.get(f"{name}_ref"), profile.component(name).ref
        if made != pinned:
            problem = (f"the lock was made for {name} {made}, the profile pins {pinned}. To fix, run `invoke lock "
                       f"--profile {profile.name}` and commit the lock with the pin.")
            break
    return (("build.txt", build_lines), ("deps.txt", binary), ("sdists.txt", source),
            ("aiter-build.txt", aiter_env)), problem


def standin_image(standin: Standin) -> str:
    """The stand-in base's name, keyed by what it is made from (suite, packages, epoch, the mmdebstrap options and
    the Dockerfile that adds the tar): known without Docker, so plans stay pure."""
    return f"atom-build/standin-base:{_digest(standin.inputs())[:12]}"


def repo_arg(component: str, repo: str) -> str:
    """The repository a git stage names (its origin, the manifest's and the SBOM's source): the URL, or the copy
    the prepare step put in the context when the profile names a local path."""
    return repo if is_url(repo) else f"/local/repos/{component}.git"


def from_arg(profile: Profile, component: str) -> str:
    """Where a git stage reads the commit (<NAME>_FROM, in no key): the prepare step's copy of a local repository
    or mirror copy, else "" (the repository itself)."""
    return "" if is_url(profile.read_from(component)) else f"/local/repos/{component}.git"


def _wheels_args(profile: Profile, options: Build, base: str) -> dict[str, str]:
    aiter = profile.component("aiter")
    args = {"BASE_IMAGE": base, "GPU_ARCH": options.arch.value, "ENABLE_CK": "0" if options.request.ck_free else "1",
            "PREBUILD_KERNELS": "1" if aiter.prebuild_kernels else "0",
            "AITER_TRITON_ONLY": "1" if aiter.triton_only else "0",
            "AITER_HSA_STANDIN": "1" if aiter.hsa_standin else "0",
            "MAX_JOBS": str(aiter.max_jobs)}
    for comp in profile.components:
        if comp.name == "deps":
            continue
        comp_args = comp.build_args()
        if comp.name in ("aiter", "atom"):
            comp_args.pop(f"{comp.name.upper()}_SOURCE", None)  # always git: the schema allows nothing else
        if comp.source == "git":
            comp_args[f"{comp.name.upper()}_REPO"] = repo_arg(comp.name, comp.repo)
            comp_args[f"{comp.name.upper()}_FROM"] = from_arg(profile, comp.name)
        if comp.name in ("torchvision", "torchaudio"):
            comp_args = {f"{comp.name.upper()}_VERSION": comp.version}
        if comp.name == "flydsl":
            continue  # exactly as aiter pins it: it comes with the lock, not as a build argument
        args.update(comp_args)
    return args


# ---- keys -----------------------------------------------------------------------------------------------------

def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


READER_DIR = REPO_ROOT / "validation"
# beside gpucode/: what .dockerignore lets in (`python -m validation.payload` and what it imports)
READER_FILES = ("__init__.py", "payload.py", "core/__init__.py", "core/archs.py", "core/usage.py")


def reader_digest() -> str:
    """What the clean target reads of validation/ (.dockerignore lets exactly this into its context)."""
    v = READER_DIR
    return text_digest(_tree_digest(v / "gpucode") + "".join((v / f).read_text() for f in READER_FILES))


def _tree_digest(folder: Path, skip: frozenset[str] = frozenset()) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                       and p.name not in skip):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


# ---- containers -----------------------------------------------------------------------------------------------

def _validate(profile: Profile, options: Build) -> RunSpec:
    device = options.request.device or profile.validation.device
    env = dict(profile.validation.env)
    if device == "cpu":
        env.setdefault("TRITON_INTERPRET", "1")
    if not profile.warm.enabled:
        env[WARM_OFF[0]] = WARM_OFF[1]  # first-use-compile: the build chose compiles at first use
    if options.request.allow_unservable:
        env[ALLOW_UNSERVABLE[0]] = ALLOW_UNSERVABLE[1]
    return validation_run(options, device, env)


def validation_run(options: Build, device: str, env: dict[str, str], extra: tuple[str, ...] = ()) -> RunSpec:
    """validation/ mounted read-only, no network, the JSON report written to the run folder; the GPU unless CPU."""
    return RunSpec(
        step="validate", name=f"atom-validate-{options.run_id}",
        command=("python", "-m", "validation", "--arch", options.arch.value, "--device", device,
                 "--ck-mode", options.ck_mode, "--json-file", "/out/validation.json", *extra),
        mounts=((str(options.repo_root / "validation"), f"{IN_IMAGE}/validation", "ro"), (str(options.run_dir), "/out", "rw")),
        env=tuple(sorted({"PYTHONPATH": IN_IMAGE, **env}.items())), gpu=device != "cpu", run_id=options.run_id,
    )


def _smoke(profile: Profile, options: Build) -> tuple[RunSpec | None, str | None]:
    if options.request.model is None:
        return None, "no --model given: nothing to generate tokens with"
    return smoke_run(profile, options), None


def smoke_run(profile: Profile, options: Build) -> RunSpec:
    """The profile's smoke: ATOM's own simple_inference counted by token ids (atom), or what a CPU proves (cpu)."""
    conf = profile.smoke
    mode = conf.mode
    if mode == "atom" and not conf.command:
        raise UsageError(f"profile {profile.name!r} has no smoke.command. To fix, add one to the profile.")
    command = [a.replace("{model}", "/model") for a in conf.command] if mode == "atom" else []
    return RunSpec(
        step="smoke", name=f"atom-smoke-{options.run_id}",
        command=("python", f"{IN_IMAGE}/smoke.py", mode, "--model", "/model",
                 "--min-tokens", str(conf.min_tokens), *(["--", *command] if command else [])),
        mounts=((str(options.request.model), "/model", "ro"),), gpu=conf.gpu, run_id=options.run_id,
    )


def patch_build(image: str, tag: str, only: tuple[str, ...] = (), warm: tuple[tuple[str, str], ...] = ()) -> BuildSpec:
    """The patch layer on top of any image (build-clean's candidate, or `invoke patch --image`), with the warm step's
    arguments (warm_args) where the plan has them."""
    args = [("IMAGE", image)] + ([("PATCH_ONLY", " ".join(only))] if only else []) + list(warm)
    return BuildSpec("patch", DOCKER_DIR / "Dockerfile.patch", REPO_ROOT, None, tuple(args), tag)


# What the validate step tells first-use-compile when the profile turned the warm step off
# (validation.checks.first_use_compile: a skip that says so, not a failure).
WARM_OFF = ("ATOM_BUILD_WARM", "off")
# --allow-unservable: validation's route check (validation.checks.servable) warns where it would fail.
ALLOW_UNSERVABLE = ("ATOM_BUILD_ALLOW_UNSERVABLE", "1")


def warm_of(spec: BuildSpec) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in spec.build_args if k.startswith("WARM_"))


# The validation modules the warm step runs (.dockerignore sends exactly these into the patch context): in the
# candidate's key, so a change to what compiles the cache rebuilds it, and nothing else of validation/ does.
WARM_CODE = ("__init__.py", "tritoncache.py", "core/__init__.py", "core/archs.py", "core/usage.py", "core/models.py",
             "core/device.py", "core/git_head.py", "core/interpreter.py", "aiterpkg/__init__.py", "aiterpkg/adapter.py",
             "aiterpkg/locate.py", "aiterpkg/triton_ops.py", "aiterpkg/tuned_lookup.py", "aiterpkg/tuned_csv.py",
             "warmcache", "gpucode")


def warm_args(profile: Profile, options: Build) -> tuple[tuple[str, str], ...]:
    """The warm step's build arguments: the profile's presets, --model's config.json (compact JSON) and the
    tensor-parallel sizes; none when the profile turns the step off (Dockerfile.patch then warms nothing)."""
    warm = profile.warm
    if not warm.enabled:
        return ()
    config = _model_config(options.request.model)
    tp = " ".join(str(t) for t in warm.tp)
    return (("WARM_MODELS", " ".join(warm.models)), ("WARM_MODEL_CONFIG", config), ("WARM_TP", tp))


def _model_config(model: Path | None) -> str:
    """--model's config.json as one line of JSON (a build argument), or "" without one."""
    path = model / "config.json" if model is not None else None
    if path is None or not path.is_file():
        return ""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--model {model}: its config.json is not readable JSON ({exc}). To fix, give a Hugging "
                         "Face model folder.") from None
    if not isinstance(data, dict):
        raise UsageError(f"--model {model}: its config.json is not a JSON object. To fix, give a Hugging Face model "
                         "folder.")
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def warm_code_digest() -> str:
    v = REPO_ROOT / "validation"
    return text_digest("".join(_tree_digest(v / name) if (v / name).is_dir() else (v / name).read_text()
                               for name in WARM_CODE))


# ---- display -----------------------------------------------------------------------------------------------

def commands(plan: Plan) -> list[list[str]]:
    """The exact commands build-clean runs, in order: one build per image (each only when no image with its key
    exists here or in the registry), then the containers and the tag."""
    o = plan.options
    out = [buildx_argv.argv(s, o, buildx_argv.load(Path(f"{s.step}.iid"))) for s in (build_spec(u) for u in plan.units)]
    out.append(plan.validate.argv(plan.patch.image, ("<GPU flags: /dev/kfd, chosen render nodes, their GIDs>",)))
    if plan.smoke:
        out.append(plan.smoke.argv(plan.patch.image, ("<GPU flags>",)))
    tag = srcplan.dev_tag(o.request.user, o.src) if plan.dirty else "<tag from the image's versions>"
    out.append(["docker", "tag", plan.patch.image, f"{plan.release_repo}:{tag}"])
    return out
