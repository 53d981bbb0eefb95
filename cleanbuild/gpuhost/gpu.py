"""GPU access for containers on a ROCm host: which GPUs, which device nodes, which groups, which driver.

Pure functions over a dev root and a sysfs root (tests pass fake trees): no subprocess, no Docker. The
executor turns a DeviceAccess into docker SDK kwargs (run_flags) for engine.run_container.

A GPU container (validate, smoke, audit --device) gets /dev/kfd and exactly the render nodes of the chosen GPUs
(--gpu, default all; never all of /dev/dri) and HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES 0..n-1; validate and
smoke run as --user-id's UID[:GID] when given. Before one starts, in one line each: the chosen GPUs must be of the
image's arch (exit 2) and the user must be able to open the nodes (exit 3); for validate and smoke the amdgpu driver
must also support the image's ROCm (cleanbuild/data/rocm_compat.toml, exit 3).

Why by number: `--group-add render` fails before the container starts when the image's /etc/group has no
`render` ("Unable to find group render"), and the render GID differs between hosts (104, 109, 110, 992).
Docker accepts a numeric GID without any group file, so we stat /dev/kfd and each chosen render node and
add exactly the GIDs that own them (vLLM's CI does the same with `getent group render | cut -d: -f3`).
"""

from __future__ import annotations

import copy
import os
import re
import stat
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypedDict

from packaging.version import InvalidVersion, Version

from cleanbuild.core.errors import EnvironmentProblem, UsageError
from cleanbuild.core.versions import rocm_minor
from cleanbuild.gpuhost.arch import (
    KFD_NODES,
    gfx_from_target_version,
    kfd_nodes,
    kfd_properties,
)

COMPAT_FILE = Path(__file__).resolve().parents[1] / "data" / "rocm_compat.toml"  # package data: cleanbuild/data
CPU_FIX = "or use a profile whose GPU steps run on the CPU"


@dataclass(frozen=True)
class GpuNode:
    index: int  # position among the host's usable GPUs in KFD topology order: the order HIP enumerates
    render_minor: int  # 128 for /dev/dri/renderD128
    render_path: str
    pci_bus: str  # "0000:0c:00.0"
    gfx: str | None  # "gfx942"; None when KFD reports no gfx_target_version
    marketing_name: str | None  # sysfs product_name ("AMD Instinct MI300X"); None when the driver has none
    kfd_node: int


@dataclass(frozen=True)
class DeviceAccess:
    devices: tuple[str, ...]  # host paths: /dev/kfd, then exactly the chosen render nodes (never /dev/dri)
    group_ids: tuple[int, ...]  # numeric GIDs owning those nodes, sorted; never a group name
    env: tuple[tuple[str, str], ...]  # HIP_/ROCR_VISIBLE_DEVICES; see _visible_env for what they mean
    gpus: tuple[GpuNode, ...]  # in container order: gpus[i] is device i inside the container
    user: str | None = None  # `--user` for the container; None runs as the image's USER (root in our images)


# ---- discovery ------------------------------------------------------------------------------------------


def discover(dev_root: Path = Path("/dev"), sysfs: Path = Path("/sys")) -> tuple[GpuNode, ...]:
    """The host's GPUs, indexed the way HIP numbers them.

    ROCr enumerates GPU agents in KFD topology node order (nodes/0, 1, ... numerically; CPU nodes first),
    and libhsakmt skips a node whose render device cannot be opened. Render minors need not follow that
    order, so each KFD node is tied to its render node by drm_render_minor, never by position.
    """
    gpus: list[GpuNode] = []
    for node_id, props in _kfd_gpu_nodes(sysfs):
        minor = props["drm_render_minor"]
        render = Path(dev_root) / "dri" / f"renderD{minor}"
        if not render.exists():
            continue  # libhsakmt's topology_sysfs_check_node_supported skips it too (ENOENT)
        gpus.append(GpuNode(
            index=len(gpus), render_minor=minor, render_path=str(render),
            pci_bus=_pci_bus(sysfs, minor, props), gfx=gfx_from_target_version(props.get("gfx_target_version", 0)),
            marketing_name=_product_name(sysfs, minor), kfd_node=node_id,
        ))
    return tuple(gpus)


