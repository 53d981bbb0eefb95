"""cleanbuild.gpuhost.gpu over fake /dev and /sys trees: discovery, selection, groups by number, permissions, driver."""

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from cleanbuild.core.errors import EnvironmentProblem, UsageError
from cleanbuild.gpuhost import gpu as G
from cleanbuild.gpuhost.arch import Arch

MI300X, MI355X = 90402, 90500


@dataclass(frozen=True)
class Ids:
    """The owners the fake nodes get. kfd, video, render: three distinct GIDs (each node's own GID must be the one
    added); me: the owner of what this process makes; other: a container user that is not me; tenant: a user other
    than root that this process can give a node to (root: 1000; another user: itself)."""

    kfd: int
    video: int
    render: int
    me: int
    other: int
    tenant: int


def ids_here() -> Ids | None:
    """As root, a host's usual numbers; as another user, three of its own groups (a user may give a file only to a
    group it is in: CI's non-root run has three), or None."""
    if os.geteuid() == 0:
        return Ids(992, 44, 109, 0, 1000, 1000)
    groups = sorted(set(os.getgroups()) | {os.getegid()})
    if len(groups) < 3:
        return None
    return Ids(*groups[-3:], os.geteuid(), os.geteuid() + 1, os.geteuid())


@pytest.fixture
def ids() -> Ids:
    found = ids_here()
    if found is None:
        pytest.skip("gives fake device nodes three distinct groups: needs root or a user in three groups (CI runs "
                    "this as root and as such a user)")
    return found


def kfd_props(version: int = 0, minor: int = 0, location: int = 0, domain: int = 0) -> str:
    """A KFD topology `properties` file as amdgpu writes it (CPU nodes: no SIMDs, version 0, minor 0)."""
    simds = 1216 if version else 0
    return (f"cpu_cores_count {0 if version else 96}\nsimd_count {simds}\nmem_banks_count 1\nsimd_per_cu 4\n"
            f"gfx_target_version {version}\nvendor_id 4098\nlocation_id {location}\ndomain {domain}\n"
            f"drm_render_minor {minor}\nnum_xcc {8 if version else 0}\n")


def make_host(root: Path, gpus: list[tuple[int, int, str]], cpu_nodes: int = 2, product: str | None = "AMD Instinct MI300X",
              drm_links: bool = True) -> tuple[Path, Path]:
    """(dev_root, sysfs) for GPUs given as (gfx_target_version, render minor, PCI bus) in KFD node order."""
    dev, sys = root / "dev", root / "sys"
    nodes = sys / G.KFD_NODES
    (dev / "dri").mkdir(parents=True)
    (dev / "kfd").write_text("")
    for n in range(cpu_nodes):
        _write(nodes / str(n) / "properties", kfd_props())
    for i, (version, minor, bus) in enumerate(gpus):
        location = int(bus[5:7], 16) << 8 | int(bus[8:10], 16) << 3 | int(bus[11])
        _write(nodes / str(cpu_nodes + i) / "properties", kfd_props(version, minor, location))
        (dev / "dri" / f"renderD{minor}").write_text("")
        (dev / "dri" / f"card{minor - 127}").write_text("")  # display nodes exist too and must never be passed
        if drm_links:
            pci = sys / "devices" / "pci0000:00" / bus
            pci.mkdir(parents=True)
            if product:
                (pci / "product_name").write_text(product + "\n")
            (sys / "class" / "drm" / f"renderD{minor}").mkdir(parents=True)
            (sys / "class" / "drm" / f"renderD{minor}" / "device").symlink_to(pci)
    return dev, sys


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def own(path: Path, gid: int, mode: int = 0o660, uid: int = -1) -> None:
    """chown (uid -1: this process's own) and chmod, as udev would."""
    os.chown(path, uid, gid)
    os.chmod(path, mode)


BUSES = ["0000:05:00.0", "0000:26:00.0", "0000:46:00.0", "0000:65:00.0",
         "0000:85:00.0", "0000:a6:00.0", "0000:c6:00.0", "0000:e5:00.0"]


@pytest.fixture
def two(tmp_path):
    """Two MI300X, as make_host leaves them (this process's owner and group, mode 0644)."""
    return make_host(tmp_path, [(MI300X, 128, BUSES[0]), (MI300X, 129, BUSES[1])])


