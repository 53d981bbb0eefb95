"""The wheels stage's checks and records (stdlib only; runs in build stages and in the clean image).

    collect       check the component wheels under --in and write manifest.json and the three hash-pinned
                  requirement files, one per install layer (common/: the same for every arch, CK mode and
                  aiter/ATOM pin; atom/: ATOM; arch/: this arch's aiter)
    torch-triton  the triton requirement of a torch wheel's own metadata (triton-rocm==3.6.0 for ROCm torch)
    source-facts  commit, date and `git describe` of a source checkout, as JSON
    no-nvidia     fail when an nvidia-* distribution is installed in this interpreter
    scrub-uv      remove uv's per-distribution cache stamp (uv_cache.json) and its RECORD line

Which components must be there follows the Dockerfile.wheels build arguments, read from the environment
(TORCH_SOURCE, TORCHVISION_VERSION, MORI_SOURCE, ...). collect fails (exit 1, one line per problem) when an
expected wheel is missing, two wheels claim one project, two distributions own one file (PyPI triton and
triton-rocm both own triton/), or PREBUILD_KERNELS=1 and the aiter wheel holds no compiled kernels for GPU_ARCH.
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

INSTALLER = "uv"
# folder under --in -> the install layer its wheels go to (the clean image's layers, least changing first).
FOLDERS = {"torch": "common", "triton": "common", "deps": "common", "sdists": "common", "mori": "common",
           "atom": "atom", "mori-arch": "arch", "aiter": "arch"}
LAYERS = ("common", "atom", "arch")
TRITONS = ("triton", "triton-rocm", "pytorch-triton-rocm", "pytorch-triton")


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel_metadata(path: Path) -> email.message.Message:
    with zipfile.ZipFile(path) as zf:
        names = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        if len(names) != 1:
            raise ValueError(f"{path.name}: expected one .dist-info/METADATA, found {len(names)}")
        return email.parser.Parser().parsestr(zf.read(names[0]).decode("utf-8"), headersonly=True)


def owned_files(path: Path) -> set[str]:
    """The files a wheel installs outside its own .dist-info/.data folders (what two distributions may fight over)."""
    with zipfile.ZipFile(path) as zf:
        return {n for n in zf.namelist() if not n.endswith("/") and not re.match(r"[^/]+\.(dist-info|data)/", n)}


def compiled_kernels(path: Path, arch: str) -> list[str]:
    """aiter's prebuilt modules (aiter/jit/*.so) whose code objects name the arch (amdgcn-...--gfx942...)."""
    found = []
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if re.fullmatch(r"aiter/jit/[^/]+\.so", info.filename):
                with zf.open(info) as fh:
                    if arch.encode() in fh.read():
                        found.append(info.filename)
    return found


# ---- what is expected ------------------------------------------------------------------------------------------

def expected() -> dict[str, str]:
    """component -> where it came from, for every component the build arguments ask for."""
    out = {"torch": _torch_ref("torch", env("TORCH_VERSION")), "deps": "lock/deps.txt",
           "aiter": f"git:{env('AITER_REPO')}@{env('AITER_REF')}", "atom": f"git:{env('ATOM_REPO')}@{env('ATOM_REF')}"}
    for extra in ("torchvision", "torchaudio"):
        if env(f"{extra.upper()}_VERSION"):
            out[extra] = _torch_ref(extra, env(f"{extra.upper()}_VERSION"))
    triton = env("TRITON_SOURCE", "none")
    if triton == "torch":
        out["triton"] = f"as the torch wheel requires, from {env('TORCH_INDEX_URL')}"
    elif triton == "pypi":
        out["triton"] = f"pypi:{env('TRITON_PACKAGE', 'triton')}=={env('TRITON_VERSION')}"
    mori = env("MORI_SOURCE", "none")
    if mori == "pypi":
        out["mori"] = f"pypi:{env('MORI_PACKAGE')}=={env('MORI_VERSION')}"
    elif mori == "git":
        out["mori"] = f"git:{env('MORI_REPO')}@{env('MORI_REF')}"
    return out


def _torch_ref(name: str, version: str) -> str:
    if env("TORCH_SOURCE") == "index":
        return f"index:{env('TORCH_INDEX_URL')} {name}=={version}"
    return f"local:local/torch {name}"


def component_of(name: str, folder: str) -> str:
    key = normalize(name)
    if folder == "torch":
        return key if key in ("torch", "torchvision", "torchaudio") else "torch"
    if folder in ("mori", "mori-arch"):
        return "mori"
    if folder == "deps" and key == "flydsl":
        return "flydsl"
    return "deps" if folder == "sdists" else folder


# ---- collect ---------------------------------------------------------------------------------------------------