def _kfd_gpu_nodes(sysfs: Path) -> list[tuple[int, dict[str, int]]]:
    nodes = []
    for node_id, text in kfd_nodes(sysfs):
        props = kfd_properties(text)
        # CPU nodes report no SIMDs and gfx_target_version 0; a GPU always has a render minor (>= 128).
        is_gpu = props.get("simd_count", 0) > 0 or props.get("gfx_target_version", 0) > 0
        if is_gpu and props.get("drm_render_minor", 0) > 0:
            nodes.append((node_id, props))
    return nodes


def _pci_bus(sysfs: Path, minor: int, props: Mapping[str, int]) -> str:
    device = Path(sysfs) / "class" / "drm" / f"renderD{minor}" / "device"
    if device.exists():
        return device.resolve().name
    # KFD's location_id is pci_dev_id(): bus << 8 | devfn; the domain is its own property.
    loc, domain = props.get("location_id", 0), props.get("domain", 0)
    return f"{domain:04x}:{loc >> 8:02x}:{(loc & 0xFF) >> 3:02x}.{loc & 0x7:x}"


def _product_name(sysfs: Path, minor: int) -> str | None:
    path = Path(sysfs) / "class" / "drm" / f"renderD{minor}" / "device" / "product_name"
    try:
        name = path.read_text(errors="replace").strip()
    except OSError:
        return None
    return name or None


# ---- selection --------------------------------------------------------------------------------------------


def parse_gpus(text: str | None, where: str = "--gpu") -> tuple[int, ...] | None:
    """`--gpu 0,2` (or an invoke.yaml default) -> (0, 2); None, "" or "all" -> None (every GPU). where: the flag or
    the invoke.yaml key the text came from, so the message names what the user wrote."""
    if text is None or text.strip().lower() in ("", "all"):
        return None
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    if not all(p.isdigit() for p in parts):
        raise UsageError(f"{where} {text!r} is not a list of GPU indices. To fix, give N[,M] (e.g. 0,1) or all.")
    return tuple(int(p) for p in parts)


def select(nodes: tuple[GpuNode, ...], gpus: tuple[int, ...] | None) -> tuple[GpuNode, ...]:
    """The chosen GPUs, duplicates removed, in host index order (the order the container enumerates them)."""
    if gpus is None:
        return tuple(nodes)
    if not gpus:
        raise UsageError("--gpu is empty. To fix, pass --gpu N[,M] or leave it out to use every GPU.")
    by_index = {n.index: n for n in nodes}
    unknown = [i for i in dict.fromkeys(gpus) if i not in by_index]
    if unknown:
        asked = ",".join(str(i) for i in unknown)
        raise UsageError(f"--gpu {asked}: this host has {_inventory(nodes)}. To fix, pass indices from that list.")
    return tuple(by_index[i] for i in sorted(set(gpus)))


def _inventory(nodes: tuple[GpuNode, ...]) -> str:
    if not nodes:
        return "no GPUs"
    names = [n.gfx or "unknown gfx" for n in nodes]
    kinds = ", ".join(f"{names.count(g)}x {g}" for g in dict.fromkeys(names))
    span = "GPU 0" if len(nodes) == 1 else f"GPUs 0-{len(nodes) - 1}"
    return f"{span} ({kinds})"


# ---- access --------------------------------------------------------------------------------------------


