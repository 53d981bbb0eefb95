"""One reader for the lock files uv writes (`uv pip compile --generate-hashes --annotation-style line`).

A lock is a header line (`# atom-build-lock {json}`: the inputs and the refs they came from) and requirement
blocks: a `name==version \\` line, its `--hash=` lines, and a `# via a, b` line naming what required it. The
per-component keys are computed from the blocks, never from the header: moving ATOM's pin changes the header of
every lock, and must not change the key of a wheel whose requirements did not move.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

HEADER = "# atom-build-lock "
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.\-]*)")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Block:
    name: str  # normalized project name
    text: str  # the requirement line and its hash lines, comments dropped
    via: tuple[str, ...]  # normalized names of what required it ("-r runtime.in" for a direct requirement)


def header(text: str) -> dict[str, Any] | None:
    first = text.split("\n", 1)[0]
    return json.loads(first[len(HEADER):]) if first.startswith(HEADER) else None


@functools.lru_cache(maxsize=32)
def blocks(text: str) -> tuple[Block, ...]:
    """The lock's requirement blocks, in order (kept per text: a plan splits and closes the same lock many times)."""
    out: list[tuple[str, list[str], list[str]]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or line.startswith("#"):
            continue
        if not line.startswith(" "):
            match = _NAME.match(line)
            if match is None:
                raise ValueError(f"lock line {line[:60]!r} is not a requirement")
            out.append((normalize(match.group(1)), [line.split(" #")[0].rstrip()], []))
        elif stripped.startswith("# via"):
            if out:
                out[-1][2].extend(normalize(v.strip()) if not v.strip().startswith("-r") else v.strip()
                                  for v in stripped.removeprefix("# via").split(",") if v.strip())
        elif not stripped.startswith("#") and out:
            out[-1][1].append(line.rstrip())
    return tuple(Block(name, "\n".join(lines), tuple(via)) for name, lines, via in out)


def package_lines(text: str) -> str:
    """The requirement blocks alone (no header, no comments): what a stage installs or downloads."""
    return "".join(b.text + "\n" for b in blocks(text))


def split(text: str, from_source: set[str]) -> tuple[str, str]:
    """(binary blocks, source blocks): what the profile builds from an sdist on purpose goes to the second."""
    all_blocks = blocks(text)
    missing = {normalize(n) for n in from_source} - {b.name for b in all_blocks}
    if missing:
        raise ValueError(f"components.deps.build names {', '.join(sorted(missing))}, which the lock lacks")
    wanted = {normalize(n) for n in from_source}
    return ("".join(b.text + "\n" for b in all_blocks if b.name not in wanted),
            "".join(b.text + "\n" for b in all_blocks if b.name in wanted))


def closure(text: str, seeds: set[str]) -> tuple[Block, ...]:
    """The blocks a set of projects needs: the seeds and, transitively, whatever the lock says they required
    (`# via seed`). aiter's build environment is the closure of aiter's requirements and torch's."""
    all_blocks = blocks(text)
    chosen = {normalize(s) for s in seeds}
    grew = True
    while grew:
        grew = False
        for block in all_blocks:
            if block.name not in chosen and chosen.intersection(block.via):
                chosen.add(block.name)
                grew = True
    return tuple(b for b in all_blocks if b.name in chosen)


def pins(found: tuple[Block, ...]) -> str:
    """`name==version` lines (no hashes: the wheels were hash-checked when they were downloaded)."""
    return "".join(b.text.split(" ", 1)[0].split("\\")[0].strip() + "\n" for b in found)
