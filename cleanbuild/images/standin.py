"""The offline profile's stand-in base, made reproducibly, and what the Debian archive gave it.

`mmdebstrap SUITE` with plan.STANDIN_MMDEBSTRAP in plan.STANDIN_ENV's environment (SOURCE_DATE_EPOCH set, nothing of
the caller's that reaches the tar) gives a byte-identical tar as long as the Debian archive serves the same packages.
docker/standin/Dockerfile adds it FROM scratch on the engine's own BuildKit (cleanbuild.images.buildx.build_here), so
the same tar gives the same image ID; `docker import`, used before, dated each import and gave the same tar two IDs.

The archive itself is not pinned (snapshot.debian.org does not answer from CI's machines): what it served is
recorded beside the tar (archive.json: each suite's Release file, every installed package's version, the tar's
sha256, how its .pyc are checked), put in the image's labels (cleanbuild.core.metadata.STANDIN_*: the package
versions and the tar's sha256, functions of its bytes, so they leave its digest reproducible; not the Release files'
dates, which move every time the archive is published) and in the build report (cleanbuild.images.report.standin).

The cache folder: <cache>/standin/<tag>/ holds context/base.tar (the build's whole context), archive.json and the
build's log; it is made in a temporary folder and renamed into place, so a half-made tar is never built from.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from cleanbuild.core import metadata
from cleanbuild.core.errors import EnvironmentProblem
from cleanbuild.core.refs import split_image
from cleanbuild.core.run import CommandFailed, run
from cleanbuild.images import buildx
from cleanbuild.images.plan import STANDIN_DOCKERFILE, STANDIN_MMDEBSTRAP, Standin

RECORD = "archive.json"
RELEASE_FIELDS = ("origin", "label", "suite", "codename", "version", "date")


def folder(cache_dir: Path, image: str) -> Path:
    return cache_dir / "standin" / split_image(image)[1]


def record(where: Path) -> dict[str, Any] | None:
    """The archive record made with the tar in where, or None when either is missing."""
    if not (where / "context" / "base.tar").is_file():
        return None
    try:
        return dict(json.loads((where / RECORD).read_text()))
    except (OSError, ValueError, TypeError):
        return None


# Printed by a hook before mmdebstrap cleans apt's lists: each suite's Release file and dpkg's status, read from the
# chroot and never written into the tar. mmdebstrap sends a hook's output to its standard error, in root and in
# unshare mode alike (where a hook cannot write into the caller's folders).
BEGIN, END = "atom-build-archive-begin", "atom-build-archive-end"
SHOW_ARCHIVE = f'--customize-hook=echo {BEGIN}; cat "$1"/var/lib/apt/lists/*Release "$1"/var/lib/dpkg/status; echo {END}'


def make(standin: Standin, where: Path) -> dict[str, Any]:
    """The tar (where/context/base.tar) and its archive record; returns the record."""
    where.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=where.parent, prefix=f".{where.name}."))
    try:
        (tmp / "context").mkdir()
        tar = tmp / "context" / "base.tar"  # mmdebstrap picks the format from the suffix
        try:
            result = run(["mmdebstrap", *STANDIN_MMDEBSTRAP, SHOW_ARCHIVE, "--include=" + ",".join(standin.packages),
                          standin.suite, str(tar)], capture=True, env=standin.environment(os.environ), inherit_env=False)
        except CommandFailed as exc:
            raise EnvironmentProblem(f"making the stand-in base failed because mmdebstrap failed: {exc}. To fix, "
                                     "check the Debian mirror and that mmdebstrap runs here.") from None
        made = archive(result.stderr.partition(f"{BEGIN}\n")[2].partition(f"{END}\n")[0], tar)
        (tmp / RECORD).write_text(json.dumps(made, indent=1, sort_keys=True) + "\n")
        shutil.rmtree(where, ignore_errors=True)
        tmp.rename(where)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return made


def archive(shown: str, tar: Path) -> dict[str, Any]:
    """What the archive served (the Release files and dpkg's status, as the hook printed them) and the tar's sha256."""
    with tar.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256")
    found = paragraphs(shown)
    releases = [{k: p[k] for k in RELEASE_FIELDS if k in p} for p in found if "date" in p and "package" not in p]
    packages = {p["package"]: p.get("version", "") for p in found
                if "package" in p and p.get("status", "").endswith(" installed")}
    if not (releases and packages):
        raise EnvironmentProblem("making the stand-in base failed because mmdebstrap's hook printed no Release file "
                                 "or no installed package. To fix, check that mmdebstrap runs its customize hooks.")
    return {"releases": sorted(releases, key=lambda r: r.get("codename", "")), "packages": packages,
            "tar_sha256": f"sha256:{digest.hexdigest()}", "pyc": pyc_checks(tar)}


# PEP 552: a .pyc's second 32-bit word says how it is checked against its source.
PYC_FLAGS = {0: "source time", 1: "unchecked hash", 3: "checked hash"}


def pyc_checks(tar: Path) -> dict[str, int]:
    """How many .pyc in the tar are checked which way. py3compile under SOURCE_DATE_EPOCH writes checked-hash ones;
    one checked by the source's time was written by the import system of a Python a maintainer script ran, which
    the caller's environment turned on before plan.STANDIN_ENV (then the tar followed the caller)."""
    found: dict[str, int] = {}
    with tarfile.open(tar) as archive:
        for member in archive:
            handle = archive.extractfile(member) if member.isfile() and member.name.endswith(".pyc") else None
            if handle is not None:
                word = int.from_bytes(handle.read(8)[4:8], "little")
                kind = PYC_FLAGS.get(word, f"flags {word}")
                found[kind] = found.get(kind, 0) + 1
    return dict(sorted(found.items()))


def paragraphs(text: str) -> list[dict[str, str]]:
    """deb822 paragraphs (Release files, dpkg's status; an InRelease file's armour and signature add paragraphs of
    their own, or none: base64 holds no colon): each field's first line, by lower-case name."""
    out: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if current:
                out.append(current)
            current = {}
        elif not line[0].isspace() and ":" in line:
            name, _, value = line.partition(":")
            current[name.strip().lower()] = value.strip()
    return out


def labels(standin: Standin, made: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """What the image says it is made from: the key's inputs, and what the archive gave (outside the pins)."""
    debs = " ".join(f"{name}={version}" for name, version in sorted(made["packages"].items()))
    return ((metadata.STANDIN_INPUTS, json.dumps(standin.inputs(), sort_keys=True, separators=(",", ":"))),
            (metadata.STANDIN_TAR, made["tar_sha256"]), (metadata.STANDIN_DEBS, debs))


def build(standin: Standin, where: Path, image: str, made: dict[str, Any], *, reproducible: bool) -> str:
    """The image from where/context/base.tar, named image; returns its ID."""
    return buildx.build_here(STANDIN_DOCKERFILE, where / "context", image, labels(standin, made), where / "build.log",
                             reproducible=reproducible)