def device_access(gpus: tuple[int, ...] | None = None, *, user: str | None = None, dev_root: Path = Path("/dev"),
                  sysfs: Path = Path("/sys"), arch: str | None = None) -> DeviceAccess:
    """Discover, select, check the arch, stat the nodes. Call check_permissions(access) before a run."""
    kfd = Path(dev_root) / "kfd"
    if not kfd.exists():
        raise EnvironmentProblem(
            f"GPU access failed because {kfd} does not exist (the amdgpu kernel driver with KFD is not loaded). "
            f"To fix, install the amdgpu driver (amdgpu-dkms, see ROCm's install guide) and run `modprobe amdgpu`, {CPU_FIX}.")
    nodes = discover(dev_root, sysfs)
    if not nodes:
        raise EnvironmentProblem(
            f"GPU access failed because no render node under {Path(dev_root) / 'dri'} belongs to a GPU in "
            f"{Path(sysfs) / KFD_NODES}. To fix, install ROCm's amdgpu driver and check `ls -l /dev/dri` and dmesg, {CPU_FIX}.")
    chosen = select(nodes, gpus)
    _check_arch(chosen, nodes, arch)
    devices = (str(kfd), *(g.render_path for g in chosen))
    return DeviceAccess(devices=devices, group_ids=_owning_gids(devices), env=_visible_env(len(chosen)),
                        gpus=chosen, user=user)


def _check_arch(chosen: tuple[GpuNode, ...], nodes: tuple[GpuNode, ...], arch: object) -> None:
    if arch is None:
        return
    want = str(getattr(arch, "value", arch))  # an arch.Arch or its name
    for gpu in chosen:
        if gpu.gfx != want:
            fits = ",".join(str(n.index) for n in nodes if n.gfx == want) or "none on this host"
            other = f"build with --arch {gpu.gfx}" if gpu.gfx else "update the amdgpu driver so KFD reports its gfx"
            raise UsageError(
                f"GPU {gpu.index} ({gpu.pci_bus}) is {gpu.gfx or 'of unknown gfx'} but the image is built for {want}. "
                f"To fix, choose a {want} GPU with --gpu (here: {fits}) or {other}.")


def _owning_gids(paths: Iterable[str]) -> tuple[int, ...]:
    return tuple(sorted({os.stat(p).st_gid for p in paths}))


def _visible_env(count: int) -> tuple[tuple[str, str], ...]:
    """HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES for a container given exactly `count` render nodes.

    Inside the container /sys is the host's: every GPU is still listed in the KFD topology. libhsakmt drops a
    topology node whose render device is absent (ENOENT) or whose gpu_id KFD refuses to show because the
    device cgroup denies its render node (EPERM), so the runtime sees exactly the passed GPUs, in KFD order,
    as agents 0..n-1. ROCR_VISIBLE_DEVICES filters those agents by position, and HIP_VISIBLE_DEVICES filters
    what ROCr then exposes: host indices ("3") would point past the end and hide every GPU. Both are therefore
    0..n-1: the GPUs' identity comes from the device nodes, and the variables make every layer (ROCr, HIP,
    torch.cuda.device_count) agree on n while overriding any value an image sets in its ENV.
    """
    visible = ",".join(str(i) for i in range(count))
    return (("HIP_VISIBLE_DEVICES", visible), ("ROCR_VISIBLE_DEVICES", visible))


def _container_path(host_path: str) -> str:
    # The chosen nodes keep their real names inside, wherever the host's dev root is (tests use a temp dir).
    name = Path(host_path).name
    return "/dev/kfd" if name == "kfd" else f"/dev/dri/{name}"


# ---- permission preflight ---------------------------------------------------------------------------------


def check_permissions(access: DeviceAccess, uid: int | None = None, gids: Iterable[int] | None = None) -> None:
    """Fail before the container starts when its user could not open a passed node read-write.

    The container runs as root unless access.user is `UID[:GID]`; root keeps CAP_DAC_OVERRIDE under Docker's
    default capabilities, so only a non-root user is checked. Its groups are its primary GID (or `gids`)
    plus the GIDs we add; the kernel then uses the owner bits if it owns the node, else the group bits if
    one of its groups owns it, else the other bits.
    """
    user_uid, user_gids = _container_user(access.user)
    uid = user_uid if uid is None else uid
    if uid == 0:
        return
    groups = set(user_gids if gids is None else gids) | set(access.group_ids)
    for path in access.devices:
        st = os.stat(path)
        if not _can_read_write(st, uid, groups):
            raise EnvironmentProblem(_denied(path, st, access.user or str(uid), groups))


