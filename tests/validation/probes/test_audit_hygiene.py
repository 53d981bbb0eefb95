"""pip check (ours and pip's own), two owners of one file, CUDA packages, installer caches, secrets."""

from __future__ import annotations

import ensurepip
import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from audit_helpers import install_files, make_context
from packaging.markers import Marker
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from validation.probes import hygiene, leftovers, reqs
from validation.probes.image import OK, PRESENT

SECRET = "s3cr3t-Do-Not-Print"


@pytest.fixture
def site(fake_root):
    path = fake_root / "opt" / "venv" / "site-packages"
    path.mkdir(parents=True)
    return path


# our Requires-Dist check, against packaging and against pip itself -----------------------------------------

VERSIONS = ["0.9", "1.0", "1.0.0", "1.0a1", "1.0rc1", "1.0.dev0", "1.0.post1", "1.0+local.7", "1!0.5", "1.1", "1.10",
            "2.13.0+cpu", "0.1.7.post2.dev18", "3.6.0", "2.0b1.post2.dev3"]
SPECIFIERS = ["==1.0", ">=1.0", "<=1.0", "<1.0", ">1.0", "!=1.0", "~=1.0", "==1.*", "!=1.0.*", ">=1.0a1", "<1.10",
              ">1.0.post1", "==1.0+local.7", "~=1.0.1", ">0.9", "===1.0", ">=2.13.0", "<2.0,>=1.0"]


@pytest.mark.parametrize("spec", SPECIFIERS)
def test_specifiers_agree_with_packaging(spec):
    for version in VERSIONS:
        ours = all(reqs.contains(*_split(part), version) for part in spec.split(","))
        assert ours == SpecifierSet(spec).contains(Version(version), prereleases=True), (spec, version)


def _split(part: str) -> tuple[str, str]:
    op = next(o for o in reqs._OPS if part.startswith(o))
    return op, part[len(op):]


def test_version_order_agrees_with_packaging():
    assert sorted(VERSIONS, key=lambda v: reqs.parse_version(v).key()) == sorted(VERSIONS, key=Version)


@pytest.mark.parametrize("marker", [
    'python_version >= "3.8"', "python_version < '3'", 'sys_platform == "linux" and platform_machine == "x86_64"',
    '(os_name == "nt" or sys_platform == "darwin") and python_version > "3.6"', 'extra == "test"',
    'platform_system != "Windows" or extra == "dev"', "'linux' in sys_platform", "implementation_name == 'cpython'",
    'python_full_version >= "3.10.1"', "platform_python_implementation not in 'PyPy Jython'",
])
def test_markers_agree_with_packaging(marker):
    env = reqs.marker_environment()
    assert reqs.evaluate_marker(marker, env) == Marker(marker).evaluate({"extra": ""})


def test_requires_dist_problems(site, fake_root):
    install_files(site, "atom", "0.2.0", {"atom/__init__.py": ""}, requires=(
        "torch>=2.9", "zmq", "aiter; python_version < '3'", "pytest; extra == 'test'", "numpy (>=1.26)"))
    install_files(site, "torch", "2.8.0", {"torch/__init__.py": ""})
    install_files(site, "numpy", "2.1.0", {"numpy/__init__.py": ""})
    problems, unparsed = hygiene.requirement_problems(make_context(site, fake_root))
    assert problems == ["atom 0.2.0 has requirement torch>=2.9, but you have torch 2.8.0",
                        "atom 0.2.0 requires zmq, which is not installed"]
    assert unparsed == []


