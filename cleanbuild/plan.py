"""The pure planner: (profile, options) -> an immutable Plan. No Docker, no network, no clock, no files written.

Everything a build does is decided here: what the prepare step puts in the build context, build arguments, image
names and their content keys, the containers validation and the smoke test run in, the release repository.
The steps (cleanbuild.steps) only carry it out.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from validation.archs import CK_MODES

from . import lock, metadata
from .arch import Arch
from .errors import UsageError
from .gitrepo import is_url, local_path
from .profiles import Profile

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKER_DIR = REPO_ROOT / "docker"
STEPS = ("preflight", "prepare", "wheels", "clean", "patch", "validate", "smoke", "tag", "report")
IN_IMAGE = metadata.IN_IMAGE
STANDIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Options:
    arch: Arch
    ck_free: bool = False
    builder: str | None = None
    progress: str = "auto"
    ca_bundle: Path | None = None
    model: Path | None = None
    allow_no_smoke: bool = False
    user: str = "user"
    date: str = "19700101"
    registry: str = "atom-build"
    run_id: str = "plan"
    repo_root: Path = REPO_ROOT
    cache_dir: Path = REPO_ROOT / ".cache"
    validation_device: str | None = None  # `nox -s validate --device`: overrides the profile's
    gpus: tuple[int, ...] | None = None  # --gpu: the GPUs GPU steps get (None: all)
    container_user: str | None = None  # --user for GPU containers (None: the image's user)
    cache: str = "auto"  # build cache through the registry: auto (inline when the registry is remote), inline, registry, none

    @property
    def remote(self) -> bool:
        """A registry prefix with a host (registry.example:5000/atom-build): images are pulled and pushed there."""
        first, sep, _ = self.registry.partition("/")
        return bool(sep) and ("." in first or ":" in first or first == "localhost")

    @property
    def run_dir(self) -> Path:
        return self.cache_dir / "runs" / self.run_id

    @property
    def ck_mode(self) -> str:
        return CK_MODES[1] if self.ck_free else CK_MODES[0]


@dataclass(frozen=True)
class BuildSpec:
    """One `docker buildx build`. `image` is the name it is loaded under."""

    step: str
    dockerfile: Path
    context: Path
    target: str | None
    build_args: tuple[tuple[str, str], ...]
    image: str

    def argv(self, *, builder: str | None, progress: str, ca_bundle: Path | None, iidfile: Path | None = None,
             labels: tuple[tuple[str, str], ...] = (), load: bool = True, cache: tuple[str, ...] = ()) -> list[str]:
        argv = ["docker", "buildx", "build"]
        if builder:
            argv += ["--builder", builder]
        argv += ["--progress", progress, "--network", "host", "-f", str(self.dockerfile), *cache]
        argv += ["--load"] if load else []
        if self.target:
            argv += ["--target", self.target]
        for key, value in self.build_args:
            argv += ["--build-arg", f"{key}={value}"]
        for key, value in labels:
            argv += ["--label", f"{key}={value}"]
        if ca_bundle:
            argv += ["--secret", f"id=ca,src={ca_bundle}"]
        if iidfile:
            argv += ["--iidfile", str(iidfile)]
        return [*argv, "-t", self.image, str(self.context)]


@dataclass(frozen=True)
class RunSpec:
    """One container run, as data: the engine hands it to the docker SDK; argv() is for people."""

    step: str
    name: str
    command: tuple[str, ...]
    mounts: tuple[tuple[str, str, str], ...] = ()  # (host path, container path, "ro"|"rw")
    env: tuple[tuple[str, str], ...] = ()
    gpu: bool = False
    network: str = "none"
    workdir: str = IN_IMAGE
    run_id: str = ""

    def argv(self, image: str = "IMAGE", gpu_flags: tuple[str, ...] = ()) -> list[str]:
        argv = ["docker", "run", "--rm", "--name", self.name, "--network", self.network]
        if self.run_id:
            argv += ["--label", f"{metadata.RUN_LABEL}={self.run_id}"]
        argv += list(gpu_flags) if self.gpu else []
        for host, inside, mode in self.mounts:
            argv += ["--mount", f"type=bind,source={host},target={inside}" + (",readonly" if mode == "ro" else "")]
        for key, value in self.env:
            argv += ["-e", f"{key}={value}"]
        return [*argv, "-w", self.workdir, image, *self.command]


@dataclass(frozen=True)
class Prepare:
    """What the prepare step puts in the wheels build context (and the stand-in base it builds), as data."""

    context: Path
    key: str
    lock_files: tuple[Path, Path]  # runtime, build
    local_wheels: tuple[tuple[str, str], ...]  # (component, pip requirement) fetched into local/<component>/
    repos: tuple[tuple[str, Path], ...]  # (component, local repository) copied into local/repos/<component>.git
    standin: tuple[tuple[str, object], ...] | None  # (suite, packages, PATH) of the stand-in base, when it is one


@dataclass(frozen=True)
class Plan:
    profile: Profile
    options: Options
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
    steps: tuple[str, ...] = field(default=STEPS)

    @property
    def builds(self) -> tuple[BuildSpec, ...]:
        return (self.wheels, self.clean, self.patch)

    @property
    def stem(self) -> str:
        return f"{self.options.arch.value}-{self.options.ck_mode}"


def make_plan(profile: Profile, options: Options) -> Plan:
    prep = _prepare(profile, options)
    base = standin_image(prep.standin) if prep.standin else profile.base_ref
    wheels_args = _wheels_args(profile, options, base)
    wheels_key = content_key(DOCKER_DIR / "Dockerfile.wheels", wheels_args, profile.python, prep.key)
    stem = f"{options.arch.value}-{options.ck_mode}"
    wheels_image = f"{options.registry}/wheels:{stem}-{wheels_key[:12]}"
    clean_args = {"WHEELS_IMAGE": wheels_image, "BASE_IMAGE": base, "GPU_ARCH": options.arch.value,
                  "ENABLE_CK": "0" if options.ck_free else "1"}
    clean_key = content_key(DOCKER_DIR / "Dockerfile.clean", clean_args, profile.python, "")
    clean_image = f"{options.registry}/clean:{stem}-{clean_key[:12]}"
    patch_key = content_key(DOCKER_DIR / "Dockerfile.patch", {"IMAGE": clean_image}, profile.python,
                            _tree_digest(REPO_ROOT / "patches"))
    smoke, skip = _smoke(profile, options)
    return Plan(
        profile=profile, options=options, base_image=base, prepare=prep,
        wheels=BuildSpec("wheels", DOCKER_DIR / "Dockerfile.wheels", prep.context, "wheels",
                         tuple(sorted(wheels_args.items())), wheels_image),
        clean=BuildSpec("clean", DOCKER_DIR / "Dockerfile.clean", options.repo_root, "clean",
                        tuple(sorted(clean_args.items())), clean_image),
        patch=patch_build(clean_image, f"{options.registry}/candidate:{stem}-{patch_key[:12]}"),
        validate=_validate(profile, options), smoke=smoke, smoke_skip_reason=skip,
        release_repo=metadata.release_repo(options.registry, options.arch.value, options.ck_mode),
        wheels_key=wheels_key,
    )


# ---- the wheels build context -------------------------------------------------------------------------------

def _prepare(profile: Profile, options: Options) -> Prepare:
    runtime, build = lock.lock_paths(profile)
    wheels = tuple((c.name, f"{c.name}=={c.get('version')}") for c in profile.components if c.source == "local")
    repos = tuple((c.name, local_path(str(c.get("repo")), options.repo_root)) for c in profile.components
                  if c.source == "git" and not is_url(str(c.get("repo"))))
    standin = None
    if profile.base.get("standin"):
        table = profile.section("standin")
        standin = (("suite", str(table.get("suite", "bookworm"))),
                   ("packages", tuple(sorted(table.get("base_packages", ())))), ("path", STANDIN_PATH))
    key = _digest({"lock": [_file_digest(runtime), _file_digest(build)], "wheels": wheels, "python": profile.python,
                   "repos": [(n, str(p)) for n, p in repos], "scripts": _tree_digest(DOCKER_DIR / "scripts")})
    context = options.cache_dir / "contexts" / f"{profile.name}-{key[:12]}"
    return Prepare(context, key, (runtime, build), wheels, repos, standin)


def standin_image(standin: tuple[tuple[str, object], ...]) -> str:
    """The stand-in base's name, keyed by (suite, packages, PATH): known without Docker, so plans stay pure."""
    return f"atom-build/standin-base:{_digest(dict(standin))[:12]}"


