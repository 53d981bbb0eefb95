"""Where this clone of the repository is (REPO_ROOT), and the one check that the host package runs from a clone.

The host reads what sits beside the package (docker/, validation/, patches/) and writes .cache/ and reports/ there,
so it runs from a clone, installed editable (`pip install -e .`: the clone's root goes on sys.path, which is where
validation and patches are imported from). `pip install .` or `pipx install .` copies only the cleanbuild package
into site-packages (where docker/ is the docker SDK); there the console script says so before anything else runs.
Standard library only: cleanbuild.cli.main checks this before its first other import.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# What a clone has beside the package and an installed copy does not.
BESIDE = ("pyproject.toml", "docker/Dockerfile.wheels", "validation/core/archs.py", "patches/__main__.py")


def not_a_clone(root: Path | None = None) -> str | None:
    """The one-line error when the package does not sit in a clone (root: REPO_ROOT), None when it does."""
    root = root or REPO_ROOT
    missing = [part for part in BESIDE if not (root / part).is_file()]
    if not missing:
        return None
    return (f"error: atom-build failed because it runs from a clone of its repository, and this copy of it "
            f"({root / 'cleanbuild'}) has no {missing[0]} beside it: `pip install .` and `pipx install .` copy only "
            "the package. To fix, install it from a clone: `git clone` the repository, then `pip install -e .` in "
            "it (README: Install).")
