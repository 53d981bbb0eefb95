"""One image-metadata schema: the label namespace, the release repository, and a strict versions.json reader.

Images carry labels under io.atom-build.* (written by the host from the build record, plus the arch and CK mode
the Dockerfile sets) and /opt/atom-build/versions.json (schema 2, written once inside the image by
docker/scripts/write_versions.py). Everything that reads them goes through here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cleanbuild.core.errors import UsageError
from cleanbuild.core.versions import normalise, rocm_version
from validation.core.archs import ARCHS, CK_MODES

NS = "io.atom-build"
IN_IMAGE = "/opt/atom-build"
VERSIONS_PATH = f"{IN_IMAGE}/versions.json"
MANIFEST_PATH = f"{IN_IMAGE}/manifest.json"
PAYLOAD_PATH = f"{IN_IMAGE}/payload.json"  # validation.payload scan of the clean image: its GPU code by arch
PAYLOAD_LEFT_OUT_PATH = f"{IN_IMAGE}/payload-left-out.json"  # what the clean step's prune left out
PATCHES_PATH = f"{IN_IMAGE}/patches.json"
TRITON_CACHE_PATH = f"{IN_IMAGE}/triton-cache.json"  # the warm step's manifest (validation.tritoncache)
RUN_LABEL = f"{NS}.run"  # on every container a run creates, so cleanup finds them all
# The offline stand-in base's labels (cleanbuild.images.standin): the inputs of its key (JSON), the sha256 of the tar
# it was made from, and what the Debian archive gave it ("name=version ...": outside the pins).
STANDIN_INPUTS, STANDIN_TAR, STANDIN_DEBS = (f"{NS}.standin.{n}" for n in ("inputs", "tar", "debs"))
SCHEMA = 2


def label(name: str) -> str:
    return f"{NS}.{name}"


def release_repo(registry: str, arch: str, ck_mode: str) -> str:
    """One repository per (arch, CK mode): the tag convention itself carries neither."""
    if ck_mode not in CK_MODES:
        raise UsageError(f"CK mode {ck_mode!r} is not one of {', '.join(CK_MODES)}.")
    return f"{registry}/atom-{arch}" + ("-ckfree" if ck_mode == "ckfree" else "")


@dataclass(frozen=True)
class Source:
    sha: str
    describe: str | None
    date: str | None


@dataclass(frozen=True)
class ImageFacts:
    """What an image says about itself in versions.json (schema 2)."""

    arch: str
    ck_mode: str
    python: str | None
    rocm: str | None
    torch_hip: str | None
    packages: Mapping[str, str | None]
    sources: Mapping[str, Source]
    lock_sha256: str | None
    manifest_sha256: str | None

    @property
    def aiter(self) -> str | None:
        return normalise(self.packages.get("aiter"))

    @property
    def atom(self) -> str | None:
        return normalise(self.packages.get("atom"))

    @property
    def rocm_release(self) -> str | None:
        return rocm_version(self.rocm)


def read_versions(data: object, where: str) -> ImageFacts:
    """The strict reader: anything but a schema-2 versions.json is a UsageError naming what is wrong."""
    if not isinstance(data, Mapping):
        raise UsageError(f"{where}: versions.json is not a JSON object. To fix, rebuild the image with build-clean.")
    if data.get("schema") != SCHEMA:
        raise UsageError(f"{where}: versions.json has schema {data.get('schema')!r}, this tool reads {SCHEMA}. To fix, rebuild the image with this version of build-clean.")
    try:
        packages = dict(data["packages"])
        sources = {name: Source(str(s["sha"]), s.get("describe"), s.get("date"))
                   for name, s in dict(data.get("sources") or {}).items() if s}
        facts = ImageFacts(str(data["arch"]), str(data["ck_mode"]), data.get("python"), data.get("rocm"),
                           data.get("torch_hip"), packages, sources, data.get("lock_sha256"),
                           data.get("manifest_sha256"))
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{where}: versions.json lacks or mangles {exc}. To fix, rebuild the image with build-clean.") from None
    if facts.ck_mode not in CK_MODES:
        raise UsageError(f"{where}: versions.json ck_mode {facts.ck_mode!r} is not one of {', '.join(CK_MODES)}.")
    if facts.arch not in ARCHS:  # the release repository is named after it: never a free-form string
        raise UsageError(f"{where}: versions.json arch {facts.arch!r} is not one of {', '.join(ARCHS)}.")
    return facts


def image_labels(labels: Mapping[str, str] | None) -> tuple[str | None, str | None]:
    """(arch, ck_mode) from an image's labels; None where the image does not say."""
    labels = labels or {}
    return labels.get(label("arch")), labels.get(label("ck-mode"))
