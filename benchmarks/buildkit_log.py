"""What a BuildKit plain-progress log says a build spent exporting its image (the bench scripts read it).

BuildKit prints each vertex's lines under its number: `#9 exporting to image`, then `#9 exporting layers 23.4s done`,
... and `#9 DONE 23.4s`. The "exporting to image" vertex is the image store's part of a build: the new layers'
blobs (tar, digest, compression), the manifest and config, the name and, on the containerd store, the unpack. On
Docker 20.10's classic store it registers the layers and writes the image; the blobs wait for a push.
"""

from __future__ import annotations

import re
from pathlib import Path

_EXPORT = re.compile(r"^(#\d+) exporting to (?:image|docker image format)\s*$", re.M)
_DONE = re.compile(r"^(#\d+) DONE ([0-9.]+)s\s*$", re.M)


def exporting_seconds(text: str) -> float | None:
    """The seconds of the log's image-export vertex (summed, should a log hold several), None without one."""
    vertices = set(_EXPORT.findall(text))
    done = [float(s) for vertex, s in _DONE.findall(text) if vertex in vertices]
    return round(sum(done), 1) if done else None


def exports(run_dir: Path, units: list[str]) -> dict[str, float]:
    """Each unit's image-export seconds from its log in run_dir (`<unit>.log`, as the build writes it); a unit
    without a log or without an export in it is left out."""
    out = {}
    for name in units:
        log = run_dir / f"{name}.log"
        seconds = exporting_seconds(log.read_text(errors="replace")) if log.is_file() else None
        if seconds is not None:
            out[name] = seconds
    return out