@pytest.fixture
def owned(two, ids):
    """The two MI300X with a host's groups: renderD128 in video, renderD129 in render, /dev/kfd in a third."""
    dev, sys = two
    own(dev / "kfd", ids.kfd)
    own(dev / "dri" / "renderD128", ids.video)
    own(dev / "dri" / "renderD129", ids.render)
    return dev, sys


@pytest.fixture
def eight(tmp_path):
    """Eight MI300X behind four CPU nodes (KFD nodes 4..11), render minors not in KFD order."""
    minors = [131, 128, 130, 129, 135, 132, 134, 133]
    return make_host(tmp_path, [(MI300X, m, b) for m, b in zip(minors, BUSES, strict=True)], cpu_nodes=4)


# ---- discovery ------------------------------------------------------------------------------------------


def test_two_gpus_map_kfd_nodes_to_render_nodes(two):
    dev, sys = two
    nodes = G.discover(dev, sys)
    assert nodes == (
        G.GpuNode(0, 128, str(dev / "dri/renderD128"), BUSES[0], "gfx942", "AMD Instinct MI300X", 2),
        G.GpuNode(1, 129, str(dev / "dri/renderD129"), BUSES[1], "gfx942", "AMD Instinct MI300X", 3),
    )


def test_index_follows_kfd_node_order_not_render_minor(eight):
    nodes = G.discover(*eight)
    assert [n.kfd_node for n in nodes] == list(range(4, 12))  # numeric order: node 10 after node 9
    assert [n.render_minor for n in nodes] == [131, 128, 130, 129, 135, 132, 134, 133]
    assert [n.index for n in nodes] == list(range(8))
    assert [n.pci_bus for n in nodes] == BUSES


def test_mixed_gfx942_and_gfx950(tmp_path):
    dev, sys = make_host(tmp_path, [(MI300X, 128, BUSES[0]), (MI355X, 129, BUSES[1])])
    assert [n.gfx for n in G.discover(dev, sys)] == ["gfx942", "gfx950"]


def test_gpu_without_render_node_is_skipped_like_libhsakmt(tmp_path):
    dev, sys = make_host(tmp_path, [(MI300X, 128, BUSES[0]), (MI300X, 129, BUSES[1]), (MI300X, 130, BUSES[2])])
    (dev / "dri" / "renderD129").unlink()
    nodes = G.discover(dev, sys)
    assert [(n.index, n.render_minor) for n in nodes] == [(0, 128), (1, 130)]


def test_pci_bus_from_kfd_location_when_drm_sysfs_is_missing(tmp_path):
    dev, sys = make_host(tmp_path, [(MI355X, 128, "0000:c6:00.0")], drm_links=False)
    (node,) = G.discover(dev, sys)
    assert node.pci_bus == "0000:c6:00.0"
    assert node.marketing_name is None


def test_marketing_name_absent_when_driver_has_no_product_name(tmp_path):
    (node,) = G.discover(*make_host(tmp_path, [(MI300X, 128, BUSES[0])], product=None))
    assert node.marketing_name is None


def test_no_kfd_topology_means_no_gpus(tmp_path):
    (tmp_path / "dev" / "dri").mkdir(parents=True)
    assert G.discover(tmp_path / "dev", tmp_path / "sys") == ()


# ---- selection --------------------------------------------------------------------------------------------


def test_select_all_some_and_duplicates(eight):
    nodes = G.discover(*eight)
    assert G.select(nodes, None) == nodes
    assert [n.index for n in G.select(nodes, (5, 2))] == [2, 5]  # container order is host order
    assert [n.index for n in G.select(nodes, (1, 1, 0, 1))] == [0, 1]


def test_select_unknown_index_names_what_exists(eight):
    with pytest.raises(UsageError) as info:
        G.select(G.discover(*eight), (9,))
    assert str(info.value).startswith("--gpu 9: this host has GPUs 0-7 (8x gfx942).")