def collect(in_root: Path, out: Path) -> list[str]:
    errors: list[str] = []
    entries, owners = [], {}
    for folder, layer in FOLDERS.items():
        for whl in sorted((in_root / folder).glob("*.whl")):
            entry = _entry(whl, folder, layer, errors)
            if entry:
                entries.append(entry)
                _claim(owners, whl, entry["name"], errors)
    _check_projects(entries, errors)
    _check_components(entries, errors)
    _check_tritons(entries, errors)
    _check_kernels(entries, in_root, errors)
    installer = _installer(in_root / "installer", errors)
    if errors:
        return errors
    _write(out, entries, installer, in_root)
    return []


def _entry(whl: Path, folder: str, layer: str, errors: list[str]) -> dict | None:
    try:
        meta = wheel_metadata(whl)
    except (zipfile.BadZipFile, ValueError, KeyError) as exc:
        errors.append(f"unreadable wheel {whl.name} ({folder}): {exc}")
        return None
    return {"component": component_of(meta["Name"], folder), "name": meta["Name"], "version": meta["Version"],
            "filename": whl.name, "sha256": sha256(whl), "size": whl.stat().st_size,
            "layer": layer, "path": str(whl),
            "requires": meta.get_all("Requires-Dist") or []}


def _claim(owners: dict[str, str], whl: Path, name: str, errors: list[str]) -> None:
    clashes: dict[str, str] = {}
    for path in owned_files(whl):
        other = owners.setdefault(path, name)
        if other != name:
            clashes.setdefault(other, path)
    for other, path in clashes.items():
        errors.append(f"{other} and {name} both install {path} (and maybe more): the last one installed would "
                      "win silently. To fix, keep one of them (components.triton / the lock)")


def _check_projects(entries: list[dict], errors: list[str]) -> None:
    seen: dict[str, str] = {}
    for e in entries:
        key = normalize(e["name"])
        if key in seen:
            errors.append(f"project '{e['name']}' comes twice: {seen[key]} and {e['filename']}")
        seen[key] = e["filename"]


def _check_components(entries: list[dict], errors: list[str]) -> None:
    present = {e["component"] for e in entries}
    for component, ref in expected().items():
        if component not in present:
            errors.append(f"missing wheel for component '{component}' (from {ref}): its stage produced none")


def _check_tritons(entries: list[dict], errors: list[str]) -> None:
    names = sorted(e["name"] for e in entries if normalize(e["name"]) in TRITONS)
    if len(names) > 1:
        errors.append(f"two tritons in the closure: {' and '.join(names)}. To fix, keep exactly one (components.triton)")


def _check_kernels(entries: list[dict], in_root: Path, errors: list[str]) -> None:
    if env("PREBUILD_KERNELS", "0") != "1":
        return
    arch = env("GPU_ARCH")
    for e in entries:
        if e["component"] == "aiter" and not compiled_kernels(Path(e["path"]), arch):
            errors.append(f"component 'aiter': PREBUILD_KERNELS=1 but {e['filename']} ({e['size']} bytes) holds no "
                          f"compiled aiter/jit/*.so for {arch}; every kernel would JIT at runtime")


def _installer(folder: Path, errors: list[str]) -> dict | None:
    source = env("INSTALLER_SOURCE", "none")
    wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    if source == "none" and not wheels:
        return None
    if len(wheels) != 1:
        errors.append(f"component 'installer': expected one {INSTALLER} wheel, found {len(wheels)}")
        return None
    meta = wheel_metadata(wheels[0])
    if normalize(meta["Name"]) != INSTALLER:
        errors.append(f"component 'installer': {wheels[0].name} is {meta['Name']}, not {INSTALLER}")
        return None
    return {"name": meta["Name"], "version": meta["Version"], "filename": wheels[0].name,
            "sha256": sha256(wheels[0]), "size": wheels[0].stat().st_size,
            "source": f"pypi:{env('INSTALLER_PACKAGE', INSTALLER)}=={env('INSTALLER_VERSION')}"}


