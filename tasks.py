"""Invoke tasks: one per build step, plus build-clean for the whole pipeline, pins, lock and audit.

Tasks stay thin: parse flags, call cleanbuild.commands, print. Failures end in one line and a fixed exit code
(cleanbuild.errors); --debug shows the traceback. Site defaults live in invoke.yaml under `cleanbuild:`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import invoke
from invoke import Collection, Exit, ParseError, Program


def _check_site_files() -> None:
    """invoke parses its config files after importing this file, and a YAML error there is a traceback: parse
    invoke.yaml, INVOKE_RUNTIME_CONFIG and any -f FILE first, and stop with one line (exit 2)."""
    from cleanbuild.errors import UsageError
    from cleanbuild.settings import site_file

    given = [sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a in ("-f", "--config")]
    files = [(Path(__file__).with_name("invoke.yaml"), False),
             *[(Path(p), True) for p in [os.environ.get("INVOKE_RUNTIME_CONFIG"), *given] if p]]
    for path, named in files:
        try:
            site_file(path, given=named)
        except UsageError as exc:
            if "--debug" in sys.argv:
                raise
            sys.stderr.write(f"error: {exc}\n")
            sys.exit(2)


_check_site_files()

from cleanbuild import boundary, commands, refs  # noqa: E402 - after the site-config check above
from cleanbuild.settings import FLAGS, Request, parse_arch, resolve  # noqa: E402


class TaskProgram(Program):
    """invoke's Program with README's exit codes: its own parse errors (an unknown flag, a flag without its value)
    are bad input, exit 2 and one line, not invoke's exit 1."""

    def parse_core(self, argv) -> None:
        with _parse_errors():
            super().parse_core(argv)

    def parse_tasks(self) -> None:
        with _parse_errors():
            super().parse_tasks()


@contextlib.contextmanager
def _parse_errors() -> Iterator[None]:
    try:
        yield
    except ParseError as exc:
        raise Exit(f"error: the command line failed to parse because {exc} To fix, see `invoke --help TASK` "
                   "or `invoke --list`.", code=2) from None


def _adopt_running_program() -> None:
    """`invoke` (and `python -m invoke`) run invoke.main's Program, which imports this file before it parses the
    task flags: from here on that Program follows TaskProgram's exit codes. Core flags parsed before this import
    (`invoke --nosuch`) keep invoke's own handling."""
    main = sys.modules.get("invoke.main")
    running = getattr(main, "program", None)
    if type(running) is Program:
        running.__class__ = TaskProgram


_adopt_running_program()
# One meaning per short flag across every task: none are generated (invoke's automatic ones gave -d three
# meanings and ca_bundle a nameless "--" flag).
task = functools.partial(invoke.task, auto_shortflags=False)

COMMON_HELP = {
    "arch": "gfx942 or gfx950 (build-clean, plan, wheels, clean also take gfx942,gfx950); detected on the host when omitted",
    "ck_free": "build aiter without CK (ENABLE_CK=0) and set ATOM_CK_FREE=1 in the image",
    "profile": "build profile: default (real ROCm host), offline (CPU stand-in), or a .toml path",
    "set": "override one profile entry, KEY=VALUE (repeatable), e.g. components.aiter.ref=0123abc",
    "builder": "buildx builder to build on (e.g. a remote BuildKit)",
    "ca_bundle": "PEM CA bundle for pip/apt/git inside builds, as a BuildKit secret (never a layer); default auto: "
                 "what this host trusts; none: no bundle",
    "progress": "BuildKit progress output: auto, plain, tty, quiet",
    "gpu": "GPU indices for GPU steps, e.g. 0 or 0,1 (default: every GPU; invoke.yaml cleanbuild.gpus)",
    "user_id": "run GPU containers as this user (UID[:GID]); default: the image's user",
    "registry": "image name prefix HOST[:PORT]/PATH: with a host, images are pulled and pushed there by content key "
                "(default: invoke.yaml cleanbuild.registry, atom-build)",
    "src": "build from a local checkout as it is on disk, COMPONENT=PATH (aiter or atom; repeatable): Python/CSV/JSON "
           "edits of the package become a layer over the clean image, anything else rebuilds that wheel; dev tag only",
    "dry_run": "print what would run, run nothing",
    "debug": "show the traceback on failure",
}


def cli_task(*, iterable: tuple[str, ...] = (), **extra: str):
    """One declaration per flag: the task's signature names it (with its default), its help is COMMON_HELP's or
    the task's own (extra), and _request takes it into the request by the same name. Wrapped in _guard."""

    def wrap(fn):
        names = [p.rstrip("_") for p in list(inspect.signature(fn).parameters)[1:]]
        return task(iterable=list(iterable), help={n: extra.get(n) or COMMON_HELP[n] for n in names})(_guard(fn))

    return wrap


