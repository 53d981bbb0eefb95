"""Collect the component wheels into /wheels and write /wheels/manifest.json (stdlib only; runs in a build stage).

Input: one folder per component under --in (torch/, triton/, aiter/, ..., deps/), each holding that stage's wheels.
Which components must be there follows the Dockerfile.wheels build arguments, read from the environment
(TORCH_SOURCE, TORCHVISION_VERSION, MORI_SOURCE, ...): a component whose source is `none` is not expected.
Fails (exit 1, one line per problem) when an expected wheel is missing, when two wheels claim one project, or when
PREBUILD_KERNELS=1 but the aiter wheel holds no compiled kernels for GPU_ARCH.

The installer (the uv wheel of --installer, INSTALLER_SOURCE / INSTALLER_VERSION) is recorded apart, as the
manifest's top-level "installer": never among "wheels", so never in the requirements or the runtime venv.
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path

INSTALLER = "uv"
COMPONENTS = ("torch", "torchvision", "torchaudio", "triton", "triton_kernels", "flydsl", "mori", "aiter", "atom")


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def source_ref(component: str) -> str | None:
    """What the component was built from, or None when the profile leaves it out."""
    torch_src = env("TORCH_SOURCE", "index")
    if component in ("torch", "torchvision", "torchaudio"):
        version = env(f"{component.upper()}_VERSION")
        if component != "torch" and not version:
            return None
        if torch_src == "index":
            return f"index:{env('TORCH_INDEX_URL')} {component}=={version}"
        return f"local:local/{component}"
    upper = component.upper()
    source = env(f"{upper}_SOURCE")
    if source in ("", "none"):
        return None
    if source == "local":
        return f"local:local/{component}"
    if source == "git":
        return f"git:{env(upper + '_REPO')}@{env(upper + '_REF')}"
    if source == "pypi":
        package = env(upper + "_PACKAGE") or component
        return f"pypi:{package}=={env(upper + '_VERSION')}"
    return f"{source}:"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_metadata(path: Path) -> tuple[str, str]:
    with zipfile.ZipFile(path) as zf:
        names = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        if len(names) != 1:
            raise ValueError(f"{path.name}: expected one .dist-info/METADATA, found {len(names)}")
        meta = email.parser.Parser().parsestr(zf.read(names[0]).decode("utf-8"), headersonly=True)
    return meta["Name"], meta["Version"]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


def installer_entry(folder: Path | None, errors: list[str]) -> dict | None:
    """The uv wheel in `folder` as a manifest entry; None when INSTALLER_SOURCE is none (or unset) and none is there."""
    source = env("INSTALLER_SOURCE", "none")
    wheels = sorted(folder.glob("*.whl")) if folder is not None and folder.is_dir() else []
    if source == "none" and not wheels:
        return None
    package = env("INSTALLER_PACKAGE") or INSTALLER
    ref = f"pypi:{package}=={env('INSTALLER_VERSION')}" if source == "pypi" else f"{source}:local/installer"
    if len(wheels) != 1:
        errors.append(f"component 'installer' (from {ref}): expected one {INSTALLER} wheel in {folder}, "
                      f"found {len(wheels)}: {', '.join(w.name for w in wheels) or 'none'}")
        return None
    whl = wheels[0]
    try:
        name, version = wheel_metadata(whl)
    except (zipfile.BadZipFile, ValueError, KeyError) as exc:
        errors.append(f"component 'installer': unreadable wheel {whl.name}: {exc}")
        return None
    want = env("INSTALLER_VERSION")
    if normalize(name) != INSTALLER:
        errors.append(f"component 'installer': {whl.name} is {name}, not {INSTALLER}")
    elif want and version != want:
        errors.append(f"component 'installer': {whl.name} is {INSTALLER} {version}, the profile pins {want}")
    return {"name": name, "version": version, "filename": whl.name, "sha256": sha256(whl),
            "size": whl.stat().st_size, "source": ref}


def collect(in_root: Path, out: Path, arch: str, ck_mode: str, prebuild: bool, manifest_only: bool = False,
            installer: Path | None = None) -> list[str]:
    errors: list[str] = []
    installer_info = installer_entry(installer, errors)
    plan: list[tuple[str, Path, str]] = []
    for component in COMPONENTS:
        ref = source_ref(component)
        wheels = sorted((in_root / component).glob("*.whl"))
        if ref is None:
            continue
        if not wheels:
            errors.append(f"missing wheel for component '{component}' (from {ref}): "
                          f"its build stage produced no .whl in {in_root / component}")
        plan += [(component, whl, ref) for whl in wheels]
    deps_ref = "local:local/deps" if env("DEPS_SOURCE", "pypi") == "local" else "pypi"
    plan += [("deps", whl, deps_ref) for whl in sorted((in_root / "deps").glob("*.whl"))]

    out.mkdir(parents=True, exist_ok=True)
    entries, seen = [], {}
    for component, whl, ref in plan:
        try:
            name, version = wheel_metadata(whl)
        except (zipfile.BadZipFile, ValueError, KeyError) as exc:
            errors.append(f"component '{component}': unreadable wheel {whl.name}: {exc}")
            continue
        key = normalize(name)
        if key in seen:
            errors.append(f"project '{name}' comes twice: {seen[key]} and {whl.name} ({component})")
            continue
        seen[key] = whl.name
        entries.append({
            "component": component, "name": name, "version": version, "filename": whl.name,
            "sha256": sha256(whl), "size": whl.stat().st_size, "source": ref, "arch": arch, "ck_mode": ck_mode,
        })

    if prebuild:
        aiter = [e for e in entries if e["component"] == "aiter"]
        for entry in aiter:
            if not compiled_kernels(in_root / "aiter" / entry["filename"], arch):
                errors.append(f"component 'aiter': PREBUILD_KERNELS=1 but {entry['filename']} "
                              f"({entry['size']} bytes) holds no compiled aiter/jit/*.so for {arch}; "
                              "every kernel would JIT at runtime")
    if errors:
        return errors
    for _component, whl, _ref in plan if not manifest_only else []:
        shutil.copy2(whl, out / whl.name)
    manifest = {"schema": 1, "arch": arch, "ck_mode": ck_mode, "prebuild_kernels": prebuild,
                "wheels": sorted(entries, key=lambda e: normalize(e["name"]))}
    if installer_info is not None:
        manifest["installer"] = installer_info
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return []


def write_requirements(manifest_path: Path, requirements: Path, constraints: Path | None) -> int:
    """A --require-hashes requirements file (and a constraints file) for every wheel of the manifest."""
    manifest = json.loads(manifest_path.read_text())
    wheels = manifest["wheels"]
    requirements.write_text("".join(f"{w['name']}=={w['version']} --hash=sha256:{w['sha256']}\n" for w in wheels))
    if constraints is not None:
        constraints.write_text("".join(f"{w['name']}=={w['version']}\n" for w in wheels))
    return len(wheels)


def write_installer_requirement(manifest_path: Path, out: Path) -> str:
    """A one-line --require-hashes requirements file for the manifest's installer (uv==V --hash=sha256:...)."""
    entry = json.loads(manifest_path.read_text()).get("installer")
    if not entry:
        raise SystemExit(f"collect_wheels: error: {manifest_path} records no installer")
    out.write_text(f"{entry['name']}=={entry['version']} --hash=sha256:{entry['sha256']}\n")
    return f"{entry['name']}=={entry['version']}"


