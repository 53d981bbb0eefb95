"""A local registry for the integration tier: 127.0.0.1:5000 when .ci/run started one, else one started here
(Debian's docker-registry), and what tests read back from it (a manifest's digest, a blob, the tags)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

# Docker 20.10 pushes Docker v2 manifests; BuildKit with the containerd store, OCI ones (a registry refuses to
# answer with a type the request does not accept).
MANIFEST = ("application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, "
            "application/vnd.oci.image.index.v1+json")  # an index: a candidate with its attestations (Docker >= 26)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):  # noqa: S310 - a local test registry
            return True
    except (urllib.error.URLError, OSError):
        return False


def start_registry(port: int, storage: Path) -> subprocess.Popen:
    conf = storage / "config.yml"
    conf.write_text(f"version: 0.1\nlog: {{level: error}}\nstorage:\n  filesystem: {{rootdirectory: {storage}}}\n"
                    f"  delete: {{enabled: true}}\nhttp: {{addr: \"127.0.0.1:{port}\"}}\n")
    proc = subprocess.Popen(["docker-registry", "serve", str(conf)], stdout=subprocess.DEVNULL,  # noqa: S603,S607
                            stderr=subprocess.DEVNULL)
    for _ in range(50):
        if answers(f"http://127.0.0.1:{port}/v2/"):
            return proc
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"docker-registry did not start on 127.0.0.1:{port}")


@pytest.fixture(scope="module")
def registry(docker_engine, tmp_path_factory) -> str:
    """127.0.0.1:5000 when .ci/run started it, else one started here for this module."""
    if answers("http://127.0.0.1:5000/v2/"):
        yield "127.0.0.1:5000"
        return
    if shutil.which("docker-registry") is None:
        pytest.fail("no registry on 127.0.0.1:5000 and no docker-registry binary (run .ci/start-registry.sh)")
    proc = start_registry(5000, tmp_path_factory.mktemp("registry"))
    yield "127.0.0.1:5000"
    proc.kill()


def registry_digest(registry: str, repo: str, tag: str) -> str | None:
    request = urllib.request.Request(f"http://{registry}/v2/{repo}/manifests/{tag}", method="HEAD",
                                     headers={"Accept": MANIFEST})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.headers["Docker-Content-Digest"]
    except urllib.error.HTTPError:
        return None


def registry_blob(registry: str, repo: str, digest: str, manifest: bool = False) -> bytes:
    """A blob or (manifest=True) a manifest or index by digest, as the registry stores it."""
    kind = "manifests" if manifest else "blobs"
    request = urllib.request.Request(f"http://{registry}/v2/{repo}/{kind}/{digest}", headers={"Accept": MANIFEST})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return response.read()


def registry_tags(registry: str, repo: str) -> list[str]:
    try:
        with urllib.request.urlopen(f"http://{registry}/v2/{repo}/tags/list", timeout=10) as response:  # noqa: S310
            return sorted(json.loads(response.read()).get("tags") or [])
    except urllib.error.HTTPError:
        return []
