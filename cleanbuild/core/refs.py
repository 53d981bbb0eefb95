"""The one check for every string that reaches git or names an image: refs, SHAs, repository URLs, image references.

A value that starts with '-' would reach git as an option (`--upload-pack=CMD` runs CMD), so nothing that
starts with '-' is a ref or a repository here, and callers still pass values after `--` / `--end-of-options`.
Ref names follow `git check-ref-format --allow-onelevel`; a URL takes one of git's network or file schemes
(never `ext::`, which runs commands). patches/upstream.py keeps a stdlib copy of git_ref (it cannot import this).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from cleanbuild.core.errors import UsageError

SHA = re.compile(r"^[0-9a-f]{40}$")
# git check-ref-format: no control characters, space, ~ ^ : ? * [ \ ; no "..", "@{", "//"; no component that
# starts with "." or ends with ".lock"; not "@", not ending in "/" or ".".
_REF_BAD = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|(^|/)\.|\.lock(/|$)|[/.]$|^/")
_SCHEMES = ("https://", "http://", "ssh://", "git://", "file://")
_SCP = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s]+$")  # git@github.com:ROCm/aiter.git
# Docker's reference grammar, simplified: [host[:port]/]path[:tag][@sha256:hex], lower-case path components.
# A first component is a registry host only with a '.', a port or as localhost (as Docker decides).
_IMAGE = re.compile(r"^(?:(?:localhost|[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)+)(?::[0-9]+)?/|[a-zA-Z0-9-]+:[0-9]+/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
                    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
                    r"(?:@sha256:[0-9a-f]{64})?$")
_IMAGE_ID = re.compile(r"^(?:sha256:)?[0-9a-f]{12,64}$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")  # Docker's tag grammar: never '/', never '..' first


def git_ref(text: str, what: str) -> str:
    """A full commit SHA or a ref name git accepts and no option parser can mistake for a flag."""
    value = str(text)
    if SHA.match(value):
        return value
    if not value or value.startswith("-") or value == "@" or _REF_BAD.search(value):
        raise UsageError(f"{what} {value!r} is not a commit SHA or a git ref name. To fix, pass a full 40-hex "
                         "commit or a branch or tag name (no leading '-', spaces or ~^:?*[\\).")
    return value


def sha(text: str, what: str) -> str:
    """A full 40-hex commit SHA (what a pin must be)."""
    value = str(text)
    if not SHA.match(value):
        raise UsageError(f"{what} {value!r} is not a full commit SHA. To fix, pass the 40-hex commit.")
    return value


def git_remote(text: str, what: str) -> str:
    """A repository git may be pointed at: an http(s)/ssh/git/file URL, user@host:path, or a local path."""
    value = str(text)
    bad = (not value or value.startswith("-") or "::" in value.split("/", 1)[0]
           or any(ord(c) < 0x20 or c == "\x7f" for c in value))
    if "://" in value and not value.startswith(_SCHEMES):
        bad = True
    if bad:
        raise UsageError(f"{what} {value!r} is not a repository URL or path. To fix, pass an https://, ssh://, "
                         "git:// or file:// URL, user@host:path, or a folder (no leading '-').")
    return value


def image_ref(text: str, what: str) -> str:
    """A Docker image reference (name[:tag][@sha256:digest]) or an image ID, checked before any engine call."""
    value = str(text)
    if not (_IMAGE.match(value) or _IMAGE_ID.match(value)) or len(value) > 255 or not port_in_range(_host(value)):
        raise UsageError(f"{what} {value!r} is not an image reference. To fix, pass NAME[:TAG], "
                         "REPO@sha256:DIGEST (64 hex) or an image ID.")
    return value


def image_tag(text: str, what: str) -> str:
    """A Docker tag (a release tag such as alice_20260801_rocm7.2_...): safe as one path component."""
    value = str(text)
    if not _TAG.match(value):
        raise UsageError(f"{what} {value!r} is not an image tag. To fix, pass up to 128 characters of "
                         "[A-Za-z0-9_.-], the first not '.' or '-' (the tag build-clean printed).")
    return value


def name_or_tag(text: str, what: str) -> str:
    """An image reference (REPO:TAG) or a bare tag: what may name a report folder."""
    value = str(text)
    return image_ref(value, what) if "/" in value or ":" in value or "@" in value else image_tag(value, what)


def port_in_range(host: str) -> bool:
    """False when a registry host (HOST[:PORT], the first component of a reference) names a port outside
    1-65535: localhost:99999/x passes the grammar and would fail only at the first pull or push."""
    port = host.rpartition(":")[2] if ":" in host else ""
    return not port.isdigit() or 1 <= int(port) <= 65535


def _host(reference: str) -> str:
    return reference.split("/", 1)[0] if "/" in reference else ""


class ImageName(NamedTuple):
    """An image reference in its parts: repository (registry host and port included), tag, digest."""

    repository: str
    tag: str  # "" when the reference names none (Docker would read 'latest'; callers decide)
    digest: str  # "sha256:..." when pinned, else ""


def parse_image(ref: str) -> ImageName:
    """Split NAME[:TAG][@DIGEST] the way Docker does; the one place that takes an image reference apart.

    A ':' is a tag only after the last '/', so a registry port (127.0.0.1:5000/x/y) stays in the repository,
    and the digest goes first so its 'sha256:' is never read as a tag. It checks nothing: image_ref does that.
    """
    name, _, digest = str(ref).partition("@")
    colon = name.rfind(":")
    if colon > name.rfind("/"):
        return ImageName(name[:colon], name[colon + 1:], digest)
    return ImageName(name, "", digest)


def split_image(ref: str) -> tuple[str, str]:
    """(repository, tag) of an image reference; the tag is "" when it has none (a digest is dropped)."""
    name = parse_image(ref)
    return name.repository, name.tag


def is_sha(text: str) -> bool:
    return bool(SHA.match(str(text)))
