"""Invoke tasks: one per build step, plus build-clean for the whole pipeline.

Tasks stay thin: parse flags, call cleanbuild, print. Failures end in one line and a fixed exit code
(cleanbuild.errors); --debug shows the traceback. Site defaults live in invoke.yaml under `cleanbuild:`.
"""

from __future__ import annotations

import functools
import json
import sys
import traceback
from pathlib import Path

from invoke import Collection, Exit, task

from cleanbuild import steps
from cleanbuild.errors import CleanBuildError

COMMON_HELP = {
    "arch": "gfx942 or gfx950 (build-clean also takes gfx942,gfx950); detected on the host when omitted",
    "ck_free": "build aiter without CK (ENABLE_CK=0) and set ATOM_CK_FREE=1 in the image",
    "profile": "build profile: default (real ROCm host), offline (CPU stand-in), or a .toml path",
    "set": "override one profile entry, KEY=VALUE (repeatable), e.g. components.aiter.ref=0123abc",
    "builder": "buildx builder to build on (e.g. a remote BuildKit farm)",
    "ca_bundle": "PEM CA bundle for TLS-intercepting proxies, passed as a BuildKit secret (never a layer)",
    "progress": "BuildKit progress output: auto, plain, tty, quiet",
    "dry_run": "print what would run, run nothing",
    "debug": "show the traceback on failure",
}


def _help(*names: str, **extra: str) -> dict[str, str]:
    return {**{n: COMMON_HELP[n] for n in names}, **extra}


def _guard(fn):
    """One line and the error's exit code instead of a traceback (unless --debug)."""

    @functools.wraps(fn)
    def wrapper(c, *args, **kwargs):
        try:
            return fn(c, *args, **kwargs)
        except CleanBuildError as exc:
            if kwargs.get("debug"):
                traceback.print_exc()
            raise Exit(f"error: {exc}", code=exc.exit_code) from None
        except KeyboardInterrupt:
            raise Exit("interrupted", code=130) from None

    return wrapper


def _conf(c) -> dict:
    return dict(c.config.get("cleanbuild", {}))


def _inputs(**kw) -> steps.Inputs:
    kw["sets"] = tuple(kw.pop("set", None) or ())
    return steps.Inputs(**kw)


@task(help=_help("arch", "debug", json="print JSON"))
@_guard
def arch(c, arch=None, json_=False, debug=False):
    """Detect (or check) the GPU architecture and print its facts."""
    info = steps.arch_info(arch)
    if json_:
        print(json.dumps(info, indent=2))
    else:
        steps.print_rows("architecture", info)


@task(iterable=["set"], help=_help("arch", "ck_free", "profile", "set", "builder", "ca_bundle", "debug",
                                   model="model folder for the smoke test", json="print the plan as JSON"))
@_guard
def plan(c, arch=None, ck_free=False, profile=None, set=None, builder=None, ca_bundle=None, model=None,  # noqa: A002
         json_=False, debug=False):
    """Print the resolved build plan and the exact commands build-clean would run."""
    steps.show_plan(_inputs(arch=arch, ck_free=ck_free, profile=profile, set=set, builder=builder,
                            ca_bundle=ca_bundle, model=model), _conf(c), as_json=json_)


@task(iterable=["set"], help=_help("arch", "ck_free", "profile", "set", "builder", "ca_bundle", "progress",
                                   "dry_run", "debug", export="write the wheels and manifest.json to this folder",
                                   rebuild="build even when an image with the same content key exists"))
@_guard
def wheels(c, arch=None, ck_free=False, profile=None, set=None, builder=None, ca_bundle=None,  # noqa: A002
           progress=None, export=None, rebuild=False, dry_run=False, debug=False):
    """Build (or reuse) the wheels image: every dependency built once, with a manifest."""
    steps.wheels(_inputs(arch=arch, ck_free=ck_free, profile=profile, set=set, builder=builder,
                         ca_bundle=ca_bundle, progress=progress), _conf(c),
                 export=Path(export) if export else None, rebuild=rebuild, dry_run=dry_run)


