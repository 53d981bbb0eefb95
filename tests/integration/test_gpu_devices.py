"""cleanbuild.gpuhost.gpu through the real Docker engine: mknod device nodes with chosen GIDs, an image without `render`.

The nodes are character devices with /dev/null's numbers (1:3), so opening them is harmless; what is proven
is Docker's side: the container starts although the image has no `render` group, it gets exactly the chosen
render node, its processes carry the nodes' numeric GIDs, and a non-root user opens the node through them.
"""

import os
import uuid
from pathlib import Path

import pytest

from cleanbuild.core import engine
from cleanbuild.core.errors import EnvironmentProblem
from cleanbuild.core.spec import RunSpec
from cleanbuild.gpuhost import gpu as G

pytestmark = pytest.mark.docker

KFD_GID, VIDEO_GID, RENDER_GID = 992, 44, 109
SECTION = "@@"
PROBE = (f"id -G; echo {SECTION}; ls -ln /dev/dri; echo {SECTION}; env; echo {SECTION}; "
         "exec 3<>/dev/dri/renderD129 && exec 4<>/dev/kfd && echo opened")


@pytest.fixture(scope="module")
def image(docker_engine, standin_base) -> str:
    """The stand-in base (mmdebstrap minbase): a real image whose /etc/group has no `render`."""
    name = standin_base
    status, logs = run(docker_engine, name, "grep -c '^render:' /etc/group", {})
    assert (status, logs.strip()) == (1, "0"), "the test image must lack a render group"
    return name


@pytest.fixture
def host(tmp_path) -> tuple[Path, Path]:
    """A dev root with real character nodes (kfd: 992, renderD128: 44, renderD129: 109, all 0660) and a
    sysfs with two MI300X in KFD nodes 2 and 3."""
    dev, sys = tmp_path / "dev", tmp_path / "sys"
    (dev / "dri").mkdir(parents=True)
    for path, gid in ((dev / "kfd", KFD_GID), (dev / "dri/renderD128", VIDEO_GID), (dev / "dri/renderD129", RENDER_GID)):
        os.mknod(path, 0o660 | 0o020000, os.makedev(1, 3))  # S_IFCHR
        os.chown(path, 0, gid)
        os.chmod(path, 0o660)
    nodes = sys / G.KFD_NODES
    for node, (version, minor) in enumerate([(0, 0), (0, 0), (90402, 128), (90402, 129)]):
        (nodes / str(node)).mkdir(parents=True)
        (nodes / str(node) / "properties").write_text(
            f"simd_count {1216 if version else 0}\ngfx_target_version {version}\ndrm_render_minor {minor}\n"
            f"location_id {(node + 3) << 8}\ndomain 0\n")
    return dev, sys


def run(client, image: str, script: str, flags: dict) -> tuple[int, str]:
    """Create, start, wait, return (exit status, output); the container is removed even when start fails."""
    container = client.containers.create(image, ["sh", "-c", script], network_mode="none",
                                      name=f"cleanbuild-gputest-{uuid.uuid4().hex[:10]}", **flags)
    try:
        container.start()
        status = container.wait(timeout=120)
        return int(status["StatusCode"]), container.logs(stdout=True, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)


def sections(logs: str) -> list[str]:
    return [part.strip() for part in logs.split(SECTION)]


def test_root_container_gets_exactly_the_chosen_node_and_its_gids(docker_engine, image, host):
    access = G.device_access((1,), dev_root=host[0], sysfs=host[1], arch="gfx942")
    status, logs = run(docker_engine, image, PROBE, {**G.run_flags(access), **G.compute_options("validate")})
    groups, listing, env, opened = sections(logs)
    assert status == 0, logs
    assert {RENDER_GID, KFD_GID} <= {int(g) for g in groups.split()}
    assert VIDEO_GID not in {int(g) for g in groups.split()}  # renderD128's group: not chosen, not added
    assert "renderD129" in listing and "renderD128" not in listing
    assert [line.split()[3] for line in listing.splitlines() if line.endswith("renderD129")] == [str(RENDER_GID)]
    assert {"HIP_VISIBLE_DEVICES=0", "ROCR_VISIBLE_DEVICES=0"} <= set(env.splitlines())
    assert opened == "opened"


def test_non_root_user_opens_the_node_through_the_added_gids(docker_engine, image, host):
    access = G.device_access((1,), user="1000:1000", dev_root=host[0], sysfs=host[1])
    G.check_permissions(access)
    status, logs = run(docker_engine, image, PROBE, G.run_flags(access))
    groups, _, _, opened = sections(logs)
    assert status == 0, logs
    assert sorted(int(g) for g in groups.split()) == [RENDER_GID, KFD_GID, 1000]
    assert opened == "opened"


def test_without_the_added_gids_the_same_user_is_refused(docker_engine, image, host):
    # The control for the test above: the open succeeds because of group_add, not by accident.
    flags = G.run_flags(G.device_access((1,), user="1000:1000", dev_root=host[0], sysfs=host[1]))
    status, logs = run(docker_engine, image, "exec 3<>/dev/dri/renderD129", {**flags, "group_add": []})
    assert status != 0
    assert "Permission denied" in logs


def test_preflight_refuses_what_the_container_could_not_open(docker_engine, image, host):
    os.chmod(host[0] / "dri/renderD129", 0o600)
    access = G.device_access((1,), user="1000:1000", dev_root=host[0], sysfs=host[1])
    with pytest.raises(EnvironmentProblem, match=r"renderD129 \(mode 0600, owner 0, group 109\)"):
        G.check_permissions(access)
    status, logs = run(docker_engine, image, "exec 3<>/dev/dri/renderD129", G.run_flags(access))
    assert status != 0
    assert "Permission denied" in logs


def test_every_gpu_is_passed_when_none_is_chosen(docker_engine, image, host):
    access = G.device_access(None, dev_root=host[0], sysfs=host[1])
    status, logs = run(docker_engine, image, "ls /dev/dri; env | grep VISIBLE_DEVICES | sort",
                       {**G.run_flags(access), **G.compute_options("smoke")})
    assert status == 0, logs
    assert logs.split() == ["renderD128", "renderD129", "HIP_VISIBLE_DEVICES=0,1", "ROCR_VISIBLE_DEVICES=0,1"]


def test_the_executors_gpu_run_passes_exactly_the_chosen_node(docker_engine, image, host, tmp_path):
    """The path validate and smoke take: a RunSpec with gpu=True through engine.run_container with the GPU kwargs
    of cleanbuild.gpuhost.gpu (no group name anywhere, only the nodes' numbers)."""
    access = G.device_access((0,), dev_root=host[0], sysfs=host[1], arch="gfx942")
    spec = RunSpec(step="validate", name=f"atom-validate-gputest-{uuid.uuid4().hex[:8]}",
                   command=("sh", "-c", "id -G; ls /dev/dri; env | grep VISIBLE_DEVICES | sort"), gpu=True,
                   workdir="/", run_id="gputest")
    flags = {**G.run_flags(access), **G.compute_options("validate")}
    assert all(isinstance(g, str) and g.isdigit() for g in flags["group_add"])
    result = engine.run_container(docker_engine, image, spec, flags)
    assert result.exit_code == 0, result.logs
    lines = result.logs.split()
    assert {str(VIDEO_GID), str(KFD_GID)} <= set(lines) and str(RENDER_GID) not in lines
    assert lines[-3:] == ["renderD128", "HIP_VISIBLE_DEVICES=0", "ROCR_VISIBLE_DEVICES=0"]
    assert docker_engine.containers.list(all=True, ignore_removed=True, filters={"name": spec.name}) == []
