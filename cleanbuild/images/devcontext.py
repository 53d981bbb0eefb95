"""The build contexts `--src` needs, made by the prepare step (cleanbuild.images.srcplan says where and what):

- overlay route: a small folder with exactly the changed files (files/<site-packages path>), manifest.json and
  overlay.py (docker/dev); each file checked against the blob SHA the plan read, so an edit made after the plan
  cannot slip into an image keyed by the old content.
- wheel route: the part of the profile's wheels context a wheel target reads (docker/, lock/: hard links) and
  local/repos/<component>.git holding the checkout's history, its tags and the snapshot commit of its working tree
  (made again here; it must be the plan's snapshot). git-fetch.sh fetches that commit as it fetches a pin.
Each is built in a temporary folder and renamed into place; an existing one is reused (its name is its content).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from cleanbuild.core.errors import StepFailed
from cleanbuild.core.run import CommandFailed, run
from cleanbuild.images import srcplan
from cleanbuild.images.plan import Plan
from cleanbuild.request.checkout import Checkout, blob_sha, snapshot, snapshot_env


def prepare(plan: Plan) -> list[str]:
    """Make every context the plan's --src needs; returns what was made or found, for the step's detail."""
    notes = []
    for checkout, context in plan.src_contexts:
        notes.append(_atomic(context, functools.partial(_src_context, plan.prepare.context, checkout)))
    if "dev" in {u.name for u in plan.units}:
        notes.append(_atomic(plan.unit("dev").context, lambda tmp: _dev_context(plan.options.src, tmp)))
    return notes


def _atomic(dest: Path, make: Callable[[Path], None]) -> str:
    if dest.is_dir():
        return f"{dest.name} (reused)"
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}."))
    try:
        make(tmp)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest.name


def _changed_since_plan(checkout: Checkout, what: str) -> StepFailed:
    return StepFailed(f"the {checkout.component} checkout {checkout.path} changed since the plan read it ({what}). "
                      "To fix, run the command again (it reads the checkout anew).")


def _dev_context(src: tuple[Checkout, ...], tmp: Path) -> None:
    manifest = srcplan.overlay_manifest(src)
    roots = {f.path: c.path for c in srcplan.on_route(src, "overlay") for f in c.overlay_files}
    for rel, blob in manifest["files"]:
        data = (roots[rel] / rel).read_bytes() if (roots[rel] / rel).is_file() else b""
        if blob_sha(data) != blob:
            checkout = next(c for c in src if c.path == roots[rel])
            raise _changed_since_plan(checkout, rel)
        (tmp / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "files" / rel).write_bytes(data)
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    shutil.copyfile(srcplan.DEV_DIR / "overlay.py", tmp / "overlay.py")
    shutil.copyfile(srcplan.CLAMP_SCRIPT, tmp / "clamp_times.py")


def _git(*args: str, env: dict[str, str] | None = None) -> str:
    try:
        return run(["git", "-c", "safe.directory=*", *args], capture=True, echo=False, env=env, timeout=600).stdout
    except CommandFailed as exc:
        raise StepFailed(f"preparing a checkout's history failed because {exc}. To fix, check the checkout with `git status`.") from None


def _src_context(profile_context: Path, checkout: Checkout, tmp: Path) -> None:
    """What a wheel target reads of the context (docker/scripts, lock/, local/repos/<name>.git), no more: the
    profile's local wheels (torch) are read through their component images, and a smaller context loads faster."""
    for part in ("docker", "lock"):
        shutil.copytree(profile_context / part, tmp / part, copy_function=os.link, symlinks=True)
    repo = tmp / "local" / "repos" / f"{checkout.component}.git"
    repo.parent.mkdir(parents=True)
    _git("init", "-q", "--bare", str(repo))
    env = snapshot_env(checkout.path, repo / "objects", tmp / "index")
    _, commit = snapshot(checkout.path, checkout.head, env)
    (tmp / "index").unlink(missing_ok=True)
    if commit != checkout.snapshot:
        raise _changed_since_plan(checkout, f"snapshot {commit[:12]}, the plan's {checkout.snapshot[:12]}")
    _history(checkout.path, repo, env["GIT_ALTERNATE_OBJECT_DIRECTORIES"], commit)


def _history(root: Path, repo: Path, borrowed: str, commit: str) -> None:
    """The snapshot's history and the checkout's tags into repo, self-contained (alternates only while copying)."""
    alternates = repo / "objects" / "info" / "alternates"
    alternates.parent.mkdir(parents=True, exist_ok=True)
    alternates.write_text(borrowed + "\n")
    git_dir = Path(_git("-C", str(root), "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    if (git_dir / "shallow").is_file():
        shutil.copyfile(git_dir / "shallow", repo / "shallow")
    _git("--git-dir", str(repo), "fetch", "-q", "--no-write-fetch-head", str(root), "+refs/tags/*:refs/tags/*")
    _git("--git-dir", str(repo), "update-ref", "refs/heads/atom-build-src", commit)
    _git("--git-dir", str(repo), "config", "uploadpack.allowAnySHA1InWant", "true")
    _git("--git-dir", str(repo), "repack", "-a", "-d", "-q")
    alternates.unlink()
