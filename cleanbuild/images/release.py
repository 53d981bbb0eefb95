"""The release, as the tag and push steps (cleanbuild.images.steps) and `atom-build tag --dry-run`
(cleanbuild.commands.existing) do it: the release tag and repository from the versions the image itself reports,
the refusal of an image built from a local checkout, and the build report pushed beside the release.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from cleanbuild.core import engine, metadata
from cleanbuild.core.errors import UsageError
from cleanbuild.core.spec import BuildSpec
from cleanbuild.images import buildx, srcplan
from cleanbuild.images import report as reports
from cleanbuild.images.plan import Plan
from cleanbuild.images.record import BuildRecord
from cleanbuild.images.tag import TagParts, make_tag
from cleanbuild.request.build import Build

if TYPE_CHECKING:
    from docker.client import DockerClient


def release_tag(client: DockerClient, options: Build, rec: BuildRecord) -> tuple[BuildRecord, str]:
    """(record with the image's facts and tag, release repository): from the versions the image itself reports."""
    o = options
    where = rec.candidate_ref or str(rec.candidate_id)
    raw = engine.read_json(client, rec.candidate(), metadata.VERSIONS_PATH, rec.run_id)
    if raw is None:
        raise UsageError(f"{where} has no {metadata.VERSIONS_PATH}. To fix, tag an image built by build-clean.")
    facts = metadata.read_versions(raw, where)
    result = make_tag(TagParts(o.request.user, o.date, facts.rocm_release, facts.aiter, facts.atom))
    return replace(rec, facts=facts, tag=result), metadata.release_repo(o.request.registry, facts.arch, facts.ck_mode)


def refuse_dirty(client: DockerClient, image: str, where: str) -> None:
    """An image built from a local checkout (--src) never gets a release tag."""
    labels = engine.inspect(client, image).get("Config", {}).get("Labels") or {}
    if labels.get(srcplan.DIRTY_LABEL) == "true":
        raise UsageError(f"{where} is labelled {srcplan.DIRTY_LABEL}=true (built from a local checkout with --src), "
                         "so it gets no release tag. To fix, commit the change, move the pin and build from the pins.")


def push_report(client: DockerClient, plan: Plan, rec: BuildRecord, *, reproducible: bool) -> str:
    """The build report as a three-file image (FROM scratch) tagged <release tag>.report beside the release;
    reproducible: the engine builds reproducibly (cleanbuild.images.buildx)."""
    folder = reports.folder_for(plan, rec, failed=False)
    (folder / "Dockerfile").write_text("FROM scratch\nCOPY report.json report.md report.html /\n")
    try:
        spec = BuildSpec("report", folder / "Dockerfile", folder, None, (), f"{rec.release_ref}.report")
        buildx.build(spec, plan.options, reproducible=reproducible)
    finally:
        (folder / "Dockerfile").unlink()
    engine.push(client, spec.image)
    return spec.image