def _write(out: Path, entries: list[dict], installer: dict | None, in_root: Path) -> None:
    for layer in LAYERS:
        (out / layer).mkdir(parents=True, exist_ok=True)
        chosen = sorted((e for e in entries if e["layer"] == layer), key=lambda e: normalize(e["name"]))
        # Sorted and free of anything arch-specific: common/requirements.txt is byte-identical across archs.
        (out / layer / "requirements.txt").write_text(
            "".join(f"{e['name']}=={e['version']} --hash=sha256:{e['sha256']}\n" for e in chosen))
    if installer:
        (out / "common" / "installer.txt").write_text(
            f"{installer['name']}=={installer['version']} --hash=sha256:{installer['sha256']}\n")
    manifest = {
        "schema": 2, "arch": env("GPU_ARCH"), "ck_mode": "ck" if env("ENABLE_CK") == "1" else "ckfree",
        "prebuild_kernels": env("PREBUILD_KERNELS", "0") == "1", "aiter_triton_only": env("AITER_TRITON_ONLY", "0") == "1",
        "lock_sha256": env("LOCK_SHA256"), "installer": installer, "component_keys": _component_keys(),
        "sources": {name: _source(in_root / name / "SOURCE.json") for name in ("aiter", "atom")},
        "expected": expected(),
        "wheels": [{k: v for k, v in e.items() if k not in ("path", "requires")}
                   for e in sorted(entries, key=lambda e: normalize(e["name"]))],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def _component_keys() -> dict[str, str]:
    """COMPONENT_KEYS="name=key ...": the key of every component image this assembly read
    (cleanbuild/images/components.py)."""
    return dict(item.split("=", 1) for item in env("COMPONENT_KEYS").split() if "=" in item)


def _source(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


# ---- torch, sources, the installed venv ------------------------------------------------------------------------

def torch_triton(torch_dir: Path) -> str:
    """The triton requirement in the torch wheel's Requires-Dist (markers for this interpreter evaluated loosely)."""
    wheels = sorted(torch_dir.glob("torch-*.whl"))
    if not wheels:
        raise SystemExit("collect_wheels: error: no torch wheel to read the triton requirement from")
    for req in wheel_metadata(wheels[0]).get_all("Requires-Dist") or []:
        name = normalize(re.split(r"[=<>!~; (\[]", req, maxsplit=1)[0])
        if name in TRITONS and "extra ==" not in req:
            return req.split(";")[0].replace(" ", "").replace("(", "").replace(")", "")
    raise SystemExit(f"collect_wheels: error: {wheels[0].name} requires no triton. To fix, set components.triton "
                     "source to pypi with a version")


def source_facts(src: Path) -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=src, capture_output=True, text=True,  # noqa: S603,S607
                              check=False).stdout.strip()

    return {"sha": git("rev-parse", "HEAD"), "date": git("log", "-1", "--format=%cI"),
            "describe": git("describe", "--tags", "--always"), "repo": git("remote", "get-url", "origin")}


def scrub_uv_records(site: Path) -> int:
    """uv writes <dist>.dist-info/uv_cache.json (a timestamp for its cache) into every distribution it installs:
    nothing at run time reads it, and it makes two builds of the same closure differ. Remove it and its RECORD
    line, so RECORD still lists exactly what is on disk."""
    removed = 0
    for info in site.glob("*.dist-info/uv_cache.json"):
        record = info.parent / "RECORD"
        entry = f"{info.parent.name}/uv_cache.json,"
        if record.is_file():
            lines = record.read_text().splitlines(keepends=True)
            record.write_text("".join(line for line in lines if not line.startswith(entry)))
        info.unlink()
        removed += 1
    return removed


def nvidia_packages() -> list[str]:
    """CUDA runtime wheels (nvidia-*) installed into this interpreter: a ROCm image must have none."""
    import importlib.metadata

    names = {(d.metadata["Name"] or "") for d in importlib.metadata.distributions()}
    return sorted(n for n in names if normalize(n).startswith("nvidia-"))


# ---- command line ----------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    col = sub.add_parser("collect")
    col.add_argument("--in", dest="in_root", type=Path, required=True)
    col.add_argument("--out", type=Path, required=True)
    tt = sub.add_parser("torch-triton")
    tt.add_argument("--torch", type=Path, required=True)
    sf = sub.add_parser("source-facts")
    sf.add_argument("--src", type=Path, required=True)
    sf.add_argument("--out", type=Path, required=True)
    sub.add_parser("no-nvidia")
    scrub = sub.add_parser("scrub-uv")
    scrub.add_argument("--site", type=Path, required=True)
    args = parser.parse_args(argv)
    return COMMANDS[args.command](args)


def _cmd_collect(args) -> int:
    errors = collect(args.in_root, args.out)
    for line in errors:
        print(f"collect_wheels: error: {line}", file=sys.stderr)
    if not errors:
        print(f"collect_wheels: manifest of the wheels for {env('GPU_ARCH')} in {args.out}")
    return 1 if errors else 0


def _cmd_torch_triton(args) -> int:
    print(torch_triton(args.torch))
    return 0


def _cmd_source_facts(args) -> int:
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(source_facts(args.src), indent=1, sort_keys=True) + "\n")
    return 0


def _cmd_no_nvidia(_args) -> int:
    found = nvidia_packages()
    if found:
        print(f"collect_wheels: error: nvidia-* packages in a ROCm image: {', '.join(found)}", file=sys.stderr)
    return 1 if found else 0


def _cmd_scrub(args) -> int:
    print(f"collect_wheels: removed uv_cache.json from {scrub_uv_records(args.site)} distributions")
    return 0


COMMANDS = {"scrub-uv": _cmd_scrub, "collect": _cmd_collect, "torch-triton": _cmd_torch_triton, "source-facts": _cmd_source_facts, "no-nvidia": _cmd_no_nvidia}

if __name__ == "__main__":
    sys.exit(main())