@task(iterable=["set"], help=_help("arch", "ck_free", "profile", "set", "builder", "ca_bundle", "progress",
                                   "dry_run", "debug", wheels_image="wheels image to install from (default: the matching one)"))
@_guard
def clean(c, arch=None, ck_free=False, profile=None, set=None, builder=None, ca_bundle=None,  # noqa: A002
          progress=None, wheels_image=None, dry_run=False, debug=False):
    """Build the clean runtime image from the wheels image: zero compilation."""
    steps.clean(_inputs(arch=arch, ck_free=ck_free, profile=profile, set=set, builder=builder,
                        ca_bundle=ca_bundle, progress=progress), _conf(c), wheels_image=wheels_image, dry_run=dry_run)


@task(iterable=["only"], help={"src": "patch a source checkout or site-packages folder in place",
                               "image": "patch this image as its own layer (tags IMAGE-patched)",
                               "only": "apply only this patch (repeatable)",
                               "check": "change nothing; exit 1 when something would change",
                               "dry_run": COMMON_HELP["dry_run"], "debug": COMMON_HELP["debug"]})
@_guard
def patch(c, src=None, image=None, only=None, check=False, dry_run=False, debug=False):
    """Apply the source patches (aiter tuned_gemm and jit/core, ATOM CK-free) to a checkout or an image."""
    code = steps.patch(src=src, image=image, only=tuple(only or ()), check=check, dry_run=dry_run)
    if code:
        raise Exit(code=code)


@task(help={"image": "image to run the smoke test in", "model": "model folder (mounted read-only)",
            "profile": COMMON_HELP["profile"], "debug": COMMON_HELP["debug"]})
@_guard
def smoke(c, image, model, profile=None, debug=False):
    """Generate 10 tokens with a model inside an image."""
    steps.smoke(image, model, _inputs(profile=profile), _conf(c))


@task(help={"image": "the image to tag (name or ID)", "user": "user part of the tag (default: login name)",
            "dry_run": "show the tag and why, tag nothing", "debug": COMMON_HELP["debug"]})
@_guard
def tag(c, image, user=None, dry_run=False, debug=False):
    """Tag an image per convention: user_date_rocmX_aiterY_atomZ, versions read from the image."""
    steps.tag(image, user_flag=user, config=_conf(c), dry_run=dry_run)


@task(iterable=["set"], help=_help("arch", "ck_free", "profile", "set", "builder", "ca_bundle", "progress",
                                   "dry_run", "debug", model="model folder for the 10-token smoke test",
                                   allow_no_smoke="tag the release even without a smoke test",
                                   user="user part of the tag (default: login name)"))
@_guard
def build_clean(c, arch=None, ck_free=False, profile=None, set=None, builder=None, ca_bundle=None,  # noqa: A002
                progress=None, model=None, allow_no_smoke=False, user=None, dry_run=False, debug=False):
    """The whole pipeline: wheels, clean, patch, validate, smoke, tag, report."""
    steps.build_clean(_inputs(arch=arch, ck_free=ck_free, profile=profile, set=set, builder=builder,
                              ca_bundle=ca_bundle, progress=progress, model=model,
                              allow_no_smoke=allow_no_smoke, user=user), _conf(c), dry_run=dry_run)


@task(help={"tag": "release tag or image reference", "debug": COMMON_HELP["debug"]})
@_guard
def report(c, tag, debug=False):
    """Print a build's report again, from the image's labels and reports/<tag>/."""
    steps.print_report(tag)


ns = Collection(arch, plan, wheels, clean, patch, smoke, tag, build_clean, report)
ns.configure({"cleanbuild": {"profile": "default", "registry": "atom-build", "progress": "auto", "overrides": {}}})

if __name__ == "__main__":  # pragma: no cover - `python tasks.py` is not how this is run
    sys.exit("run these with invoke: invoke --list")
