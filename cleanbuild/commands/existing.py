"""What the tasks that act on an existing image do (validate, smoke, tag, patch, promote, report): its plan is
made from the image's own labels (image_plan), then the same steps as a build run on it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cleanbuild.core import engine, metadata
from cleanbuild.core.console import console, print_rows, steps_table
from cleanbuild.core.errors import (
    EnvironmentProblem,
    StepFailed,
    UsageError,
)
from cleanbuild.core.refs import image_ref, parse_image, split_image
from cleanbuild.core.run import run
from cleanbuild.core.spec import REPO_ROOT, patches_argv
from cleanbuild.gpuhost.arch import host_runner, resolve
from cleanbuild.images import buildx, pipeline, release, report
from cleanbuild.images.plan import Plan, make_plan
from cleanbuild.images.record import BuildRecord
from cleanbuild.request.build import Request
from cleanbuild.request.load import parse_arch

if TYPE_CHECKING:
    from docker.client import DockerClient

def image_plan(image: str, request: Request, client: DockerClient) -> tuple[Plan, BuildRecord]:
    """A plan for an image that exists: its arch and CK mode come from its labels unless --arch is given."""
    image_id = engine.image_id(client, image)
    if image_id is None:
        raise UsageError(f"image {image} not found on this engine. To fix, build it (invoke build-clean) or pass an existing image.")
    label, ck_mode = metadata.image_labels(engine.inspect(client, image).get("Config", {}).get("Labels"))
    archs = request.arch or parse_arch(label)
    if not archs:
        raise UsageError(f"{image} has no {metadata.label('arch')} label. To fix, pass --arch gfx942|gfx950.")
    request = replace(request, ck_free=request.ck_free or ck_mode == "ckfree")
    plan = make_plan(request.profile, request.build(archs[0]))
    return plan, pipeline.new_record(plan, candidate_id=image_id, candidate_ref=image)


def validate(image: str, request: Request, *, rest: tuple[str, ...], dest: Path | None) -> int:
    """`nox -s validate -- --image TAG`: the validate step of build-clean, on any image; the report copied out."""
    image_ref(image, "validate IMAGE")  # the request is checked already; the reference too before the engine is asked
    client = engine.client()
    plan, rec = image_plan(image, request, client)
    if rest:
        spec = plan.validate
        plan = replace(plan, validate=replace(spec, command=(*spec.command, *rest)))
    try:
        rec = pipeline.run(plan, client, ("preflight", "validate"), rec, failed_report=False)
        code = 0
    except StepFailed as exc:
        console.print(f"[red]{exc}[/red]")
        code = 1
    src = plan.options.run_dir / "validation.json"
    if src.is_file():
        out = dest or REPO_ROOT / "reports" / f"validate-{plan.options.run_id}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(src.read_bytes())
        console.print(f"report: {out}")
    return code


def smoke(image: str, request: Request) -> None:
    image_ref(image, "smoke IMAGE")
    client = engine.client()
    plan, rec = image_plan(image, request, client)
    rec = pipeline.run(plan, client, ("preflight", "smoke"), rec, failed_report=False)
    result = (rec.smoke or {})["result"]
    console.print(f"[green]✓[/green] {result['new_tokens']} new tokens ({result['counted_by']}): {result.get('completion')!r}")


def tag(image: str, request: Request, *, dry_run: bool) -> None:
    image_ref(image, "tag IMAGE")
    client = engine.client()
    plan, rec = image_plan(image, replace(request, allow_no_smoke=True), client)
    release.refuse_dirty(client, rec.candidate(), image)
    if dry_run:
        rec = release.release_tag(client, plan.options, rec)[0]
    else:
        rec = pipeline.run(plan, client, ("preflight", "tag"), rec, failed_report=False)
    f, made = rec.tagged()
    print_rows("tag", {"tag": f"{metadata.release_repo(plan.options.request.registry, f.arch, f.ck_mode)}:{made.value}",
                       "rocm": f.rocm_release, "aiter": f.aiter, "atom": f.atom, "length": len(made.value),
                       "changes": "; ".join(made.steps) or "none needed", "applied": rec.release_ref or "no (--dry-run)"})


def patch(*, folder: str | None, image: str | None, only: tuple[str, ...], check: bool, dry_run: bool,
          request: Request) -> None:
    if folder and not image:
        return _patch_folder(Path(folder), only, "check" if check or dry_run else "apply")
    if folder or not image:
        raise UsageError("give exactly one of --folder DIR or --image TAG.")
    image_ref(image, "--image")
    client = engine.client()
    plan, rec = image_plan(image, request, client)
    target = f"{image}-patched" if split_image(image)[1] else f"{image}:patched"
    plan = replace(plan, patch=replace(plan.patch, image=target))
    if dry_run:
        print(buildx.describe(plan.patch, plan.options))
        return None
    pipeline.run(plan, client, ("preflight", "patch"), rec, patch_only=only, failed_report=False)
    console.print(f"[green]✓[/green] patched image {target}")
    return None


def _patch_folder(root: Path, only: tuple[str, ...], mode: str) -> None:
    """`python -m patches` on a folder. Its usage errors are ruled out here first, so its exit 2 means drift (a
    wrong result: exit 1 here) and its exit 3 a write the host could not do (exit 3 here)."""
    from patches import cli as patches_cli

    if not root.is_dir():
        raise UsageError(f"--folder {root} is not a folder. To fix, pass a source checkout or a site-packages folder.")
    try:
        patches_cli.select(list(only), root)  # the patches CLI's own input rules, in-process
    except patches_cli.UsageError as exc:
        raise UsageError(f"patch --folder {root} --only {' '.join(only) or '-'} refused because {exc}. To fix, pass a "
                         "folder holding aiter/ or atom/ and patch names from `python -m patches list`.") from None
    argv = patches_argv(mode, root.resolve(), *[x for n in only for x in ("--only", n)])
    code = run(argv, check=False, cwd=REPO_ROOT).returncode
    if code == 2:
        raise StepFailed(f"patches {mode} failed because a patch drifted under {root} (see above); nothing was "
                         "written. To fix, update the patch or the pin.")
    if code == 3:
        raise EnvironmentProblem(f"patches {mode} failed because it could not write under {root} (see above); "
                                 "nothing was changed. To fix, make the folder writable and give it disk space.")
    if code == 1:
        raise StepFailed(f"patches check: something under {root} would change (see above).")
    if code == 130:
        raise KeyboardInterrupt
    if code:
        raise StepFailed(f"patches {mode} exited {code}.")


def promote(ref: str, request: Request) -> BuildRecord:
    """On a GPU node: pull by digest, validate and smoke-test that image here, then tag and push the release (by
    digest: what was validated is what is tagged) and the report. A node of another arch refuses (exit 2)."""
    image_ref(ref, "promote REF")  # a malformed reference: exit 2 before any pull (the request is checked already)
    client = engine.client()
    image_id = engine.pull(client, ref)
    if image_id is None:
        raise UsageError(f"{ref} is not in its registry. To fix, push it (build-clean with a registry) or pass the reference it printed.")
    digest = parse_image(ref).digest or registry_digest(client, ref)
    image_arch, _ = metadata.image_labels(engine.inspect(client, image_id).get("Config", {}).get("Labels"))
    node = request.arch[0] if request.arch else resolve(None, host_runner).arch
    if image_arch and node.value != image_arch:
        raise UsageError(f"this node is {node.value} and {ref} is built for {image_arch}. To fix, promote it on a {image_arch} node.")
    plan, rec = image_plan(ref, replace(request, arch=(node,)), client)
    rec = replace(rec, candidate_id=image_id, candidate_digest=digest)
    rec = pipeline.run(plan, client, ("preflight", "validate", "smoke", "tag", "report", "push"), rec)
    console.print(steps_table(f"promote {ref}", rec.steps))
    return rec


def print_report(ref: str, *, html: bool = False, open_page: bool = False) -> None:
    """The Markdown report; with html, the path of its report.html instead; open_page opens that in a browser."""
    file = report.find(ref)
    if file is None:
        raise UsageError(f"no report for {ref}. To fix, pass the release tag build-clean printed (see reports/).")
    if not (html or open_page):
        print(report.markdown(json.loads(file.read_text())), end="")
        return
    page = report.html_page(file).resolve()
    print(page)
    if open_page:
        import webbrowser

        if not webbrowser.open(page.as_uri()):
            raise EnvironmentProblem(f"no web browser could open {page}. To fix, open that file in a browser by hand.")


# ---- pins and locks -----------------------------------------------------------------------------------------


def registry_digest(client: DockerClient, ref: str) -> str:
    repo = split_image(ref)[0]
    for entry in engine.repo_digests(client, ref):
        if parse_image(entry).repository == repo:
            return parse_image(entry).digest
    raise StepFailed(f"{ref} has no registry digest after the pull. To fix, promote it by digest (REPO@sha256:...).")
