"""clamp_times.py SINCE_NS [EPOCH]: give every path this RUN wrote the build's time, so its layer's bytes are a
function of its inputs without BuildKit's rewrite-timestamp pass (which decompresses, re-tars and recompresses each
new layer).

SINCE_NS is `date +%s%N` taken as the RUN starts. Every file, folder and link on the root file system whose mtime
is later (less a second of slack, SLACK_NS) gets mtime EPOCH (default 315532800, 1980-01-01: the build's
SOURCE_DATE_EPOCH, which cleanbuild.images.buildx_argv passes and the image config carries): the layer BuildKit
makes of this RUN then holds the same times on every build. Paths written with an older time (a wheel's unzip keeps
the zip's) are left as they came. Mount points (the RUN's bind mounts, its secrets, /proc) are neither followed nor
touched. Stdlib only: it runs in every build stage that has a Python (the base image's or the build venv's).
"""

from __future__ import annotations

import os
import sys

DEFAULT_EPOCH = 315532800
# A file system stamps times from the kernel's coarse clock, up to a tick (a few ms) behind the clock `date` reads:
# a folder made right after t0 can carry a time before it (measured: /out/torch of `mkdir -p /out/torch` right
# after t0, 2026-12-03). Nothing below this RUN was written in the second before it: every RUN clamps what it
# wrote, and every COPY keeps its source's times.
SLACK_NS = 10**9


def mount_points(mountinfo: str = "/proc/self/mountinfo") -> set[str]:
    """Every mount point but the root (field 5 of each mountinfo line; octal escapes such as \\040 decoded)."""
    points = set()
    with open(mountinfo, encoding="utf-8") as lines:
        for line in lines:
            fields = line.split()
            if len(fields) > 4:
                points.add(fields[4].encode().decode("unicode_escape"))
    points.discard("/")
    return points


def clamp(root: str, since_ns: int, epoch_ns: int, skip: set[str]) -> int:
    """Set the mtime (and atime) of every path under root newer than since_ns to epoch_ns; returns how many."""
    count = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            if entry.path in skip:
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            count += _clamp_one(entry.path, entry.stat(follow_symlinks=False).st_mtime_ns, since_ns, epoch_ns)
    return count + _clamp_one(root, os.lstat(root).st_mtime_ns, since_ns, epoch_ns)


def _clamp_one(path: str, mtime_ns: int, since_ns: int, epoch_ns: int) -> int:
    if mtime_ns <= since_ns:
        return 0
    os.utime(path, ns=(epoch_ns, epoch_ns), follow_symlinks=False)
    return 1


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or not all(arg.isdigit() for arg in argv[1:]):
        print("usage: clamp_times.py SINCE_NS [EPOCH] (SINCE_NS: `date +%s%N` at the RUN's start)", file=sys.stderr)
        return 2
    epoch = int(argv[2]) if len(argv) == 3 else DEFAULT_EPOCH
    clamp("/", int(argv[1]) - SLACK_NS, epoch * 10**9, mount_points())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
