"""What `--src` changes in a plan, as pure functions of the resolved checkouts (cleanbuild.request.checkout).

- A checkout on the wheel route builds its component's wheel from a snapshot commit of its working tree: the
  build argument <NAME>_REF names the snapshot (so the unit's key does), <NAME>_REPO the copy of the checkout's
  history the prepare step puts in that unit's own build context. Every other unit keeps its key and is reused.
- Checkouts on the overlay route make one `dev` unit over the clean image (docker/Dockerfile.dev): its context
  holds exactly the changed files and a manifest; its key names the clean image's key, the files' blob SHAs,
  the checkouts' HEADs and the Dockerfile and script that apply them.
- The image is labelled dirty with the checkouts' HEADs and a hash of the diff, and gets a dev tag, never a
  release tag.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from cleanbuild.core import metadata
from cleanbuild.core.spec import DOCKER_DIR
from cleanbuild.images.tag import safe_field
from cleanbuild.request.build import Build
from cleanbuild.request.checkout import Checkout

DEV_DIR = DOCKER_DIR / "dev"
# What every RUN ends with (docker/scripts/clamp_times.py); the dev and patch layers read it from their own context.
CLAMP_SCRIPT = DOCKER_DIR / "scripts" / "clamp_times.py"
DIRTY_LABEL = metadata.label("dirty")
DIFF_LABEL = metadata.label("diff-hash")


def dirty(src: tuple[Checkout, ...]) -> tuple[Checkout, ...]:
    """The checkouts that change the image (route overlay or wheel)."""
    return tuple(c for c in src if c.route != "none")


def on_route(src: tuple[Checkout, ...], route: str) -> tuple[Checkout, ...]:
    return tuple(c for c in src if c.route == route)


def diff_hash(src: tuple[Checkout, ...]) -> str:
    """One hash over every dirty checkout's diff (the dev tag and the label)."""
    changed = dirty(src)
    if len(changed) == 1:
        return changed[0].diff_hash
    return hashlib.sha256("".join(f"{c.component}:{c.diff_hash}\n" for c in changed).encode()).hexdigest()


def dev_tag(user: str, src: tuple[Checkout, ...]) -> str:
    return f"dev-{safe_field(user)[:32]}-{diff_hash(src)[:12]}"


def overlay_manifest(src: tuple[Checkout, ...]) -> dict[str, Any]:
    """The dev layer's manifest: files to copy and to delete, as site-packages paths, with their blob SHAs."""
    chosen = on_route(src, "overlay")
    return {
        "schema": 1,
        "sources": {c.component: {"path": str(c.path), "head": c.head, "pin": c.pin, "diff_hash": c.diff_hash}
                    for c in chosen},
        "files": sorted([f.path, f.blob] for c in chosen for f in c.overlay_files if f.status != "deleted"),
        "deleted": sorted(f.path for c in chosen for f in c.overlay_files if f.status == "deleted"),
    }


def dev_inputs(src: tuple[Checkout, ...]) -> dict[str, str]:
    """The dev unit's own key inputs (besides the clean image's key and Dockerfile.dev)."""
    manifest = overlay_manifest(src)
    return {"overlay": _digest({k: manifest[k] for k in ("files", "deleted")}),
            "heads": " ".join(f"{c.component}={c.head}" for c in on_route(src, "overlay")),
            "overlay-script": hashlib.sha256((DEV_DIR / "overlay.py").read_bytes()).hexdigest(),
            "clamp-script": clamp_digest()}


def clamp_digest() -> str:
    return hashlib.sha256(CLAMP_SCRIPT.read_bytes()).hexdigest()


def dev_context(cache_dir: Path, src: tuple[Checkout, ...]) -> Path:
    return cache_dir / "contexts" / f"dev-{_digest(dev_inputs(src))[:16]}"


def src_context(prep_context: Path, checkout: Checkout) -> Path:
    """The wheels context for a component built from a checkout: the profile's context, its repository replaced."""
    return prep_context.with_name(f"{prep_context.name}-src-{checkout.component}-{checkout.snapshot[:12]}")


def wheel_args(args: dict[str, str], checkout: Checkout) -> dict[str, str]:
    name = checkout.component.upper()
    return {**args, f"{name}_REPO": f"/local/repos/{checkout.component}.git", f"{name}_REF": checkout.snapshot}


def labels(src: tuple[Checkout, ...]) -> tuple[tuple[str, str], ...]:
    """dirty=true, the diff hash, and per checkout its HEAD, route and snapshot commit."""
    out = {DIRTY_LABEL: "true", DIFF_LABEL: diff_hash(src)}
    for c in dirty(src):
        out[metadata.label(f"src.{c.component}.head")] = c.head
        out[metadata.label(f"src.{c.component}.route")] = c.route
        out[metadata.label(f"src.{c.component}.snapshot")] = c.snapshot
    return tuple(sorted(out.items()))


def describe(checkout: Checkout) -> dict[str, Any]:
    """For `invoke plan` and the report: where it is, how it relates to the pin, the route and why, the files."""
    return {"component": checkout.component, "path": str(checkout.path), "head": checkout.head, "pin": checkout.pin,
            "relation": checkout.relation, "route": checkout.route, "decided_by": list(checkout.reasons),
            "diff_hash": checkout.diff_hash, "snapshot": checkout.snapshot,
            "changed": [{"path": c.path, "status": c.status} for c in checkout.changes]}


def why(checkout: Checkout) -> str:
    """One line: the route and the files that decided it."""
    if checkout.route == "none":
        return "none: nothing that reaches the image changed against the pin (the pinned build)"
    what = {"overlay": "a layer of the changed files over the clean image (no wheel build)",
            "wheel": f"the {checkout.component} wheel rebuilt from the checkout, everything else reused"}[checkout.route]
    files = ", ".join(checkout.reasons[:6]) + (f" and {len(checkout.reasons) - 6} more" if len(checkout.reasons) > 6 else "")
    return f"{checkout.route}: {what}; decided by {files}"


def relation_text(checkout: Checkout) -> str:
    words = {"same": "the pinned commit", "descendant": "a descendant of the pin", "ancestor": "an ancestor of the pin",
             "unrelated": "unrelated to the pin"}
    return f"{words[checkout.relation]} {checkout.pin[:12]}"


def rows(checkout: Checkout, options: Build, release_repo: str) -> dict[str, str]:
    """`invoke plan`'s table for one checkout: HEAD and the pin, the route and why, the files, the image's tag."""
    changed = ", ".join(f"{c.status} {c.path}" for c in checkout.changes[:20])
    more = f" and {len(checkout.changes) - 20} more" if len(checkout.changes) > 20 else ""
    image = (f"{release_repo}:{dev_tag(options.request.user, options.src)} (dev tag, labelled dirty)" if dirty(options.src)
             else "the pinned build")
    return {"head": f"{checkout.head} ({relation_text(checkout)})", "path": why(checkout),
            "changed": (changed + more) or "nothing", "image": image}


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