def test_select_unknown_on_mixed_host_lists_both_archs(tmp_path):
    nodes = G.discover(*make_host(tmp_path, [(MI300X, 128, BUSES[0]), (MI355X, 129, BUSES[1])]))
    with pytest.raises(UsageError, match=r"--gpu 4: this host has GPUs 0-1 \(1x gfx942, 1x gfx950\)"):
        G.select(nodes, (0, 4))


def test_select_empty_tuple_is_a_usage_error(two):
    with pytest.raises(UsageError, match="--gpu is empty"):
        G.select(G.discover(*two), ())


@pytest.mark.parametrize(("text", "want"), [("0,2", (0, 2)), (" 3 ", (3,)), ("1 4", (1, 4)), ("all", None), ("", None), (None, None)])
def test_parse_gpus(text, want):
    assert G.parse_gpus(text) == want


@pytest.mark.parametrize("text", ["a", "0,-1", "1.5"])
def test_parse_gpus_rejects_non_indices(text):
    with pytest.raises(UsageError, match="--gpu"):
        G.parse_gpus(text)


# ---- device access: nodes, groups by number, env ------------------------------------------------------------


def test_access_passes_kfd_and_exactly_the_chosen_render_node(two):
    dev, sys = two
    access = G.device_access((1,), dev_root=dev, sysfs=sys)
    assert access.devices == (str(dev / "kfd"), str(dev / "dri" / "renderD129"))
    assert [g.render_minor for g in access.gpus] == [129]


def test_group_ids_are_the_numeric_gids_of_the_chosen_nodes(owned, ids):
    dev, sys = owned
    assert G.device_access((1,), dev_root=dev, sysfs=sys).group_ids == tuple(sorted((ids.render, ids.kfd)))
    assert G.device_access(None, dev_root=dev, sysfs=sys).group_ids == tuple(sorted((ids.video, ids.render, ids.kfd)))


def test_shared_gid_is_added_once(two, ids):
    dev, sys = two
    for path in (dev / "kfd", dev / "dri" / "renderD128", dev / "dri" / "renderD129"):
        own(path, ids.render)
    assert G.device_access(dev_root=dev, sysfs=sys).group_ids == (ids.render,)


def test_no_group_name_reaches_docker(owned, ids):
    dev, sys = owned
    access = G.device_access((0, 1), dev_root=dev, sysfs=sys)
    assert G.run_flags(access)["group_add"] == [str(g) for g in sorted((ids.video, ids.render, ids.kfd))]
    assert all(isinstance(gid, int) for gid in access.group_ids)


def test_the_dri_directory_is_never_passed(two):
    dev, sys = two
    flags = G.run_flags(G.device_access(None, dev_root=dev, sysfs=sys))
    hosts = [entry.split(":")[0] for entry in flags["devices"]]
    assert hosts == [f"{dev}/kfd", f"{dev}/dri/renderD128", f"{dev}/dri/renderD129"]


@pytest.mark.parametrize(("chosen", "visible"), [((6,), "0"), ((3, 5), "0,1"), (None, "0,1,2,3,4,5,6,7")])
def test_visible_devices_count_the_passed_nodes_from_zero(eight, chosen, visible):
    access = G.device_access(chosen, dev_root=eight[0], sysfs=eight[1])
    env = dict(access.env)
    assert env == {"HIP_VISIBLE_DEVICES": visible, "ROCR_VISIBLE_DEVICES": visible}
    assert len(access.devices) - 1 == len(visible.split(","))  # one render node per visible index


def test_run_flags_map_a_foreign_dev_root_to_the_real_names_inside(owned, ids):
    dev, sys = owned
    access = G.device_access((1,), user="1000:1000", dev_root=dev, sysfs=sys)
    assert G.run_flags(access) == {
        "devices": [f"{dev}/kfd:/dev/kfd:rwm", f"{dev}/dri/renderD129:/dev/dri/renderD129:rwm"],
        "group_add": [str(g) for g in sorted((ids.render, ids.kfd))],
        "environment": {"HIP_VISIBLE_DEVICES": "0", "ROCR_VISIBLE_DEVICES": "0"},
        "user": "1000:1000",
    }


