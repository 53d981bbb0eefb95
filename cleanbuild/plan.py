"""The pure planner: (profile, arch, options) -> an immutable BuildPlan. No Docker, no network, no clock.

Everything a build does is decided here: build arguments, image names and their content keys, the containers
validation and the smoke test run in. The executor (cleanbuild.pipeline) only carries it out.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .arch import Arch
from .errors import UsageError
from .profiles import Profile

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKER_DIR = "docker"
STEPS = ("preflight", "wheels", "clean", "patch", "validate", "smoke", "tag", "report")
GPU_DEVICES = ("/dev/kfd", "/dev/dri")
GPU_GROUPS = ("video", "render")
IN_IMAGE = "/opt/atom-build"


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
    context: Path | None = None  # build context for `local` sources (the offline profile's prepared folder)
    base_image: str | None = None  # overrides the profile's base (the offline stand-in, resolved at run time)
    validation_device: str | None = None
    work_dir: Path | None = None  # per-run scratch: iid files, validation and smoke output (mounted at /out)

    @property
    def run_dir(self) -> Path:
        return self.work_dir or self.repo_root / ".cache" / "runs" / self.run_id

    @property
    def ck_label(self) -> str:
        return "ckfree" if self.ck_free else "ck"


@dataclass(frozen=True)
class BuildSpec:
    """One `docker buildx build`. `image` is the name it is loaded under."""

    step: str
    dockerfile: Path
    context: Path
    target: str | None
    build_args: tuple[tuple[str, str], ...]
    image: str
    labels: tuple[tuple[str, str], ...] = ()

    def argv(self, *, builder: str | None, progress: str, ca_bundle: Path | None,
             iidfile: Path | None = None, metadata_file: Path | None = None,
             extra_labels: tuple[tuple[str, str], ...] = ()) -> list[str]:
        argv = ["docker", "buildx", "build"]
        if builder:
            argv += ["--builder", builder]
        argv += ["--progress", progress, "--network", "host", "--load", "-f", str(self.dockerfile)]
        if self.target:
            argv += ["--target", self.target]
        for key, value in self.build_args:
            argv += ["--build-arg", f"{key}={value}"]
        for key, value in (*self.labels, *extra_labels):
            argv += ["--label", f"{key}={value}"]
        if ca_bundle:
            argv += ["--secret", f"id=ca,src={ca_bundle}"]
        if iidfile:
            argv += ["--iidfile", str(iidfile)]
        if metadata_file:
            argv += ["--metadata-file", str(metadata_file)]
        return [*argv, "-t", self.image, str(self.context)]


@dataclass(frozen=True)
class RunSpec:
    """One container run, as data: the executor hands it to the docker SDK; argv() is for people."""

    step: str
    name: str
    command: tuple[str, ...]
    mounts: tuple[tuple[str, str, str], ...] = ()  # (host path, container path, "ro"|"rw")
    env: tuple[tuple[str, str], ...] = ()
    gpu: bool = False
    network: str = "none"
    workdir: str = IN_IMAGE

    def argv(self, image: str = "IMAGE") -> list[str]:
        argv = ["docker", "run", "--rm", "--name", self.name, "--network", self.network]
        if self.gpu:
            argv += [x for d in GPU_DEVICES for x in ("--device", d)]
            argv += [x for g in GPU_GROUPS for x in ("--group-add", g)]
            argv += ["--ipc=host", "--security-opt", "seccomp=unconfined"]
        for host, inside, mode in self.mounts:
            argv += ["-v", f"{host}:{inside}:{mode}"]
        for key, value in self.env:
            argv += ["-e", f"{key}={value}"]
        return [*argv, "-w", self.workdir, image, *self.command]


@dataclass(frozen=True)
class Plan:
    profile: Profile
    options: Options
    python: str
    base_image: str
    wheels_key: str
    wheels: BuildSpec
    clean: BuildSpec
    patch: BuildSpec
    validate: RunSpec
    smoke: RunSpec | None
    smoke_skip_reason: str | None
    release_repo: str
    steps: tuple[str, ...] = field(default=STEPS)

    @property
    def builds(self) -> tuple[BuildSpec, ...]:
        return (self.wheels, self.clean, self.patch)


def make_plan(profile: Profile, options: Options) -> Plan:
    root = options.repo_root
    docker_dir = root / DOCKER_DIR
    base = options.base_image or profile.base_ref
    wheels_args = _wheels_args(profile, options, base)
    key = content_key(docker_dir / "Dockerfile.wheels", docker_dir / "scripts", wheels_args, profile.python)
    stem = f"{options.arch.value}-{options.ck_label}"
    wheels_image = f"{options.registry}/wheels:{stem}-{key[:12]}"
    clean_args = {"WHEELS_IMAGE": wheels_image, "BASE_IMAGE": base, "GPU_ARCH": options.arch.value,
                  "ENABLE_CK": "0" if options.ck_free else "1"}
    clean_key = content_key(docker_dir / "Dockerfile.clean", docker_dir / "scripts", clean_args, profile.python)
    clean_image = f"{options.registry}/clean:{stem}-{clean_key[:12]}"
    # Offline: a prepared folder with local/<component> sources (and docker/scripts); else the repo root,
    # trimmed by .dockerignore to what the Dockerfiles read (docker/scripts, patches).
    context = options.context if profile.offline else root
    if profile.offline and context is None:
        raise UsageError("the offline profile needs its prepared sources. To fix, run `invoke offline-sources` or pass --context DIR.")
    smoke, skip = _smoke(profile, options)
    return Plan(
        profile=profile, options=options, python=profile.python, base_image=base, wheels_key=key,
        wheels=BuildSpec("wheels", docker_dir / "Dockerfile.wheels", Path(context), "wheels",
                         tuple(sorted(wheels_args.items())), wheels_image),
        clean=BuildSpec("clean", docker_dir / "Dockerfile.clean", root, "clean",
                        tuple(sorted(clean_args.items())), clean_image),
        patch=BuildSpec("patch", docker_dir / "Dockerfile.patch", root, None, (("IMAGE", clean_image),),
                        f"{options.registry}/candidate:{stem}-{options.run_id}"),
        validate=_validate(profile, options),
        smoke=smoke, smoke_skip_reason=skip,
        # The tag convention carries no arch, so the repository does: one per (arch, CK mode).
        release_repo=f"{options.registry}/atom-{stem.replace('-ck', '') if not options.ck_free else stem}",
    )


def _wheels_args(profile: Profile, options: Options, base: str) -> dict[str, str]:
    aiter = profile.component("aiter").fields
    args = {
        "BASE_IMAGE": base,
        "GPU_ARCH": options.arch.value,
        "ENABLE_CK": "0" if options.ck_free else "1",
        "PREBUILD_KERNELS": "1" if aiter.get("prebuild_kernels", True) else "0",
    }
    for comp in profile.components:
        args.update(comp.build_args())
    return args


def content_key(dockerfile: Path, scripts: Path, args: dict[str, str], python: str) -> str:
    """sha256 of what decides an image's content: the Dockerfile, the scripts it copies, the pins, Python."""
    h = hashlib.sha256()
    h.update(_read(dockerfile))
    for script in sorted(scripts.glob("*.py")) if scripts.is_dir() else ():
        h.update(script.name.encode() + b"\0" + script.read_bytes())
    h.update(json.dumps({"args": args, "python": python}, sort_keys=True).encode())
    return h.hexdigest()


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.is_file() else b""