def test_unreadable_requirement_is_reported_not_guessed(site, fake_root):
    install_files(site, "a", "1.0", {"a.py": ""}, requires=("b >=>= 2",))
    problems, unparsed = hygiene.requirement_problems(make_context(site, fake_root))
    assert (problems, len(unparsed)) == ([], 1)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A real venv with pip, for `python -m pip check` (the probe runs it when pip is in the image). pip is the
    wheel ensurepip bundles, unpacked: what `python -m venv` would install, without its 4 s pip install run."""
    folder = tmp_path_factory.mktemp("venv")
    wheels = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", *(["--without-pip"] if wheels else []), str(folder)],  # noqa: S603
                   check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],  # noqa: S603
                             capture_output=True, text=True, check=True).stdout.strip()
    if wheels:
        with zipfile.ZipFile(wheels[-1]) as wheel:
            wheel.extractall(purelib)
    return python, purelib


def test_pip_check_and_ours_find_the_same_problems(venv, fake_root):
    python, purelib = venv
    site = Path(purelib)
    install_files(site, "atom", "0.2.0", {"atom/__init__.py": ""}, requires=("torch>=2.9", "zmq"))
    install_files(site, "torch", "2.8.0", {"torch/__init__.py": ""})
    ctx = make_context(site, fake_root, python=str(python))
    f = hygiene.pip_check(ctx)
    assert f.status == PRESENT
    ours, pip_line = f.evidence[1:3], f.evidence[-1]
    assert ours == ["atom 0.2.0 has requirement torch>=2.9, but you have torch 2.8.0",
                    "atom 0.2.0 requires zmq, which is not installed"]
    assert pip_line.startswith("python -m pip check: exit 1: ")
    for problem in ours:  # pip says the same, word for word, with a full stop
        assert f"{problem}." in pip_line


def test_pip_check_says_when_pip_is_absent(site, fake_root):
    f = hygiene.pip_check(make_context(site, fake_root, python=sys.executable))
    assert f.evidence[-1] == "python -m pip check: pip is not in this image (metadata check only)"
    assert sysconfig.get_paths()  # the host's own pip is not on this context's sys.path


# duplicates, CUDA -------------------------------------------------------------------------------------------

def test_two_tritons_owning_triton_are_named(site, fake_root):
    files = {"triton/__init__.py": "", "triton/language/core.py": ""}
    install_files(site, "triton", "3.6.0", files)
    install_files(site, "pytorch-triton-rocm", "3.5.0", files)
    f = hygiene.duplicate_distributions(make_context(site, fake_root))
    assert f.status == PRESENT
    assert f.evidence == ["pytorch-triton-rocm 3.5.0 and triton 3.6.0 both own 2 files, under triton/"]


def test_one_name_in_two_folders_is_named(site, fake_root, tmp_path):
    other = fake_root / "usr" / "lib" / "python3" / "dist-packages"
    install_files(site, "numpy", "2.1.0", {"numpy/__init__.py": ""})
    install_files(other, "numpy", "1.26.4", {"numpy/__init__.py": ""})
    ctx = make_context(site, fake_root)
    ctx.sys_path.append(str(other))
    f = hygiene.duplicate_distributions(ctx)
    assert f.status == PRESENT
    assert f.evidence == ["numpy installed 2 times: numpy 2.1.0 in /opt/venv/site-packages; numpy 1.26.4 in "
                          "/usr/lib/python3/dist-packages (the first is the one imported)"]


def test_namespace_packages_sharing_a_folder_are_fine(site, fake_root):
    install_files(site, "nvidia-a", "1", {"nvidia/a/__init__.py": ""})
    install_files(site, "nvidia-b", "1", {"nvidia/b/__init__.py": ""})
    assert hygiene.duplicate_distributions(make_context(site, fake_root)).status == OK


def test_nvidia_packages_and_cuda_torch(site, fake_root):
    install_files(site, "nvidia-cublas-cu12", "12.8.4.1", {"nvidia/cublas/__init__.py": ""})
    install_files(site, "torch", "2.9.0", {"torch/__init__.py": "", "torch/version.py":
                                           "__version__ = '2.9.0+cu128'\ncuda: str | None = '12.8'\nhip = None\n"})
    f = hygiene.nvidia_packages(make_context(site, fake_root))
    assert f.status == PRESENT
    assert f.evidence == ["1 nvidia-* distributions: nvidia-cublas-cu12 12.8.4.1",
                          "torch 2.9.0+cu128 is a CUDA 12.8 build (/opt/venv/site-packages/torch/version.py)"]


def test_rocm_torch_is_fine(site, fake_root):
    install_files(site, "torch", "2.9.0", {"torch/__init__.py": "", "torch/version.py": "hip = '7.2.1'\ncuda = None\n"})
    assert hygiene.nvidia_packages(make_context(site, fake_root)).status == OK


# caches and secrets -----------------------------------------------------------------------------------------

def test_pip_and_uv_caches_and_apt_archives(fake_root):
    (fake_root / "root/.cache/pip/http").mkdir(parents=True)
    (fake_root / "root/.cache/pip/http/blob").write_bytes(b"x" * 2**20)
    (fake_root / "root/.cache/uv").mkdir(parents=True)  # empty: not reported
    (fake_root / "var/cache/apt/archives").mkdir(parents=True)
    (fake_root / "var/cache/apt/archives/gcc_12.deb").write_bytes(b"x" * 10)
    f = leftovers.installer_caches(make_context(None, fake_root))
    assert f.status == PRESENT
    assert f.evidence == ["/root/.cache/pip: 1 files, 1.0 MiB", "/var/cache/apt/archives: 1 .deb files, 0.0 MiB"]


def test_no_caches(fake_root):
    (fake_root / "root").mkdir()
    assert leftovers.installer_caches(make_context(None, fake_root)).status == OK


def test_secrets_are_found_by_path_and_never_shown(fake_root):
    home = fake_root / "root"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh/id_ed25519").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n")
    (home / ".ssh/id_ed25519.pub").write_text("ssh-ed25519 AAAA public\n")
    (home / ".netrc").write_text(f"machine github.com login me password {SECRET}\n")
    (home / ".docker").mkdir()
    (home / ".docker/config.json").write_text(json.dumps({"auths": {"ghcr.io": {"auth": SECRET}}}))
    (fake_root / "opt/app/.git").mkdir(parents=True)
    (fake_root / "opt/app/.git/config").write_text(f'[remote "origin"]\n url = https://me:{SECRET}@github.com/x/y\n')
    (fake_root / "etc/ssl/private").mkdir(parents=True)
    (fake_root / "etc/ssl/private/server.key").write_text(f"-----BEGIN RSA PRIVATE KEY-----\n{SECRET}\n")
    f = leftovers.secrets(make_context(None, fake_root))
    assert f.status == PRESENT
    assert f.evidence == [
        "/etc/ssl/private/server.key (private key; content not shown)",
        "/opt/app/.git/config (credential in a remote URL; content not shown)",
        "/root/.docker/config.json (registry auths; content not shown)",
        "/root/.netrc (credentials file; content not shown)",
        "/root/.ssh/id_ed25519 (SSH private key; content not shown)",
    ]
    assert SECRET not in json.dumps(f.to_json())


def test_public_certificates_and_pythons_test_keys_are_not_secrets(fake_root):
    (fake_root / "etc/ssl/certs").mkdir(parents=True)
    (fake_root / "etc/ssl/certs/ca.pem").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n")
    (fake_root / "opt/py/lib/python3.12/test").mkdir(parents=True)
    (fake_root / "opt/py/lib/python3.12/test/keycert.pem").write_text("-----BEGIN PRIVATE KEY-----\nx\n")
    (fake_root / "root/.docker").mkdir(parents=True)
    (fake_root / "root/.docker/config.json").write_text(json.dumps({"auths": {}, "credsStore": "pass"}))
    assert leftovers.secrets(make_context(None, fake_root)).status == OK