def _guard(fn):
    """The error boundary (cleanbuild.boundary): one line and README's exit code instead of a traceback (unless
    --debug), for our errors and the OS, JSON, TOML and packaging errors a user can provoke; stdout flushed inside."""

    @functools.wraps(fn)
    def wrapper(c, *args, **kwargs):
        failed: list[str] = []
        result = boundary.guarded(lambda: fn(c, *args, **kwargs), debug=bool(kwargs.get("debug")),
                                  report=lambda error: failed.append(f"error: {error}"))
        if failed:
            raise Exit(failed[0], code=result)
        if isinstance(result, int) and result:  # pins, lock, audit: their own code, their lines printed already
            raise Exit(code=result)

    return wrapper


def _request(c, flags: dict[str, object], *, matrix: bool = False) -> Request:
    """The task's flags (its locals(); the names settings.FLAGS knows) and invoke.yaml's `cleanbuild:` section,
    resolved once into the checked request; --arch a list only for matrix tasks."""
    return resolve({k: v for k, v in flags.items() if k in FLAGS}, c.config.get("cleanbuild"), matrix=matrix)


@cli_task(json="print JSON")
def arch(c, arch=None, json_=False, debug=False):
    """Detect (or check) the GPU architecture and print its facts."""
    info = commands.arch_info(next(iter(parse_arch(arch)), None))
    if json_:
        print(json.dumps(info, indent=2))
    else:
        commands.print_rows("architecture", info)


@cli_task(iterable=("set", "src"), model="model folder for the smoke test", json="print the plan as JSON")
def plan(c, arch=None, ck_free=False, profile=None, set=None, builder=None, ca_bundle=None, model=None,  # noqa: A002
         src=None, json_=False, debug=False):
    """Print the resolved build plan and the exact commands build-clean would run; touches nothing."""
    commands.show_plan(_request(c, locals(), matrix=True), as_json=json_)


@cli_task(iterable=("set", "src"), export="write the wheels and manifest.json to this new folder",
          rebuild="build even when an image with the same content key exists")
def wheels(c, arch=None, ck_free=False, profile=None, set=None, builder=None, ca_bundle=None,  # noqa: A002
           progress=None, registry=None, export=None, rebuild=False, src=None, dry_run=False, debug=False):
    """Build (or reuse, here or from the registry) the wheels image: every dependency built once, with a manifest."""
    commands.wheels(_request(c, locals(), matrix=True), export=Path(export) if export else None,
                    rebuild=rebuild, dry_run=dry_run)


@cli_task(iterable=("set", "src"))
def clean(c, arch=None, ck_free=False, profile=None, set=None, builder=None, ca_bundle=None,  # noqa: A002
          progress=None, registry=None, src=None, dry_run=False, debug=False):
    """Build the clean runtime image from the (reused or built) wheels image: zero compilation."""
    commands.clean(_request(c, locals(), matrix=True), dry_run=dry_run)


@cli_task(iterable=("only",), src="patch a source checkout or site-packages folder in place",
          image="patch this image as its own layer (tags IMAGE-patched)", only="apply only this patch (repeatable)",
          check="change nothing; exit 1 when something would change")
def patch(c, src=None, image=None, only=None, check=False, arch=None, dry_run=False, debug=False):
    """Apply the source patches (aiter tuned_gemm and jit/core, ATOM CK-free) to a folder or an image."""
    commands.patch(src=src, image=image, only=tuple(only or ()), check=check, dry_run=dry_run,
                   request=_request(c, {"arch": arch}))  # --src here is a folder, not a checkout


@cli_task(iterable=("set",), image="image to run the smoke test in", model="model folder (mounted read-only)",
          arch="arch (default: the image's label)")
def smoke(c, image, model, profile=None, set=None, gpu=None, user_id=None, arch=None, debug=False):  # noqa: A002
    """Generate 10 tokens with a model inside an image and count them."""
    commands.smoke(image, _request(c, locals()))


@cli_task(image="the image to tag (name or ID)", user="user part of the tag (default: login name)",
          dry_run="show the tag and why, tag nothing")
def tag(c, image, user=None, dry_run=False, debug=False):
    """Tag an image per convention: user_date_rocmX_aiterY_atomZ, versions read from the image."""
    commands.tag(image, _request(c, locals()), dry_run=dry_run)


@cli_task(iterable=("set", "src"), model="model folder for the 10-token smoke test",
          allow_no_smoke="tag the release even without a smoke test", user="user part of the tag (default: login name)")
def build_clean(c, arch=None, ck_free=False, profile=None, set=None, builder=None, ca_bundle=None,  # noqa: A002
                progress=None, model=None, allow_no_smoke=False, user=None, gpu=None, user_id=None, registry=None,
                src=None, dry_run=False, debug=False):
    """The whole pipeline: preflight, prepare, wheels, clean, patch, validate, smoke, tag, report."""
    commands.build_clean(_request(c, locals(), matrix=True), dry_run=dry_run)


@cli_task(iterable=("set",), ref="the pushed candidate: REGISTRY/candidate:TAG or REPO@sha256:DIGEST",
          arch="this node's arch (default: detected); the image must be built for it",
          model="model folder for the 10-token smoke test", allow_no_smoke="promote even without a smoke test",
          user="user part of the tag (default: login name)")