def _container_user(user: str | None) -> tuple[int | None, tuple[int, ...]]:
    """(uid, primary gids) from `--user`; a name only the image can resolve gives (None, ())."""
    if not user:
        return 0, (0,)
    name, _, group = user.partition(":")
    uid = int(name) if name.isdigit() else None
    if group:
        return uid, ((int(group),) if group.isdigit() else ())
    # A bare numeric UID that the image's passwd does not know runs with primary GID 0.
    return uid, ((0,) if uid is not None else ())


def _can_read_write(st: os.stat_result, uid: int | None, groups: set[int]) -> bool:
    if uid is not None and st.st_uid == uid:
        bits = stat.S_IRUSR | stat.S_IWUSR
    elif st.st_gid in groups:
        bits = stat.S_IRGRP | stat.S_IWGRP
    else:
        bits = stat.S_IROTH | stat.S_IWOTH
    return st.st_mode & bits == bits


def _denied(path: str, st: os.stat_result, who: str, groups: set[int]) -> str:
    mode = f"{stat.S_IMODE(st.st_mode):04o}"
    node = _container_path(path)
    return (
        f"GPU access failed because {path} (mode {mode}, owner {st.st_uid}, group {st.st_gid}) cannot be opened "
        f"read-write by the container user {who} (groups {','.join(str(g) for g in sorted(groups))}). "
        f"To fix, make the node group read-write with a udev rule (e.g. SUBSYSTEM==\"drm\", KERNEL==\"renderD*\", "
        f"GROUP=\"render\", MODE=\"0660\", and KERNEL==\"kfd\" likewise, then `udevadm trigger`), or "
        f"`chmod g+rw {path}` for this boot, or run the step as root (no --user); {node} inside is the same node.")


# ---- driver compatibility ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DriverInfo:
    loaded: bool  # /sys/module/amdgpu exists
    module_version: str | None  # /sys/module/amdgpu/version: only AMD's packaged driver (amdgpu-dkms) sets it
    kernel_release: str | None  # the fallback for an in-tree driver, from /proc/sys/kernel/osrelease

    @property
    def kind(self) -> str:
        if not self.loaded:
            return "not loaded"
        return "amdgpu-dkms" if self.module_version else "in-tree"

    def describe(self) -> str:
        if self.module_version:
            return f"amdgpu {self.module_version} (amdgpu-dkms)"
        if self.loaded:
            return f"the in-tree amdgpu of kernel {self.kernel_release or 'unknown'}"
        return "no amdgpu kernel module"


def driver_info(sysfs: Path = Path("/sys"), proc: Path = Path("/proc")) -> DriverInfo:
    module = Path(sysfs) / "module" / "amdgpu"
    return DriverInfo(loaded=module.is_dir(), module_version=_first_line(module / "version"),
                      kernel_release=_first_line(Path(proc) / "sys" / "kernel" / "osrelease"))


def _first_line(path: Path) -> str | None:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return None
    return lines[0].strip() if lines and lines[0].strip() else None


@dataclass(frozen=True)
class DriverRelease:
    release: str  # AMD GPU Driver release: "6.4" (ROCm-numbered, up to 6.4) or "30.30" (from 30.10 on)
    module: str  # what /sys/module/amdgpu/version reports for it
    package: str
    source: str


@dataclass(frozen=True)
class RocmRow:
    rocm: str  # major.minor of the image's ROCm user space
    min_driver: str  # the oldest AMD GPU Driver release AMD's matrix lists for it
    supported: str
    install: str
    source: str


@dataclass(frozen=True)
class Compat:
    checked: str
    drivers: tuple[DriverRelease, ...]  # sorted by release
    rocm: tuple[RocmRow, ...]

    def driver(self, release: str) -> DriverRelease | None:
        return next((d for d in self.drivers if d.release == release), None)

    def row(self, rocm: str) -> RocmRow | None:
        return next((r for r in self.rocm if r.rocm == rocm), None)


