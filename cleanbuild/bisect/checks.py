"""The checks a bisection can run, parsed once from `--check NAME`: `patch:<name>`, a validation check, `import`.

Pure: names in, typed checks out. Which validation checks run from a source tree (no image) is decided here.
"""

from __future__ import annotations

from dataclasses import dataclass

from cleanbuild.core.errors import UsageError

COMPONENTS = ("aiter", "atom")
PATCH, VALIDATION, IMPORT = "patch", "validation", "import"
# validation.cli.CHECK_NAMES that run from an aiter source tree: aiter's dispatcher and kernels, its configs.
SOURCE_CHECKS = ("gemm-hipblaslt", "gemm-triton", "moe-triton", "gemm-asm", "lds-budget", "tuned-csv-coverage")
# These read the image itself (the installed aiter, its environment): only a real build can check them.
IMAGE_CHECKS = ("arch-consistency", "gemm-ck")
# The patches (patches.catalog) and the package whose files they target.
PATCHES = {"tuned-gemm-hipblaslt": "aiter", "no-asm-gemm-gfx950": "aiter", "jit-core-runtime-error": "aiter",
           "atom-ck-free-triton-gemm": "atom", "atom-ck-free-triton-moe": "atom",
           "atom-ck-free-triton-norm": "atom", "atom-ck-free-native-act": "atom",
           "atom-ck-free-native-topk": "atom"}


@dataclass(frozen=True)
class Check:
    kind: str  # PATCH, VALIDATION or IMPORT
    name: str  # the patch or validation check's own name; "import" for IMPORT

    @property
    def label(self) -> str:
        return f"patch:{self.name}" if self.kind == PATCH else self.name


def component(name: str) -> str:
    if name not in COMPONENTS:
        raise UsageError(f"bisect {name!r} failed because it is not a component bisect knows. To fix, name one of: "
                         f"{', '.join(COMPONENTS)}.")
    return name


def default_checks(comp: str, image: bool = False) -> tuple[Check, ...]:
    """Every patch of the component, and (aiter) every validation check that needs no image; with --image, every
    validation check (the validate step of build-clean, on each commit's image)."""
    if image:
        return tuple(Check(VALIDATION, v) for v in (*SOURCE_CHECKS, *IMAGE_CHECKS))
    patches = tuple(Check(PATCH, p) for p, owner in PATCHES.items() if owner == comp)
    return patches + (tuple(Check(VALIDATION, v) for v in SOURCE_CHECKS) if comp == "aiter" else ())


def parse(comp: str, names: tuple[str, ...], image: bool = False) -> tuple[Check, ...]:
    """--check NAME ... (none: the defaults) -> checks, each one once, in the order given."""
    if image and comp != "aiter":
        raise UsageError(f"bisect {comp} --image failed because every check an image runs validates aiter's code, "
                         f"which does not change with {comp}. To fix, drop --image (patch:<name> and import check "
                         f"{comp}'s source tree), or bisect aiter --image.")
    if not names:
        return default_checks(comp, image)
    checks: list[Check] = []
    for name in names:
        check = _one(comp, name, image)
        if check not in checks:
            checks.append(check)
    return tuple(checks)


def _one(comp: str, name: str, image: bool) -> Check:
    if image and (name.startswith("patch:") or name == IMPORT):
        raise UsageError(f"--check {name} failed because it checks the source tree, and --image checks what is "
                         "built: a drifting patch makes a commit untestable there. To fix, drop --image for it, or "
                         f"choose validation checks: {', '.join((*SOURCE_CHECKS, *IMAGE_CHECKS))}.")
    if name.startswith("patch:"):
        patch = name.removeprefix("patch:")
        if PATCHES.get(patch) != comp:
            known = ", ".join(f"patch:{p}" for p, owner in PATCHES.items() if owner == comp)
            raise UsageError(f"--check {name} failed because {comp} has no such patch. To fix, name one of: {known}.")
        return Check(PATCH, patch)
    if name == IMPORT:
        return Check(IMPORT, IMPORT)
    if name in (*SOURCE_CHECKS, *IMAGE_CHECKS) and comp != "aiter":
        raise UsageError(f"--check {name} failed because validation runs aiter's code, which does not change with "
                         f"{comp}. To fix, bisect aiter for it, or check {comp} with patch:<name> or import.")
    if name in SOURCE_CHECKS or (image and name in IMAGE_CHECKS):
        return Check(VALIDATION, name)
    if name in IMAGE_CHECKS:
        raise UsageError(f"--check {name} failed because it reads an installed image. To fix, add --image (each "
                         f"step then builds the commit's image), or choose one of: {', '.join(SOURCE_CHECKS)}.")
    raise UsageError(f"--check {name} failed because no check has that name. To fix, name patch:<name> "
                     f"({', '.join(PATCHES)}), import, or one of: {', '.join((*SOURCE_CHECKS, *IMAGE_CHECKS))}.")