def _validate(profile: Profile, options: Options) -> RunSpec:
    conf = profile.section("validation")
    device = options.validation_device or str(conf.get("device", "cuda"))
    env = {str(k): str(v) for k, v in dict(conf.get("env", {})).items()}
    return validation_run(options.repo_root, options.arch.value, device, options.run_id, options.run_dir, env)


def validation_run(repo_root: Path, arch: str, device: str, run_id: str, out_dir: Path,
                   env: dict[str, str] | None = None, extra: tuple[str, ...] = ()) -> RunSpec:
    """validation/ mounted read-only, no network, the JSON report written to out_dir; GPU flags unless CPU."""
    return RunSpec(
        step="validate",
        name=f"atom-validate-{run_id}",
        command=("python", "-m", "validation", "--arch", arch, "--device", device,
                 "--json", "/out/validation.json", *extra),
        mounts=((str(repo_root / "validation"), f"{IN_IMAGE}/validation", "ro"), (str(out_dir), "/out", "rw")),
        env=tuple(sorted({"PYTHONPATH": IN_IMAGE, **(env or {})}.items())),
        gpu=device != "cpu",
    )


def _smoke(profile: Profile, options: Options) -> tuple[RunSpec | None, str | None]:
    if options.model is None:
        return None, "no --model given: nothing to generate tokens with"
    return smoke_run(profile, options.model, options.run_id, options.run_dir), None