def test_describe_names_each_gpu_for_the_report(eight):
    access = G.device_access((4, 2), dev_root=eight[0], sysfs=eight[1])
    assert G.describe(access) == [
        {"index": 2, "container_index": 0, "pci_bus": BUSES[2], "marketing_name": "AMD Instinct MI300X",
         "gfx": "gfx942", "render": str(eight[0] / "dri" / "renderD130")},
        {"index": 4, "container_index": 1, "pci_bus": BUSES[4], "marketing_name": "AMD Instinct MI300X",
         "gfx": "gfx942", "render": str(eight[0] / "dri" / "renderD135")},
    ]


# ---- device access: arch and host errors ----------------------------------------------------------------------


@pytest.fixture
def mixed(tmp_path):
    return make_host(tmp_path, [(MI300X, 128, BUSES[0]), (MI355X, 129, BUSES[1])])


def test_chosen_gpu_must_match_the_image_arch(mixed):
    with pytest.raises(UsageError) as info:
        G.device_access((1,), dev_root=mixed[0], sysfs=mixed[1], arch="gfx942")
    assert str(info.value).startswith(f"GPU 1 ({BUSES[1]}) is gfx950 but the image is built for gfx942.")
    assert "--gpu (here: 0)" in str(info.value)


def test_every_gpu_of_a_mixed_host_is_checked_when_none_is_chosen(mixed):
    with pytest.raises(UsageError, match="GPU 1 .* is gfx950"):
        G.device_access(None, dev_root=mixed[0], sysfs=mixed[1], arch=Arch.GFX942)


def test_matching_arch_passes(mixed):
    access = G.device_access((1,), dev_root=mixed[0], sysfs=mixed[1], arch=Arch.GFX950)
    assert [g.gfx for g in access.gpus] == ["gfx950"]


def test_missing_kfd_is_an_environment_problem(two):
    dev, sys = two
    (dev / "kfd").unlink()
    with pytest.raises(EnvironmentProblem) as info:
        G.device_access(dev_root=dev, sysfs=sys)
    assert info.value.exit_code == 3
    assert f"{dev}/kfd does not exist" in str(info.value)
    assert "amdgpu" in str(info.value) and "CPU" in str(info.value)


def test_no_render_nodes_is_an_environment_problem(two):
    dev, sys = two
    for node in (dev / "dri").glob("renderD*"):
        node.unlink()
    with pytest.raises(EnvironmentProblem, match="no render node under .*/dri belongs to a GPU"):
        G.device_access(dev_root=dev, sysfs=sys)


# ---- permission preflight ------------------------------------------------------------------------------------


def test_root_opens_any_node(two):
    own(two[0] / "dri" / "renderD129", os.getegid(), 0o600)
    G.check_permissions(G.device_access((1,), dev_root=two[0], sysfs=two[1]))


def test_non_root_opens_group_rw_nodes_through_the_added_gids(owned, ids):
    user = f"{ids.other}:{ids.other}"
    G.check_permissions(G.device_access((1,), user=user, dev_root=owned[0], sysfs=owned[1]))


def test_owner_only_node_stops_another_user(owned, ids):
    dev, sys = owned
    own(dev / "dri" / "renderD129", ids.render, 0o600)
    access = G.device_access((1,), user=f"{ids.other}:{ids.other}", dev_root=dev, sysfs=sys)
    with pytest.raises(EnvironmentProblem) as info:
        G.check_permissions(access)
    message = str(info.value)
    assert f"{dev}/dri/renderD129 (mode 0600, owner {ids.me}, group {ids.render})" in message
    assert f"container user {ids.other}:{ids.other}" in message
    assert "udev rule" in message and "chmod g+rw" in message


def test_group_read_only_node_is_refused(owned, ids):
    dev, sys = owned
    own(dev / "kfd", ids.kfd, 0o640)
    with pytest.raises(EnvironmentProblem, match=rf"kfd \(mode 0640, owner {ids.me}, group {ids.kfd}\)"):
        G.check_permissions(G.device_access((0,), user=str(ids.other), dev_root=dev, sysfs=sys))


def test_owner_bits_win_over_group_bits(owned, ids):
    # The kernel looks at the owner bits only, when the user owns the node: 0060 shuts its owner out.
    dev, sys = owned
    own(dev / "dri" / "renderD129", ids.render, 0o060, uid=ids.tenant)
    with pytest.raises(EnvironmentProblem, match=f"renderD129 .mode 0060, owner {ids.tenant}"):
        G.check_permissions(G.device_access((1,), user=f"{ids.tenant}:{ids.tenant}", dev_root=dev, sysfs=sys))


