"""What every probe reads, the Image: the target arch, the environment, the filesystem root and the image's Python;
and what each probe returns, a Finding.

Probes take an Image and return a Finding; nothing here imports aiter or ATOM. Tests point `root` and
`sys_path` at a fake tree; inside an image they are "/" and the interpreter's own sys.path.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

OK = "ok"
PRESENT = "PRESENT"
UNKNOWN = "unknown"
WARNING = "warning"  # something to act on that is not a pitfall: tuned-CSV coverage below the threshold; exit 0
STATUSES = (OK, PRESENT, WARNING, UNKNOWN)


@dataclass
class Finding:
    id: str
    title: str
    status: str
    evidence: list[str] = field(default_factory=list)
    fix: str = ""

    def to_json(self) -> dict:
        return {"id": self.id, "title": self.title, "status": self.status, "evidence": list(self.evidence),
                "fix": self.fix}


@dataclass
class Image:
    """The image the probes read (the audit's context; validation's checks get validation.checks.context.Context)."""

    arch: str | None  # the arch the image should serve: asked for, or inferred (None: cannot tell)
    arch_source: str = ""
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    root: Path = Path("/")
    sys_path: list[str] = field(default_factory=lambda: list(sys.path))
    python: str | None = None  # interpreter for `python -m pip check`; None: do not run pip
    meta_path: bool = False  # also ask importlib.util.find_spec (editable installs' finders): the real image only
    model: str | None = None
    tp: tuple[int, ...] = (1,)
    untuned_csv: Path | None = None
    cache: dict = field(default_factory=dict)  # per-run results shared by probes (distributions, patch checks)

    def path(self, absolute: str) -> Path:
        """An absolute in-image path under this context's root."""
        return self.root / absolute.lstrip("/")

    def homes(self) -> list[Path]:
        """Home folders to look in: root's, every /home/*, and $HOME when it is elsewhere."""
        found = [self.path("/root")]
        home_dir = self.path("/home")
        if home_dir.is_dir():
            found += sorted(p for p in home_dir.iterdir() if p.is_dir())
        home = self.env.get("HOME")
        if home and self.path(home) not in found:
            found.append(self.path(home))
        return [p for p in found if p.is_dir()]

    def shown(self, path: Path) -> str:
        """A path as it is inside the image (without the test root)."""
        try:
            return "/" + str(Path(path).relative_to(self.root)).lstrip("/") if self.root != Path("/") else str(path)
        except ValueError:
            return str(path)

    def read_json(self, absolute: str) -> dict | None:
        import json

        file = self.path(absolute)
        try:
            data = json.loads(file.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None


def line_of(text: str, needle: str) -> int | None:
    """1-based number of the first line holding needle."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    return None
