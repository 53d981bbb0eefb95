"""The tasks: one per build step, plus build-clean for the whole pipeline, validate, pins, lock and audit.

Run as `atom-build TASK` (cleanbuild.cli.main) or `invoke TASK` (the repository's tasks.py imports `ns` from here).
Tasks stay thin: they take the resolved request (cleanbuild.cli.signature), call a cleanbuild.commands module and
print; each imports it when it runs, so `--help` and `--list` never load the build (Docker SDK, report, SBOM). Their
common flags are the options table's (cleanbuild.cli.options); site defaults live in invoke.yaml under `cleanbuild:`.
"""

from __future__ import annotations

import json as jsonlib
from dataclasses import replace
from pathlib import Path

from invoke import Collection, Context

from cleanbuild.cli.signature import cli_task
from cleanbuild.core import refs
from cleanbuild.core.outputs import output_file
from cleanbuild.request.build import Request

BUILD = ("arch", "ck_free", "profile", "set", "builder", "ca_bundle", "progress", "registry", "src", "mirror")
GPU = ("gpu", "user_id")


@cli_task(common=("arch",))
def arch(c: Context, request: Request, json: bool = False) -> None:
    """Detect (or check) the GPU architecture and print its facts."""
    # Here, not at the top: rich (the table) would otherwise load on every start, `--help` included.
    from cleanbuild.commands import build
    from cleanbuild.core.console import print_rows

    info = build.arch_info(next(iter(request.arch), None))
    if json:
        print(jsonlib.dumps(info, indent=2))
    else:
        print_rows("architecture", info)


@cli_task(common=(*BUILD[:6], "model", "src", "mirror"), matrix=True)
def plan(c: Context, request: Request, json: bool = False) -> None:
    """Print the resolved build plan and the exact commands build-clean would run; touches nothing."""
    from cleanbuild.commands import build

    build.show_plan(request, as_json=json)


@cli_task(common=BUILD, matrix=True, export="write the wheels and manifest.json to this new folder",
          rebuild="build even when an image with the same content key exists")
def wheels(c: Context, request: Request, export: str | None = None, rebuild: bool = False,
           dry_run: bool = False) -> None:
    """Build (or reuse, here or from the registry) the wheels image: every dependency built once, with a manifest."""
    from cleanbuild.commands import build

    build.wheels(request, export=Path(export) if export else None, rebuild=rebuild, dry_run=dry_run)


@cli_task(common=BUILD, matrix=True)
def clean(c: Context, request: Request, dry_run: bool = False) -> None:
    """Build the clean runtime image from the (reused or built) wheels image: zero compilation."""
    from cleanbuild.commands import build

    build.clean(request, dry_run=dry_run)


@cli_task(common=("arch",), iterable=("only",), folder="patch this source checkout or site-packages folder in place",
          image="patch this image as its own layer (tags IMAGE-patched)", only="apply only this patch (repeatable)",
          check="change nothing; exit 1 when something would change")
def patch(c: Context, request: Request, folder: str | None = None, image: str | None = None,
          only: list[str] | None = None, check: bool = False, dry_run: bool = False) -> None:
    """Apply the source patches (aiter tuned_gemm and jit/core, ATOM CK-free) to a folder or an image."""
    from cleanbuild.commands import existing

    existing.patch(folder=folder, image=image, only=tuple(only or ()), check=check, dry_run=dry_run, request=request)


@cli_task(common=("profile", "set", *GPU, "arch", "model"), positional=("model",), image="image to run the smoke test in",
          model="model folder (mounted read-only)", arch="arch (default: the image's label)")
def smoke(c: Context, request: Request, image: str) -> None:
    """Generate 10 tokens with a model inside an image and count them."""
    from cleanbuild.commands import existing

    existing.smoke(image, request)


@cli_task(common=("user",), image="the image to tag (name or ID)", dry_run="show the tag and why, tag nothing")
def tag(c: Context, request: Request, image: str, dry_run: bool = False) -> None:
    """Tag an image per convention: user_date_rocmX_aiterY_atomZ, versions read from the image."""
    from cleanbuild.commands import existing

    existing.tag(image, request, dry_run=dry_run)


@cli_task(common=(*BUILD[:7], "model", "allow_no_smoke", "allow_unservable", "user", *GPU, "registry", "src", "mirror"),
          matrix=True)
def build_clean(c: Context, request: Request, dry_run: bool = False) -> None:
    """The whole pipeline: preflight, prepare, wheels, clean, patch, validate, smoke, tag, report."""
    from cleanbuild.commands import build

    build.build_clean(request, dry_run=dry_run)


@cli_task(common=("arch", "profile", "set", "model", "allow_no_smoke", "allow_unservable", "user", *GPU, "registry"),
          ref="the pushed candidate: REGISTRY/candidate:TAG or REPO@sha256:DIGEST",
          arch="this node's arch (default: detected); the image must be built for it",
          allow_no_smoke="promote even without a smoke test")
def promote(c: Context, request: Request, ref: str) -> None:
    """On a GPU node: pull by digest, validate and smoke-test here, then push the release tag and the report."""
    from cleanbuild.commands import existing

    existing.promote(ref, request)


@cli_task(common=("arch", "device", *GPU, "profile", "set"), image="image to validate (tag or ID)",
          arch="gfx942|gfx950 (default: the image's io.atom-build.arch label)",
          device="cuda (a ROCm host, the default) or cpu",
          json_file="where to copy the report (default: reports/validate-<run>.json)")