def smoke_run(profile: Profile, model: Path, run_id: str, out_dir: Path) -> RunSpec:
    """The profile's smoke command, wrapped by the image's smoke.py that counts the new tokens."""
    conf = profile.section("smoke")
    raw = conf.get("command", ())
    template = shlex.split(raw) if isinstance(raw, str) else [str(a) for a in raw]
    if not template:
        raise UsageError(f"profile {profile.name!r} has no smoke.command. To fix, add one to the profile.")
    command = [a.replace("{model}", "/model") for a in template]
    min_tokens = str(conf.get("min_tokens", 10))
    return RunSpec(
        step="smoke",
        name=f"atom-smoke-{run_id}",
        command=("python", f"{IN_IMAGE}/smoke.py", "--model", "/model", "--min-tokens", min_tokens, "--", *command),
        mounts=((str(model), "/model", "ro"), (str(out_dir), "/out", "rw")),
        gpu=bool(conf.get("gpu", True)),
    )


def patch_build(root: Path, image: str, tag: str, only: tuple[str, ...] = ()) -> BuildSpec:
    """The patch layer on top of any image (`invoke patch --image`); build-clean uses Plan.patch."""
    args = [("IMAGE", image)] + ([("PATCH_ONLY", " ".join(only))] if only else [])
    return BuildSpec("patch", root / DOCKER_DIR / "Dockerfile.patch", root, None, tuple(args), tag)


def dockerfile_args(dockerfile: Path) -> set[str]:
    """The ARG names a Dockerfile declares (global and per stage)."""
    names = set()
    for line in dockerfile.read_text().splitlines():
        m = re.match(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)", line)
        if m:
            names.add(m.group(1))
    return names


def check_build_args(spec: BuildSpec) -> None:
    """A build argument the Dockerfile does not declare is a typo or a stale pin: refuse it."""
    declared = dockerfile_args(spec.dockerfile)
    unknown = sorted(k for k, _ in spec.build_args if k not in declared)
    if unknown:
        raise UsageError(
            f"{spec.dockerfile.name} does not consume build argument(s) {', '.join(unknown)}. "
            "To fix, remove them from the profile or declare them with ARG in the Dockerfile."
        )


def commands(plan: Plan) -> list[list[str]]:
    """The exact commands build-clean runs, in order (images by name; at run time the patch runs by ID)."""
    opts = plan.options
    out = [s.argv(builder=opts.builder, progress=opts.progress, ca_bundle=opts.ca_bundle,
                  iidfile=Path(f"{s.step}.iid")) for s in plan.builds]
    out.append(plan.validate.argv(plan.patch.image))
    if plan.smoke:
        out.append(plan.smoke.argv(plan.patch.image))
    out.append(["docker", "tag", plan.patch.image, f"{plan.release_repo}:<tag from the image's versions>"])
    return out