def repo_arg(component: str, repo: str) -> str:
    """The repository a git stage fetches from: the URL, or the copy the prepare step put in the context."""
    return repo if is_url(repo) else f"/local/repos/{component}.git"


def _wheels_args(profile: Profile, options: Options, base: str) -> dict[str, str]:
    aiter = profile.component("aiter")
    args = {"BASE_IMAGE": base, "GPU_ARCH": options.arch.value, "ENABLE_CK": "0" if options.ck_free else "1",
            "PREBUILD_KERNELS": "1" if aiter.get("prebuild_kernels", True) else "0",
            "AITER_TRITON_ONLY": "1" if aiter.get("triton_only", False) else "0",
            "MAX_JOBS": str(aiter.get("max_jobs", 0)),
            "DEPS_BUILD": " ".join(profile.component("deps").get("build", ()) or ())}
    for comp in profile.components:
        if comp.name == "deps":
            continue
        comp_args = comp.build_args()
        if comp.name in ("aiter", "atom"):
            comp_args.pop(f"{comp.name.upper()}_SOURCE", None)  # always git: the schema allows nothing else
        if comp.source == "git":
            comp_args[f"{comp.name.upper()}_REPO"] = repo_arg(comp.name, str(comp.get("repo")))
        if comp.name in ("torchvision", "torchaudio"):
            comp_args = {f"{comp.name.upper()}_VERSION": str(comp.get("version", ""))}
        if comp.name == "flydsl":
            continue  # exactly as aiter pins it: it comes with the lock, not as a build argument
        args.update(comp_args)
    return args