def validate(c: Context, request: Request, image: str, json_file: str | None = None) -> int:
    """Run the validation kernels inside an image (build-clean's validate step); `-- ARGS` go to the kernels."""
    from cleanbuild.commands import existing

    rest = tuple(c.config.get("validation_args") or ())
    return existing.validate(image, replace(request, device=request.device or "cuda"), rest=rest,
                             dest=output_file(json_file, "--json-file") if json_file else None)


@cli_task(tag="release tag or image reference", html="print the path of its report.html instead of the Markdown",
          open="open its report.html in the desktop's web browser")
def report(c: Context, tag: str, html: bool = False, open_: bool = False) -> None:
    """Print a build's report again, from reports/<repository>/<tag>/."""
    from cleanbuild.commands import existing

    existing.print_report(tag, html=html, open_page=open_)


@cli_task(common=("profile", "set", "mirror"), bump="move this git pin (aiter, atom, ...) when no patch drifts on the candidate",
          to="the commit to bump to (default: the branch head)", dry_run="with --bump: show the profile diff, write nothing")
def pins(c: Context, request: Request, json: bool = False, bump: str | None = None, to: str | None = None,
         dry_run: bool = False) -> int:
    """Check every pin against its repository or index (exit 1 wrong, 3 unreachable); --bump moves one."""
    from cleanbuild.commands import sources

    return sources.run_pins(request, as_json=json, bump=bump, to=to, dry_run=dry_run)


@cli_task(common=("profile", "set", "mirror"), iterable=("upgrade_package",),
          check="exit 1 when the lock no longer matches the pins; write nothing",
          upgrade_package="let this package move to its newest allowed version (repeatable)")
def lock(c: Context, request: Request, upgrade_package: list[str] | None = None, check: bool = False) -> int:
    """(Re)make the profile's locked closure (uv pip compile --generate-hashes) from the pinned sources."""
    from cleanbuild.commands import sources

    return sources.run_lock(request, upgrade=tuple(upgrade_package or ()), check=check)


@cli_task(common=("arch",), iterable=("tp",), image="image to audit (name or ID); must be in the local engine, never pulled",
          arch="gfx942 or gfx950: the arch the image must serve (default: what the image says)",
          model="model folder (its config.json, mounted read-only) or preset (llama3-8b, qwen3-30b-a3b, deepseek-v3)",
          tp="tensor-parallel size for --model (repeatable, default 1)",
          report="write report.json and report.md (and untuned-gemm.csv with --model) to this folder",
          run_kernels="also run the validation kernels on the GPU (ROCm host only)")
def audit(c: Context, request: Request, image: str, model: str | None = None, tp: list[str] | None = None,
          json: bool = False, report: str | None = None, run_kernels: bool = False) -> int:
    """Check an existing image for every known pitfall, without rebuilding it (exit 1 when one is PRESENT)."""
    from cleanbuild.commands import audit_image

    refs.image_ref(image, "audit IMAGE")  # before any engine call
    result = audit_image.audit(image, arch=next(iter(request.arch), None), model=model, tp=tuple(tp or (1,)),
                            report_dir=Path(report) if report else None, device=run_kernels)
    audit_image.render(result, as_json=json)
    return result.exit_code


@cli_task(common=("profile", "set", "ca_bundle", "progress", "mirror"),
          ref="the image: NAME:TAG, ID, or REPO@sha256:DIGEST (here, on this engine)",
          profile="the profile to rebuild with (default: the image's own label)")
def verify(c: Context, request: Request, ref: str, json: bool = False) -> None:
    """Rebuild an image from its own labels here and compare digests (exit 1: the first differing layer and file)."""
    from cleanbuild.commands import verify_image

    verify_image.verify(ref, request, as_json=json)


@cli_task(common=("arch", "profile", "set", "device", "mirror", "ck_free", "ca_bundle", "progress"),
          iterable=("check",),
          component="aiter or atom", good="a commit (or branch, tag) where the checks hold",
          bad="a later commit where they do not", check="what bad means (repeatable): patch:NAME, a validation check "
          "(gemm-hipblaslt, moe-triton, ...) or import; default: the patches and the validation checks that need no "
          "image", report="write bisect.json and bisect.md to this folder",
          all_parents="test commits of merged branches too (default: first-parent history)",
          image="each step builds the commit's image (only its units rebuild) and validates inside it; "
          "checks: any validation check (default: all of them)",
          arch="gfx942 or gfx950: the arch the validation checks validate (needed with them)")
def bisect(c: Context, request: Request, component: str, good: str | None = None, bad: str | None = None,
           check: list[str] | None = None, report: str | None = None, all_parents: bool = False, image: bool = False,
           json: bool = False) -> int:
    """Find the upstream commit that broke a patch, a validation check or ATOM's imports (git bisect)."""
    from cleanbuild.commands.bisect_commits import bisect_command

    return bisect_command(request, component, good, bad, tuple(check or ()), as_json=json,
                          report_dir=Path(report) if report else None, first_parent=not all_parents, image=image)


ns = Collection(arch, plan, wheels, clean, patch, smoke, tag, build_clean, promote, validate, report, pins, lock, audit)
ns.add_task(verify)
ns.add_task(bisect)
ns.configure({"cleanbuild": {}})