def test_world_rw_node_is_fine_for_a_named_user(two):
    dev, sys = two
    own(dev / "dri" / "renderD129", os.getegid(), 0o666)
    own(dev / "kfd", os.getegid(), 0o666)
    G.check_permissions(G.device_access((1,), user="atom", dev_root=dev, sysfs=sys))


def test_explicit_uid_and_gids_override_the_user_string(owned, ids):
    dev, sys = owned
    own(dev / "dri" / "renderD129", ids.render, 0o600)
    access = G.device_access((1,), dev_root=dev, sysfs=sys)  # root by default
    with pytest.raises(EnvironmentProblem, match="renderD129"):
        G.check_permissions(access, uid=ids.other, gids=[ids.other])


# ---- driver compatibility ---------------------------------------------------------------------------------


def fake_driver(root: Path, module: str | None, kernel: str = "6.8.0-49-generic", loaded: bool = True) -> tuple[Path, Path]:
    sys, proc = root / "sys", root / "proc"
    _write(proc / "sys" / "kernel" / "osrelease", kernel + "\n")
    if loaded:
        (sys / "module" / "amdgpu").mkdir(parents=True)
    if module:
        _write(sys / "module" / "amdgpu" / "version", module + "\n")
    return sys, proc


def test_driver_info_reads_the_dkms_module_version(tmp_path):
    info = G.driver_info(*fake_driver(tmp_path, "6.16.13"))
    assert (info.loaded, info.module_version, info.kernel_release, info.kind) == (True, "6.16.13", "6.8.0-49-generic", "amdgpu-dkms")


def test_driver_info_falls_back_to_the_kernel_release_for_in_tree_amdgpu(tmp_path):
    info = G.driver_info(*fake_driver(tmp_path, None, kernel="6.14.0-1012-oem"))
    assert (info.module_version, info.kernel_release, info.kind) == (None, "6.14.0-1012-oem", "in-tree")


def test_driver_info_without_amdgpu(tmp_path):
    assert G.driver_info(*fake_driver(tmp_path, None, loaded=False)).kind == "not loaded"


def test_old_driver_under_rocm_7_2_fails_naming_versions_and_fix():
    with pytest.raises(EnvironmentProblem) as info:
        G.check_driver(G.DriverInfo(True, "6.10.5", None), "7.2.0")
    message = str(info.value)
    assert info.value.exit_code == 3
    assert "amdgpu driver 6.10.5 (AMD GPU Driver 6.3)" in message
    assert "ROCm 7.2, which needs AMD GPU Driver 6.4 or newer (amdgpu 6.12.12+" in message
    assert "To fix, install amdgpu-dkms of AMD GPU Driver 30.30" in message


@pytest.mark.parametrize(("module", "rocm"), [
    ("6.7.0", "6.4.3"), ("6.8.5", "7.0.2"), ("6.12.12", "7.1.1"), ("6.12.12", "7.2.0"), ("6.14.14", "7.2.0"),
])
def test_oldest_supported_driver_per_rocm_passes(module, rocm):
    assert G.check_driver(G.DriverInfo(True, module, None), rocm).startswith("compatible:")


@pytest.mark.parametrize(("module", "rocm"), [
    ("6.3.6", "6.4.3"), ("6.7.0", "7.0.2"), ("6.10.5", "7.1.1"), ("6.8.5", "7.2.0"),
])
def test_one_release_older_is_refused(module, rocm):
    with pytest.raises(EnvironmentProblem, match=f"amdgpu driver {module} .* ROCm {rocm[:3]}, which needs"):
        G.check_driver(G.DriverInfo(True, module, None), rocm)


def test_supported_pair_is_a_note_naming_the_release():
    note = G.check_driver(G.DriverInfo(True, "6.16.13", None), "7.2.1")
    assert note.startswith("compatible: amdgpu 6.16.13 (AMD GPU Driver 30.30) supports ROCm 7.2")