def load_compat(path: Path | None = None) -> Compat:
    """Parse and validate cleanbuild/data/rocm_compat.toml (or `path`); bad data is a one-line UsageError."""
    path = Path(path) if path else COMPAT_FILE
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"reading {path} failed because {exc}. To fix, restore the file from git.") from None
    drivers = tuple(DriverRelease(**_row(path, "driver", i, r, DriverRelease)) for i, r in enumerate(_rows(path, data, "driver")))
    rocm = tuple(RocmRow(**_row(path, "rocm", i, r, RocmRow)) for i, r in enumerate(_rows(path, data, "rocm")))
    compat = Compat(str(data.get("checked", "")), tuple(sorted(drivers, key=lambda d: Version(d.release))), rocm)
    _check_consistent(path, compat)
    return compat


def _rows(path: Path, data: dict[str, Any], table: str) -> list[object]:
    rows = data.get(table)
    if not isinstance(rows, list) or not rows:
        raise UsageError(f"{path}: [[{table}]] is missing or empty. To fix, restore the file from git.")
    return rows


def _row(path: Path, table: str, i: int, row: object, cls: type[DriverRelease] | type[RocmRow]) -> dict[str, str]:
    keys = [f.name for f in fields(cls)]
    where = f"{path}: [[{table}]] row {i + 1}"
    if not isinstance(row, dict):
        raise UsageError(f"{where} is not a table. To fix, write it as [[{table}]] with keys {', '.join(keys)}.")
    for key in keys:
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise UsageError(f"{where} has no '{key}'. To fix, give it a non-empty string '{key}'.")
    if not row["source"].startswith("https://"):
        raise UsageError(f"{where} 'source' is not a URL. To fix, cite the page the row was read from.")
    for key in ("release", "module", "rocm", "min_driver"):
        if key in row and not _version(row[key]):
            raise UsageError(f"{where} '{key}' = {row[key]!r} is not a version. To fix, write it like \"7.2\".")
    return {k: row[k] for k in keys}


def _check_consistent(path: Path, compat: Compat) -> None:
    # check_driver compares module versions, which is sound only if they rise with the release numbers.
    modules = [Version(d.module) for d in compat.drivers]
    if modules != sorted(modules):
        raise UsageError(f"{path}: [[driver]] 'module' versions do not rise with 'release'. To fix, correct the rows.")
    for row in compat.rocm:
        if compat.driver(row.min_driver) is None:
            raise UsageError(f"{path}: [[rocm]] {row.rocm} 'min_driver' {row.min_driver} has no [[driver]] row. To fix, add it.")


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def check_driver(info: DriverInfo, image_rocm: str | None, compat: Compat | None = None) -> str:
    """Raise EnvironmentProblem for a pair AMD's matrix rules out; else return a one-line note for the report."""
    if not info.loaded:
        raise EnvironmentProblem(
            "GPU preflight failed because the amdgpu kernel module is not loaded. To fix, install the amdgpu "
            f"driver (amdgpu-dkms) and run `modprobe amdgpu`, {CPU_FIX}.")
    compat = compat or load_compat()
    minor = rocm_minor(image_rocm)
    row = compat.row(minor) if minor else None
    if row is None:
        return f"unknown: not in the compatibility table (image ROCm {image_rocm or 'unknown'}; host: {info.describe()})"
    host = _version(info.module_version)
    if host is None:
        return f"unknown: not in the compatibility table (host: {info.describe()}; AMD's matrix lists only its own driver releases)"
    need = compat.driver(row.min_driver)
    if need is None:  # load_compat refuses a row whose min_driver the table does not list
        raise UsageError(f"the compatibility table lists no driver {row.min_driver}. To fix, restore it from git.")
    if host < Version(need.module):
        raise EnvironmentProblem(_too_old(info, host, row, need, compat))
    if host > Version(compat.drivers[-1].module):
        return f"unknown: not in the compatibility table (amdgpu {info.module_version} is newer than every row; image ROCm {minor})"
    return f"compatible: amdgpu {info.module_version} ({_release_name(host, compat)}) supports ROCm {minor} ({row.source})"