def nvidia_packages() -> list[str]:
    """CUDA runtime wheels (nvidia-*) installed into this interpreter: a ROCm image must have none."""
    import importlib.metadata

    names = {(d.metadata["Name"] or "") for d in importlib.metadata.distributions()}
    return sorted(n for n in names if normalize(n).startswith("nvidia-"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    col = sub.add_parser("collect", help="check the component wheels, copy them to --out, write manifest.json")
    col.add_argument("--in", dest="in_root", type=Path, required=True, help="folder of component folders")
    col.add_argument("--out", type=Path, required=True, help="where wheels and manifest.json go")
    col.add_argument("--arch", required=True)
    col.add_argument("--enable-ck", choices=("0", "1"), required=True)
    col.add_argument("--prebuild-kernels", choices=("0", "1"), default="0")
    col.add_argument("--manifest-only", action="store_true", help="write manifest.json, copy no wheel")
    col.add_argument("--installer", type=Path, help="folder holding the installer (uv) wheel, recorded apart")
    req = sub.add_parser("requirements", help="requirements with --hash=sha256 (and constraints) from a manifest")
    req.add_argument("--manifest", type=Path, required=True)
    req.add_argument("--out", type=Path, required=True)
    req.add_argument("--constraints", type=Path)
    ins = sub.add_parser("installer-requirement", help="the manifest's installer as a hashed requirement")
    ins.add_argument("--manifest", type=Path, required=True)
    ins.add_argument("--out", type=Path, required=True)
    sub.add_parser("no-nvidia", help="fail when an nvidia-* package is installed in this interpreter")
    args = parser.parse_args(argv)
    if args.command == "no-nvidia":
        found = nvidia_packages()
        if found:
            print(f"collect_wheels: error: nvidia-* packages in a ROCm image: {', '.join(found)}", file=sys.stderr)
        return 1 if found else 0
    if args.command == "installer-requirement":
        print(f"collect_wheels: {write_installer_requirement(args.manifest, args.out)} (hashed) in {args.out}")
        return 0
    if args.command == "requirements":
        count = write_requirements(args.manifest, args.out, args.constraints)
        print(f"collect_wheels: {count} hashed requirements in {args.out}")
        return 0
    ck_mode = "ck" if args.enable_ck == "1" else "ckfree"
    errors = collect(args.in_root, args.out, args.arch, ck_mode, args.prebuild_kernels == "1", args.manifest_only,
                     args.installer)
    for line in errors:
        print(f"collect_wheels: error: {line}", file=sys.stderr)
    if errors:
        return 1
    print(f"collect_wheels: manifest of the wheels for {args.arch} ({ck_mode}) in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
