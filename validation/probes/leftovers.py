"""Things a build leaves behind: pip/uv/apt caches and secrets-looking files.

Secrets are reported by path only. A file is read only as far as needed to tell whether it holds a credential
(a "PRIVATE KEY-----" armour line, an `auths` entry, a password in a git remote URL); nothing of it is kept.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from validation.probes.image import OK, PRESENT, Finding, Image

SHOW = 6
HOME_CACHES = (".cache/pip", ".cache/uv")
NAMED_SECRETS = (".netrc", ".pypirc", ".git-credentials", ".aws/credentials", ".config/gh/hosts.yml",
                 ".cache/huggingface/token", ".huggingface/token", ".kube/config")
WALK_ROOTS = ("/root", "/home", "/etc", "/opt", "/app", "/workspace", "/workdir", "/srv", "/tmp", "/var/tmp",
              "/usr/local/etc")
SKIP_DIRS = {"site-packages", "dist-packages", "node_modules", "__pycache__", "proc", "sys", "dev"}
KEY_SUFFIXES = (".pem", ".key", ".p8")
MAX_FILES = 300_000
ARMOUR = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----")
STDLIB = re.compile(r"/lib/python[0-9.]+$")
URL_CREDENTIAL = re.compile(r"://[^/\s:@]+:[^/\s@]+@")


def folder_size(folder: Path, limit: int = 100_000) -> tuple[int, int]:
    total = files = 0
    for dirpath, _, names in os.walk(folder):
        for name in names:
            files += 1
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
            if files >= limit:
                return total, files
    return total, files


def cache_folders(ctx: Image) -> list[Path]:
    found = [home / rel for home in ctx.homes() for rel in HOME_CACHES]
    for var, tool in (("PIP_CACHE_DIR", None), ("UV_CACHE_DIR", None), ("XDG_CACHE_HOME", "pip"), ("XDG_CACHE_HOME", "uv")):
        if ctx.env.get(var):
            found.append(ctx.path(ctx.env[var]) / tool if tool else ctx.path(ctx.env[var]))
    tmp = ctx.path("/tmp")
    if tmp.is_dir():
        found += sorted(p for p in tmp.iterdir() if p.is_dir() and p.name.startswith(("pip-", "uv-")))
    unique: list[Path] = []
    for p in found:
        if p.is_dir() and p not in unique:
            unique.append(p)
    return unique


def installer_caches(ctx: Image) -> Finding:
    f = Finding("installer-caches", "no pip, uv or apt caches left in the image", OK,
                fix="install with --no-cache-dir / UV_NO_CACHE=1 and `rm -rf /var/cache/apt/archives/*.deb` in the same RUN")
    for folder in cache_folders(ctx):
        size, files = folder_size(folder)
        if files:
            f.evidence.append(f"{ctx.shown(folder)}: {files} files, {size / 2**20:.1f} MiB")
    archives = ctx.path("/var/cache/apt/archives")
    debs = sorted(archives.glob("*.deb")) if archives.is_dir() else []
    if debs:
        size = sum(d.stat().st_size for d in debs)
        f.evidence.append(f"{ctx.shown(archives)}: {len(debs)} .deb files, {size / 2**20:.1f} MiB")
    f.status = PRESENT if f.evidence else OK
    if not f.evidence:
        f.evidence.append("none of ~/.cache/pip, ~/.cache/uv, $PIP_CACHE_DIR, $UV_CACHE_DIR, /tmp/pip-*, apt archives")
    return f


def secrets(ctx: Image) -> Finding:
    f = Finding("secrets", "no secrets-looking files (keys, tokens, credentials) in the image", OK,
                fix="pass credentials as BuildKit secrets (--secret), never COPY or ARG them; rebuild without them")
    hits = sorted(set(named_secrets(ctx)) | set(walk_secrets(ctx, f)))
    f.evidence[:0] = [f"{path} ({why}; content not shown)" for path, why in hits[:SHOW * 2]]
    if len(hits) > SHOW * 2:
        f.evidence.insert(SHOW * 2, f"... and {len(hits) - SHOW * 2} more")
    f.status = PRESENT if hits else OK
    if not hits:
        f.evidence.append(f"none found in homes and {', '.join(WALK_ROOTS[:4])}, ...")
    return f


def named_secrets(ctx: Image) -> list[tuple[str, str]]:
    hits = []
    for home in ctx.homes():
        for rel in NAMED_SECRETS:
            file = home / rel
            if file.is_file() and file.stat().st_size > 0:
                hits.append((ctx.shown(file), "credentials file"))
        ssh = home / ".ssh"
        if ssh.is_dir():
            hits += [(ctx.shown(k), "SSH private key") for k in sorted(ssh.glob("id_*"))
                     if k.is_file() and not k.name.endswith(".pub")]
        docker = home / ".docker" / "config.json"
        if docker.is_file() and _docker_auths(docker):
            hits.append((ctx.shown(docker), "registry auths"))
    return hits


def _docker_auths(file: Path) -> bool:
    try:
        auths = json.loads(file.read_text()).get("auths") or {}
    except (OSError, ValueError, AttributeError):
        return False
    return any(isinstance(v, dict) and (v.get("auth") or v.get("identitytoken")) for v in auths.values())


def walk_secrets(ctx: Image, f: Finding) -> list[tuple[str, str]]:
    hits, visited = [], 0
    for start in (ctx.path(r) for r in WALK_ROOTS):
        for dirpath, dirnames, names in os.walk(start):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith("rocm")]
            if STDLIB.search(dirpath) and "test" in dirnames:
                dirnames.remove("test")  # CPython's own test suite ships throw-away test keys
            if ".git" in dirnames:
                dirnames.remove(".git")
                if _git_url_credential(Path(dirpath) / ".git" / "config"):
                    hits.append((ctx.shown(Path(dirpath) / ".git" / "config"), "credential in a remote URL"))
            for name in names:
                visited += 1
                if name.endswith(KEY_SUFFIXES) and _private_key(Path(dirpath) / name):
                    hits.append((ctx.shown(Path(dirpath) / name), "private key"))
            if visited > MAX_FILES:
                f.evidence.append(f"file walk stopped after {MAX_FILES} files (not every folder was searched)")
                return hits
    return hits


def _private_key(file: Path) -> bool:
    try:
        if file.is_symlink() or file.stat().st_size > 1 << 20:
            return False
        with file.open("rb") as fh:
            return bool(ARMOUR.search(fh.read(1 << 16)))
    except OSError:
        return False


def _git_url_credential(config: Path) -> bool:
    try:
        return bool(URL_CREDENTIAL.search(config.read_text(errors="replace")))
    except OSError:
        return False
