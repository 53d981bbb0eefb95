"""Test images derived from a base by a small hand-written Dockerfile: each target built with buildx --load under
a session-unique tag, every one removed when the block ends (also when a build fails)."""

from __future__ import annotations

import contextlib
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def derived_images(folder: Path, targets: tuple[str, ...], base: str, repo: str) -> Iterator[dict[str, str]]:
    """target -> tag of `folder`'s Dockerfile built at each target with BASE=base."""
    session, built = uuid.uuid4().hex[:8], {}
    try:
        for target in targets:
            tag = f"{repo}/{target}:{session}"
            argv = ["docker", "buildx", "build", "--network", "host", "--load", "--progress", "plain", "--target",
                    target, "--build-arg", f"BASE={base}", "-t", tag, str(folder)]
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
            assert proc.returncode == 0, proc.stderr[-3000:]
            built[target] = tag
        yield built
    finally:
        for tag in built.values():
            subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)  # noqa: S603,S607