def _release_name(host: Version, compat: Compat) -> str:
    exact = next((d for d in compat.drivers if Version(d.module) == host), None)
    if exact:
        return f"AMD GPU Driver {exact.release}"
    below = [d for d in compat.drivers if Version(d.module) < host]
    return f"newer than AMD GPU Driver {below[-1].release}" if below else "older than every known release"


def _too_old(info: DriverInfo, host: Version, row: RocmRow, need: DriverRelease, compat: Compat) -> str:
    return (
        f"GPU preflight failed because the host's amdgpu driver {info.module_version} ({_release_name(host, compat)}) "
        f"does not support the image's ROCm {row.rocm}, which needs AMD GPU Driver {need.release} or newer "
        f"(amdgpu {need.module}+; supported: {row.supported}; {row.source}). "
        f"To fix, install {row.install} on the host and reboot, or use an image built on an older ROCm.")


# ---- run flags ----------------------------------------------------------------------------------------------


class RunOptions(TypedDict, total=False):
    """The docker SDK's containers.create()/run() keywords a GPU step adds (run_flags, then compute_options)."""

    devices: list[str]
    group_add: list[str]
    environment: dict[str, str]
    user: str
    security_opt: list[str]
    ipc_mode: str


def run_flags(access: DeviceAccess) -> RunOptions:
    """docker SDK kwargs for containers.run(): the chosen nodes, their GIDs by number, the visible-device env."""
    flags: RunOptions = {
        "devices": [f"{p}:{_container_path(p)}:rwm" for p in access.devices],
        "group_add": [str(g) for g in access.group_ids],
        "environment": dict(access.env),
    }
    if access.user:
        flags["user"] = access.user
    return flags


# Run options beyond the devices, per GPU step, and only what that step needs.
# - seccomp=unconfined, every GPU step: ROCm's own `docker run` line for GPU containers carries it ("enables
#   memory mapping, recommended for HPC"; https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html).
#   Docker's default profile refuses mbind/set_mempolicy/get_mempolicy without CAP_SYS_NICE
#   (https://docs.docker.com/engine/security/seccomp/), the NUMA calls the ROCm runtime makes for host memory.
# - ipc=host, smoke only: the smoke test runs ATOM's engine, several processes that pass tensors through
#   /dev/shm, which Docker caps at 64 MiB per container. ROCm's vLLM container line
#   (https://rocm.docs.amd.com/en/7.12.0-preview/rocm-for-ai/vllm.html) and ATOM's own CI
#   (ROCm/ATOM .github/actions/setup-gpu-container/action.yml: --ipc=host --shm-size=16G) share the host's IPC.
#   Validation is one process and keeps its private IPC namespace.
# - memlock is left alone: ATOM's CI adds --ulimit memlock=-1 (same file) for RDMA-registered buffers (MORI, RCCL
#   over InfiniBand across nodes); ROCm's docker pages do not ask for it, and a one-node smoke test registers
#   nothing. Raising it needs CAP_SYS_RESOURCE in the daemon: a nested or rootless dockerd refuses to start such a
#   container ("error setting rlimit type 8: operation not permitted", measured here).
_SECCOMP: RunOptions = {"security_opt": ["seccomp=unconfined"]}
STEP_OPTIONS: dict[str, RunOptions] = {
    "validate": _SECCOMP,
    "smoke": {**_SECCOMP, "ipc_mode": "host"},
}


def compute_options(step: str) -> RunOptions:
    """docker SDK kwargs a GPU step needs besides its devices; a GPU step not listed gets the common base."""
    return copy.deepcopy(STEP_OPTIONS.get(step, _SECCOMP))  # a copy: callers merge it into their kwargs


def describe(access: DeviceAccess) -> list[dict[str, int | str | None]]:
    """What the build report lists for the GPUs a step ran on."""
    return [
        {"index": g.index, "container_index": i, "pci_bus": g.pci_bus, "marketing_name": g.marketing_name,
         "gfx": g.gfx, "render": g.render_path}
        for i, g in enumerate(access.gpus)
    ]