def promote(c, ref, arch=None, profile=None, set=None, model=None, allow_no_smoke=False, user=None, gpu=None,  # noqa: A002
            user_id=None, registry=None, debug=False):
    """On a GPU node: pull by digest, validate and smoke-test here, then push the release tag and the report."""
    commands.promote(ref, _request(c, locals()))


@cli_task(tag="release tag or image reference")
def report(c, tag, debug=False):
    """Print a build's report again, from reports/<repository>/<tag>/."""
    commands.print_report(tag)


@cli_task(iterable=("set",), json="print JSON",
          bump="move this git pin (aiter, atom, ...) when no patch drifts on the candidate",
          to="the commit to bump to (default: the branch head)",
          dry_run="with --bump: show the profile diff, write nothing")
def pins(c, profile=None, set=None, json_=False, bump=None, to=None, dry_run=False, debug=False):  # noqa: A002
    """Check every pin against its repository or index (exit 1 wrong, 3 unreachable); --bump moves one."""
    return commands.pins(_request(c, locals()), as_json=json_, bump=bump, to=to, dry_run=dry_run)


@cli_task(iterable=("set", "upgrade_package"), check="exit 1 when the lock no longer matches the pins; write nothing",
          upgrade_package="let this package move to its newest allowed version (repeatable)")
def lock(c, profile=None, set=None, upgrade_package=None, check=False, debug=False):  # noqa: A002
    """(Re)make the profile's locked closure (uv pip compile --generate-hashes) from the pinned sources."""
    return commands.lock(_request(c, locals()), upgrade=tuple(upgrade_package or ()), check=check)


@cli_task(iterable=("tp",), image="image to audit (name or ID); must be in the local engine, never pulled",
          arch="gfx942 or gfx950: the arch the image must serve (default: what the image says)",
          model="model folder (its config.json, mounted read-only) or preset (llama3-8b, qwen3-30b-a3b, deepseek-v3)",
          tp="tensor-parallel size for --model (repeatable, default 1)", json="print the whole result as JSON",
          report="write report.json and report.md (and untuned-gemm.csv with --model) to this folder",
          device="also run the validation kernels on the GPU (ROCm host only)")
def audit(c, image, arch=None, model=None, tp=None, json_=False, report=None, device=False, debug=False):
    """Check an existing image for every known pitfall, without rebuilding it (exit 1 when one is PRESENT)."""
    from cleanbuild import audit as auditing

    refs.image_ref(image, "audit IMAGE")  # before any engine call
    request = _request(c, {"arch": arch})  # --arch parsed, invoke.yaml checked, as for every other task
    result = auditing.audit(image, arch=next(iter(request.archs), None), model=model, tp=tuple(tp or (1,)),
                            report_dir=Path(report) if report else None, device=device)
    auditing.render(result, as_json=json_)
    return result.exit_code


@cli_task(iterable=("set",), ref="the image: NAME:TAG, ID, or REPO@sha256:DIGEST (here, on this engine)",
          profile="the profile to rebuild with (default: the image's own label)", json="print the comparison as JSON")
def verify(c, ref, profile=None, set=None, ca_bundle=None, progress=None, json_=False, debug=False):  # noqa: A002
    """Rebuild an image from its own labels here and compare digests (exit 1: the first differing layer and file)."""
    commands.verify(ref, _request(c, locals()), as_json=json_)


@cli_task(iterable=("check", "set"), component="aiter or atom", good="a commit (or branch, tag) where the checks hold",
          bad="a later commit where they do not", check="what bad means (repeatable): patch:NAME, a validation check "
          "(gemm-hipblaslt, moe-triton, ...) or import; default: the patches and the validation checks that need no "
          "image", json="print the result as JSON", report="write bisect.json and bisect.md to this folder",
          device="cpu or cuda for the validation checks (default: validation's own choice)",
          first_parent="follow first parents only (the default)", all_parents="test commits of merged branches too",
          image="each step a real image build (not implemented yet: exit 2)",
          arch="gfx942 or gfx950: the arch the validation checks validate (needed with them)")
def bisect(c, component, good, bad, check=None, arch=None, profile=None, set=None, device=None, json_=False,  # noqa: A002
           report=None, first_parent=False, all_parents=False, image=False, debug=False):
    """Find the upstream commit that broke a patch, a validation check or ATOM's imports (git bisect, no image)."""
    from cleanbuild.bisect.command import bisect_command

    if first_parent and all_parents:
        raise Exit("error: --first-parent and --all-parents failed because they contradict. To fix, pass one.", code=2)
    return bisect_command(_request(c, locals()), component, good, bad, tuple(check or ()), as_json=json_,
                          report_dir=Path(report) if report else None, first_parent=not all_parents, image=image)


ns = Collection(arch, plan, wheels, clean, patch, smoke, tag, build_clean, promote, report, pins, lock, audit)
ns.add_task(verify)
ns.add_task(bisect)
ns.configure({"cleanbuild": {}})

if __name__ == "__main__":  # pragma: no cover - `python tasks.py` is not how this is run
    sys.exit("run these with invoke: invoke --list")