# ---- keys -----------------------------------------------------------------------------------------------------

def content_key(dockerfile: Path, args: dict[str, str], python: str, inputs: str) -> str:
    """sha256 of everything a build reads: the Dockerfile, every helper script, the arguments, Python, inputs."""
    return _digest({"dockerfile": _file_digest(dockerfile), "scripts": _tree_digest(DOCKER_DIR / "scripts"),
                    "args": args, "python": python, "inputs": inputs})


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"


def _tree_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


# ---- containers -----------------------------------------------------------------------------------------------

def _validate(profile: Profile, options: Options) -> RunSpec:
    conf = profile.section("validation")
    device = options.validation_device or str(conf.get("device", "cuda"))
    env = {str(k): str(v) for k, v in dict(conf.get("env", {})).items()}
    if device == "cpu":
        env.setdefault("TRITON_INTERPRET", "1")
    return validation_run(options, device, env)


def validation_run(options: Options, device: str, env: dict[str, str], extra: tuple[str, ...] = ()) -> RunSpec:
    """validation/ mounted read-only, no network, the JSON report written to the run folder; the GPU unless CPU."""
    return RunSpec(
        step="validate", name=f"atom-validate-{options.run_id}",
        command=("python", "-m", "validation", "--arch", options.arch.value, "--device", device,
                 "--ck-mode", options.ck_mode, "--json", "/out/validation.json", *extra),
        mounts=((str(options.repo_root / "validation"), f"{IN_IMAGE}/validation", "ro"), (str(options.run_dir), "/out", "rw")),
        env=tuple(sorted({"PYTHONPATH": IN_IMAGE, **env}.items())), gpu=device != "cpu", run_id=options.run_id,
    )


def _smoke(profile: Profile, options: Options) -> tuple[RunSpec | None, str | None]:
    if options.model is None:
        return None, "no --model given: nothing to generate tokens with"
    return smoke_run(profile, options), None


