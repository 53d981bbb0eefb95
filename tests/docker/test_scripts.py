"""The stdlib helpers that run inside build stages (docker/scripts/), tested on the host without Docker."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "docker" / "scripts"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"_script_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


collect_wheels = load("collect_wheels")
smoke = load("smoke")

OFFLINE_ENV = {
    "TORCH_SOURCE": "local", "TORCH_VERSION": "2.13.0", "TORCHVISION_VERSION": "", "TORCHAUDIO_VERSION": "",
    "TRITON_SOURCE": "local", "TRITON_KERNELS_SOURCE": "none", "FLYDSL_SOURCE": "none", "MORI_SOURCE": "none",
    "AITER_SOURCE": "local", "ATOM_SOURCE": "local", "DEPS_SOURCE": "local",
}


def make_wheel(folder: Path, name: str, version: str, extra: dict[str, bytes] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{dist}-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        for arcname, data in (extra or {}).items():
            zf.writestr(arcname, data)
    return path


@pytest.fixture
def components(tmp_path, monkeypatch) -> Path:
    for key, value in OFFLINE_ENV.items():
        monkeypatch.setenv(key, value)
    root = tmp_path / "in"
    make_wheel(root / "torch", "torch", "2.13.0")
    make_wheel(root / "triton", "triton", "3.6.0")
    make_wheel(root / "aiter", "amd-aiter", "0.1.7")
    make_wheel(root / "atom", "atom", "0.1.0")
    make_wheel(root / "deps", "numpy", "2.0.0")
    return root


def test_collect_writes_a_manifest_of_every_wheel(components, tmp_path):
    out = tmp_path / "wheels"
    assert collect_wheels.collect(components, out, "gfx942", "ckfree", prebuild=False) == []
    manifest = json.loads((out / "manifest.json").read_text())
    names = {w["name"]: w for w in manifest["wheels"]}
    assert set(names) == {"torch", "triton", "amd-aiter", "atom", "numpy"}
    assert names["amd-aiter"]["source"] == "local:local/aiter" and names["numpy"]["component"] == "deps"
    assert all(w["arch"] == "gfx942" and w["ck_mode"] == "ckfree" and len(w["sha256"]) == 64
               for w in manifest["wheels"])
    assert sorted(p.name for p in out.glob("*.whl")) == sorted(w["filename"] for w in manifest["wheels"])


def test_collect_names_the_missing_component(components, tmp_path):
    for whl in (components / "aiter").glob("*.whl"):
        whl.unlink()
    errors = collect_wheels.collect(components, tmp_path / "wheels", "gfx942", "ckfree", prebuild=False)
    assert len(errors) == 1 and "missing wheel for component 'aiter'" in errors[0]
    assert not (tmp_path / "wheels" / "manifest.json").exists()


def test_collect_ignores_components_that_are_none(components, tmp_path, monkeypatch):
    monkeypatch.setenv("MORI_SOURCE", "pypi")  # now expected, and absent
    errors = collect_wheels.collect(components, tmp_path / "wheels", "gfx942", "ckfree", prebuild=False)
    assert errors and "component 'mori'" in errors[0]


def test_collect_rejects_a_project_twice(components, tmp_path):
    make_wheel(components / "deps", "torch", "2.12.0")
    errors = collect_wheels.collect(components, tmp_path / "wheels", "gfx942", "ckfree", prebuild=False)
    assert errors and "project 'torch' comes twice" in errors[0]


def test_prebuild_needs_compiled_kernels_for_the_arch(components, tmp_path):
    errors = collect_wheels.collect(components, tmp_path / "a", "gfx942", "ck", prebuild=True)
    assert errors and "no compiled aiter/jit/*.so for gfx942" in errors[0]
    for whl in (components / "aiter").glob("*.whl"):
        whl.unlink()
    make_wheel(components / "aiter", "amd-aiter", "0.1.7",
               {"aiter/jit/module_gemm.so": b"\x7fELF...hipv4-amdgcn-amd-amdhsa--gfx950..."})
    assert collect_wheels.collect(components, tmp_path / "b", "gfx950", "ck", prebuild=True) == []
    errors = collect_wheels.collect(components, tmp_path / "c", "gfx942", "ck", prebuild=True)
    assert errors and "for gfx942" in errors[0]


def test_requirements_carry_the_hashes(components, tmp_path):
    out = tmp_path / "wheels"
    collect_wheels.collect(components, out, "gfx950", "ck", prebuild=False)
    reqs, cons = tmp_path / "r.txt", tmp_path / "c.txt"
    assert collect_wheels.write_requirements(out / "manifest.json", reqs, cons) == 5
    assert all(" --hash=sha256:" in line for line in reqs.read_text().splitlines())
    assert "torch==2.13.0" in cons.read_text().splitlines()


def test_installer_is_recorded_apart(components, tmp_path, monkeypatch):
    monkeypatch.setenv("INSTALLER_SOURCE", "local")
    monkeypatch.setenv("INSTALLER_VERSION", "0.13.9")
    uv = make_wheel(tmp_path / "installer", "uv", "0.13.9")
    out = tmp_path / "wheels"
    assert collect_wheels.collect(components, out, "gfx942", "ckfree", prebuild=False,
                                  installer=tmp_path / "installer") == []
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["installer"] == {"name": "uv", "version": "0.13.9", "filename": uv.name,
                                     "sha256": collect_wheels.sha256(uv), "size": uv.stat().st_size,
                                     "source": "local:local/installer"}
    assert "uv" not in {w["name"] for w in manifest["wheels"]}
    assert not (out / uv.name).exists()  # collect copies runtime wheels only
    reqs, cons, one = tmp_path / "r.txt", tmp_path / "c.txt", tmp_path / "uv.txt"
    assert collect_wheels.write_requirements(out / "manifest.json", reqs, cons) == 5
    assert "uv" not in reqs.read_text() + cons.read_text()
    assert collect_wheels.write_installer_requirement(out / "manifest.json", one) == "uv==0.13.9"
    assert one.read_text() == f"uv==0.13.9 --hash=sha256:{collect_wheels.sha256(uv)}\n"


def test_installer_none_leaves_no_entry(components, tmp_path):
    out = tmp_path / "wheels"
    assert collect_wheels.collect(components, out, "gfx942", "ckfree", prebuild=False,
                                  installer=tmp_path / "installer") == []
    assert "installer" not in json.loads((out / "manifest.json").read_text())
    with pytest.raises(SystemExit, match="records no installer"):
        collect_wheels.write_installer_requirement(out / "manifest.json", tmp_path / "uv.txt")


@pytest.mark.parametrize(("name", "version", "error"), [
    (None, None, "expected one uv wheel"),
    ("uv", "0.13.8", "uv 0.13.8, the profile pins 0.13.9"),
    ("pip", "0.13.9", "is pip, not uv"),
])
def test_installer_missing_or_wrong_fails(components, tmp_path, monkeypatch, name, version, error):
    monkeypatch.setenv("INSTALLER_SOURCE", "pypi")
    monkeypatch.setenv("INSTALLER_VERSION", "0.13.9")
    (tmp_path / "installer").mkdir()
    if name:
        make_wheel(tmp_path / "installer", name, version)
    errors = collect_wheels.collect(components, tmp_path / "wheels", "gfx942", "ckfree", prebuild=False,
                                    installer=tmp_path / "installer")
    assert len(errors) == 1 and "component 'installer'" in errors[0] and error in errors[0], errors
    assert not (tmp_path / "wheels" / "manifest.json").exists()


@pytest.mark.parametrize(("stdout", "text"), [
    ("Prompt: 'x'\nCompletion: 'the cat sat'\n", "the cat sat"),
    ("Completion: \"it's here\"\n", "it's here"),
    ("Completion: 'a'\nCompletion: 'b c'\n", "b c"),
    ("no completion here\n", None),
])
def test_find_completion(stdout, text):
    assert smoke.find_completion(stdout) == text


def run_smoke(tmp_path, *command: str, min_tokens: int = 10) -> tuple[int, dict]:
    proc = subprocess.run(  # noqa: S603
        [sys.executable, str(SCRIPTS / "smoke.py"), "--model", str(tmp_path), "--min-tokens", str(min_tokens), "--",
         *command], capture_output=True, text=True, check=False)
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("SMOKE_RESULT "))
    return proc.returncode, json.loads(line.removeprefix("SMOKE_RESULT "))


def test_smoke_counts_tokens(tmp_path):
    code, result = run_smoke(tmp_path, sys.executable, "-c", "print(\"Completion: '\" + ' '.join(['w'] * 12) + \"'\")")
    assert code == 0 and result["new_tokens"] == 12 and result["returncode"] == 0
    assert result["counted_by"] in ("whitespace", "transformers.AutoTokenizer")


def test_smoke_fails_on_too_few_tokens_or_a_failed_command(tmp_path):
    code, result = run_smoke(tmp_path, sys.executable, "-c", "print(\"Completion: 'one two'\")")
    assert code == 1 and result["new_tokens"] == 2
    code, result = run_smoke(tmp_path, sys.executable, "-c", "import sys; print(\"Completion: 'a b'\"); sys.exit(3)",
                             min_tokens=1)
    assert code == 1 and result["returncode"] == 3


def test_no_nvidia_finds_cuda_wheels_in_the_interpreter(monkeypatch):
    import importlib.metadata

    class Dist:
        def __init__(self, name):
            self.metadata = {"Name": name}

    fake = [Dist("torch"), Dist("nvidia_cublas_cu12"), Dist("NVIDIA-NCCL-cu12"), Dist("numpy")]
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: fake)
    assert collect_wheels.nvidia_packages() == ["NVIDIA-NCCL-cu12", "nvidia_cublas_cu12"]
    assert collect_wheels.main(["no-nvidia"]) == 1
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: fake[:1])
    assert collect_wheels.main(["no-nvidia"]) == 0