@pytest.mark.parametrize(("info", "rocm", "why"), [
    (G.DriverInfo(True, None, "6.8.0-49-generic"), "7.2", "in-tree amdgpu of kernel 6.8.0-49-generic"),
    (G.DriverInfo(True, "6.19.14", None), "7.2", "newer than every row"),
    (G.DriverInfo(True, "6.16.13", None), "7.14.0", "image ROCm 7.14.0"),
    (G.DriverInfo(True, "6.16.13", None), None, "image ROCm unknown"),
])
def test_unknown_pairs_are_notes_not_errors(info, rocm, why):
    note = G.check_driver(info, rocm)
    assert note.startswith("unknown: not in the compatibility table")
    assert why in note


def test_unloaded_driver_is_an_environment_problem():
    with pytest.raises(EnvironmentProblem, match="amdgpu kernel module is not loaded"):
        G.check_driver(G.DriverInfo(False, None, "6.8.0"), "7.2")


# ---- the compatibility data ------------------------------------------------------------------------------


def test_shipped_compat_data_parses_and_every_row_names_a_source():
    compat = G.load_compat()
    assert {r.rocm for r in compat.rocm} >= {"6.4", "7.0", "7.1", "7.2"}
    for row in (*compat.drivers, *compat.rocm):
        assert row.source.startswith("https://"), row
    assert [d.release for d in compat.drivers] == ["6.1", "6.2", "6.3", "6.4", "30.10", "30.20", "30.30"]


GOOD_DRIVER = '[[driver]]\nrelease = "6.4"\nmodule = "6.12.12"\npackage = "p"\nsource = "https://x"\n'
GOOD_ROCM = '[[rocm]]\nrocm = "7.2"\nmin_driver = "6.4"\nsupported = "s"\ninstall = "i"\nsource = "https://y"\n'


@pytest.mark.parametrize(("text", "named"), [
    (GOOD_DRIVER + GOOD_ROCM.replace('source = "https://y"\n', ""), "'source'"),
    (GOOD_DRIVER + GOOD_ROCM.replace("https://y", "AMD docs"), "'source' is not a URL"),
    (GOOD_DRIVER + GOOD_ROCM.replace('min_driver = "6.4"', 'min_driver = "6.3"'), "'min_driver' 6.3 has no [[driver]] row"),
    (GOOD_DRIVER.replace('"6.12.12"', '"six"') + GOOD_ROCM, "'module' = 'six' is not a version"),
    (GOOD_DRIVER + GOOD_DRIVER.replace('"6.4"', '"30.10"').replace("6.12.12", "6.10.5") + GOOD_ROCM, "do not rise"),
    (GOOD_DRIVER, "[[rocm]] is missing"),
    ("[[driver]\n", "reading"),
])
def test_bad_compat_data_is_a_usage_error_naming_the_key(tmp_path, text, named):
    path = tmp_path / "compat.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as info:
        G.load_compat(path)
    assert named in str(info.value)
    assert "\n" not in str(info.value)


def test_good_minimal_compat_data_loads(tmp_path):
    path = tmp_path / "compat.toml"
    path.write_text('checked = "2026-11-29"\n' + GOOD_DRIVER + GOOD_ROCM)
    compat = G.load_compat(path)
    assert compat.row("7.2").min_driver == "6.4"
    assert G.check_driver(G.DriverInfo(True, "6.12.12", None), "7.2", compat).startswith("compatible:")


# ---- run options per step -------------------------------------------------------------------------------------


def test_validation_gets_no_ipc_or_shm():
    options = G.compute_options("validate")
    assert options == {"security_opt": ["seccomp=unconfined"]}


def test_smoke_shares_the_host_ipc_and_nothing_more():
    assert G.compute_options("smoke") == {"security_opt": ["seccomp=unconfined"], "ipc_mode": "host"}


def test_no_gpu_step_raises_memlock():
    assert [s for s in ("validate", "smoke", "other") if "ulimits" in G.compute_options(s)] == []


def test_an_unlisted_gpu_step_gets_the_common_base():
    assert G.compute_options("audit") == {"security_opt": ["seccomp=unconfined"]}


def test_compute_options_are_copies():
    G.compute_options("smoke")["security_opt"].clear()
    assert G.compute_options("smoke")["security_opt"] == ["seccomp=unconfined"]