def smoke_run(profile: Profile, options: Options) -> RunSpec:
    """The profile's smoke: ATOM's own simple_inference counted by token ids (atom), or what a CPU proves (cpu)."""
    conf = profile.section("smoke")
    mode = str(conf.get("mode", "atom"))
    raw = conf.get("command", ())
    template = shlex.split(raw) if isinstance(raw, str) else [str(a) for a in raw]
    if mode == "atom" and not template:
        raise UsageError(f"profile {profile.name!r} has no smoke.command. To fix, add one to the profile.")
    command = [a.replace("{model}", "/model") for a in template] if mode == "atom" else []
    return RunSpec(
        step="smoke", name=f"atom-smoke-{options.run_id}",
        command=("python", f"{IN_IMAGE}/smoke.py", mode, "--model", "/model",
                 "--min-tokens", str(conf.get("min_tokens", 10)), *(["--", *command] if command else [])),
        mounts=((str(options.model), "/model", "ro"),), gpu=bool(conf.get("gpu", True)), run_id=options.run_id,
    )


def cache_flags(spec: BuildSpec, options: Options) -> tuple[str, ...]:
    """Build cache through the registry. The docker driver (the engine's own BuildKit) can only export the cache
    inline, in the image it pushes (the final image's layers); a docker-container or remote builder can export
    every stage's cache to the registry (mode=max). Each build reads the content-keyed image and its stem's
    `-latest` tag, so a changed key still starts from the last build's layers."""
    if options.cache == "none" or (options.cache == "auto" and not options.remote):
        return ()
    repo, _, tag = spec.image.rpartition(":")
    stem = tag.rsplit("-", 1)[0]
    if options.cache == "registry":
        ref = f"type=registry,ref={repo}:{stem}-buildcache"
        return ("--cache-from", ref, "--cache-to", f"{ref},mode=max")
    return ("--cache-to", "type=inline", "--cache-from", spec.image, "--cache-from", f"{repo}:{stem}-latest")


def patch_build(image: str, tag: str, only: tuple[str, ...] = ()) -> BuildSpec:
    """The patch layer on top of any image (build-clean's candidate, or `invoke patch --image`)."""
    args = [("IMAGE", image)] + ([("PATCH_ONLY", " ".join(only))] if only else [])
    return BuildSpec("patch", DOCKER_DIR / "Dockerfile.patch", REPO_ROOT, None, tuple(args), tag)


# ---- checks and display ---------------------------------------------------------------------------------------

def dockerfile_args(dockerfile: Path) -> set[str]:
    """The ARG names a Dockerfile declares (global and per stage)."""
    return {m.group(1) for line in dockerfile.read_text().splitlines()
            if (m := re.match(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)", line))}


def check_build_args(spec: BuildSpec) -> None:
    """A build argument the Dockerfile does not declare is a typo or a stale pin: refuse it."""
    unknown = sorted(k for k, _ in spec.build_args if k not in dockerfile_args(spec.dockerfile))
    if unknown:
        raise UsageError(f"{spec.dockerfile.name} does not consume build argument(s) {', '.join(unknown)}. "
                         "To fix, remove them from the profile or declare them with ARG in the Dockerfile.")


def commands(plan: Plan) -> list[list[str]]:
    """The exact commands build-clean runs, in order (images by name; at run time the patch builds FROM an ID)."""
    o = plan.options
    out = [s.argv(builder=o.builder, progress=o.progress, ca_bundle=o.ca_bundle, iidfile=Path(f"{s.step}.iid"))
           for s in plan.builds]
    out.append(plan.validate.argv(plan.patch.image, ("<GPU flags: /dev/kfd, chosen render nodes, their GIDs>",)))
    if plan.smoke:
        out.append(plan.smoke.argv(plan.patch.image, ("<GPU flags>",)))
    out.append(["docker", "tag", plan.patch.image, f"{plan.release_repo}:<tag from the image's versions>"])
    return out
