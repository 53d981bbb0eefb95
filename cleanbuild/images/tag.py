"""The release tag: {user}_{YYYYMMDD}_rocm{ver}_aiter{ver}_atom{ver}, always a valid Docker tag.

A Docker tag is at most 128 characters of [A-Za-z0-9_.-] and does not start with '.' or '-'. '_' separates the
fields here, so inside a field every other character is mapped deterministically: '+' (PEP 440 local versions)
and '_' become '-', anything else outside the alphabet becomes '-', runs collapse. When the tag is too long,
commit hashes are shortened first, then the user name, then the longest field.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

MAX_LEN = 128
VALID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_BAD = re.compile(r"[^A-Za-z0-9.-]+")
_HASH = re.compile(r"(?<=[.\-g])([0-9a-f]{8,40})(?![0-9a-f])")
MISSING = "na"


def is_valid(tag: str) -> bool:
    return bool(VALID.match(tag)) and len(tag) <= MAX_LEN


def safe_field(value: str | None) -> str:
    """One field of the tag: only [A-Za-z0-9.-], no leading/trailing '.' or '-'."""
    if not value:
        return MISSING
    text = _BAD.sub("-", value.replace("+", "-").replace("_", "-"))
    text = re.sub(r"-{2,}", "-", text).strip(".-")
    return text or MISSING


@dataclass(frozen=True)
class TagParts:
    user: str
    date: str
    rocm: str | None
    aiter: str | None
    atom: str | None


@dataclass(frozen=True)
class Tag:
    value: str
    parts: TagParts
    steps: tuple[str, ...]  # what was changed to make it valid, for `invoke tag --dry-run`


def make_tag(parts: TagParts) -> Tag:
    fields = [
        safe_field(parts.user) if parts.user else "user",
        safe_field(parts.date),
        "rocm" + safe_field(parts.rocm),
        "aiter" + safe_field(parts.aiter),
        "atom" + safe_field(parts.atom),
    ]
    steps = []
    if fields[0] != parts.user:
        steps.append(f"user name {parts.user!r} made tag-safe as {fields[0]!r}")
    for shorten in (_short_hashes, _short_user, _short_longest):
        if len("_".join(fields)) <= MAX_LEN:
            break
        fields, note = shorten(fields)
        steps.append(note)
    value = "_".join(fields)
    assert is_valid(value), value  # every path above keeps the alphabet and the length
    return Tag(value, parts, tuple(steps))


def _short_hashes(fields: list[str]) -> tuple[list[str], str]:
    return [_HASH.sub(lambda m: m.group(1)[:7], f) for f in fields], "commit hashes shortened to 7 characters"


def _short_user(fields: list[str]) -> tuple[list[str], str]:
    return [fields[0][:16].rstrip(".-") or "user", *fields[1:]], "user name cut to 16 characters"


def _short_longest(fields: list[str]) -> tuple[list[str], str]:
    fields = list(fields)
    while len("_".join(fields)) > MAX_LEN:
        i = max(range(len(fields)), key=lambda k: len(fields[k]))
        digest = hashlib.sha256(fields[i].encode()).hexdigest()[:6]
        excess = len("_".join(fields)) - MAX_LEN
        keep = max(len(fields[i]) - excess - 7, 1)
        fields[i] = f"{fields[i][:keep].rstrip('.-')}-{digest}"
    return fields, "longest field cut, with a 6-character hash of the full value"

