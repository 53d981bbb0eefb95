import os

import pytest

from cleanbuild.core.errors import EnvironmentProblem, UsageError
from cleanbuild.gpuhost import arch as A
from cleanbuild.gpuhost.arch import Arch, Gpu
from tests.support.probe_outputs import (
    amd_smi_json,
    amd_smi_text,
    kfd_cpu,
    kfd_gpu,
    rocminfo,
)

EIGHT_MI300X = [("gfx942", 304)] * 8


def test_facts_per_arch():
    assert Arch.GFX942.facts.fp8_dtype == "float8_e4m3fnuz" and Arch.GFX942.facts.fp8_max == 240
    assert Arch.GFX950.facts.fp8_dtype == "float8_e4m3fn" and Arch.GFX950.facts.fp8_max == 448
    assert (Arch.GFX942.facts.lds_kib, Arch.GFX950.facts.lds_kib) == (64, 160)
    assert Arch.GFX942.facts.cu_counts["MI308X"] == 80 and Arch.GFX950.facts.cu_counts["MI355X"] == 256


@pytest.mark.parametrize("name", ["gfx942", "GFX942", " gfx942:sramecc+:xnack- "])
def test_parse_accepts_spellings(name):
    assert Arch.parse(name) is Arch.GFX942


@pytest.mark.parametrize("name", ["gfx90a", "gfx1100", "", "mi300x", "gfx9420"])
def test_parse_rejects_unknown_naming_supported(name):
    with pytest.raises(UsageError, match="gfx942\\|gfx950"):
        Arch.parse(name)


@pytest.mark.parametrize("name", ["gfx940", "gfx941"])
def test_pre_release_names_are_explained(name):
    with pytest.raises(UsageError, match="pre-release"):
        Arch.parse(name)


def test_parse_list_for_matrix():
    assert Arch.parse_list("gfx942,gfx950") == (Arch.GFX942, Arch.GFX950)
    assert Arch.parse_list("gfx950;gfx950") == (Arch.GFX950,)
    with pytest.raises(UsageError):
        Arch.parse_list(" , ")


def test_rocminfo_skips_cpu_agents_and_reads_eight_gpus():
    gpus = A.parse_rocminfo(rocminfo(EIGHT_MI300X))
    assert gpus == [Gpu("gfx942", 304)] * 8


def test_rocminfo_isa_line_backs_up_a_missing_name():
    text = rocminfo([("gfx950", 256)]).replace("  Name:                    gfx950\n", "  Name:                    \n")
    assert A.parse_rocminfo(text) == [Gpu("gfx950", 256)]


def test_rocminfo_cpu_only_and_garbage():
    assert A.parse_rocminfo(rocminfo([])) == []
    assert A.parse_rocminfo("segfault\n\x00\x01garbage") == []
    assert A.parse_rocminfo("") == []


def test_amd_smi_text_and_json():
    assert A.parse_amd_smi(amd_smi_text([("gfx950", 256)] * 8)) == [Gpu("gfx950", 256)] * 8
    assert A.parse_amd_smi(amd_smi_json([("gfx942", 80)])) == [Gpu("gfx942", 80)]
    assert A.parse_amd_smi("{not json") == []
    assert A.parse_amd_smi("") == []


@pytest.mark.parametrize("version,name", [(90402, "gfx942"), (90500, "gfx950"), (90010, "gfx90a"), (110000, "gfx1100")])
def test_kfd_target_version_mapping(version, name):
    assert A.gfx_from_target_version(version) == name


def test_kfd_properties_skip_cpu_nodes():
    gpus = A.parse_kfd_properties([kfd_cpu(), kfd_gpu(90402), kfd_gpu(90402)])
    assert gpus == [Gpu("gfx942", 304)] * 2


def test_kfd_properties_keeps_integer_values_only():
    assert A.kfd_properties("simd_count 1216\nname gfx942\nlocation_id -1\nbad line here\n") == {
        "simd_count": 1216, "location_id": -1}


def test_kfd_nodes_are_read_in_numeric_order_and_an_unreadable_node_is_empty(tmp_path):
    nodes = tmp_path / A.KFD_NODES
    for i in (10, 2, 9):
        (nodes / str(i)).mkdir(parents=True)
        (nodes / str(i) / "properties").write_text(kfd_gpu(90402) if i == 10 else kfd_cpu())
    (nodes / "2" / "properties").unlink()  # a node without its file reads as no GPU, not an error
    (nodes / "lost+found").mkdir()  # not a node: ignored
    assert [(n, A.parse_kfd_properties([t])) for n, t in A.kfd_nodes(tmp_path)] == [
        (2, []), (9, []), (10, [Gpu("gfx942", 304)])]


def test_kfd_nodes_without_a_topology_is_empty(tmp_path):
    assert A.kfd_nodes(tmp_path) == []


def test_torch_probe_output():
    assert A.parse_torch("gfx942:sramecc+:xnack- 304\ngfx942:sramecc+:xnack- 304\n") == [Gpu("gfx942", 304)] * 2
    assert A.parse_torch("NVIDIA H200 132\n") == []


class FakeHost:
    """A Runner that answers from recorded outputs; None = binary absent; 'HANG' = times out."""

    def __init__(self, outputs):
        self.outputs = outputs
        self.calls = []

    def __call__(self, argv, timeout):
        self.calls.append(argv[0])
        out = self.outputs.get(argv[0])
        if out is None:
            return None
        return ("", True) if out == "HANG" else (out, False)


def test_detect_prefers_amd_smi(tmp_path):
    host = FakeHost({"amd-smi": amd_smi_text([("gfx950", 256)] * 8), "rocminfo": rocminfo(EIGHT_MI300X)})
    det = A.detect(host, tmp_path)
    assert (det.arch, det.source, len(det.gpus), det.cu_count) == (Arch.GFX950, "amd-smi", 8, 256)
    assert host.calls == ["amd-smi"]


def test_detect_falls_through_to_sysfs(tmp_path):
    for i, text in enumerate([kfd_cpu(), kfd_gpu(90402)]):
        node = tmp_path / f"class/kfd/kfd/topology/nodes/{i}"
        node.mkdir(parents=True)
        (node / "properties").write_text(text)
    det = A.detect(FakeHost({"rocminfo": "garbage"}), tmp_path)
    assert det.arch is Arch.GFX942 and det.source == "kfd-sysfs"
    assert "rocminfo: no GPU in its output" in det.notes


def test_hanging_probe_is_time_limited_and_named(tmp_path):
    det = A.detect(FakeHost({"amd-smi": "HANG", "rocminfo": rocminfo([("gfx942", 304)])}), tmp_path)
    assert det.source == "rocminfo" and any("no answer" in n for n in det.notes)
    with pytest.raises(EnvironmentProblem, match="amd-smi: no answer"):
        A.detect(FakeHost({"amd-smi": "HANG"}), tmp_path)


def test_mixed_gpus_are_an_error(tmp_path):
    host = FakeHost({"rocminfo": rocminfo([("gfx942", 304)] * 4 + [("gfx950", 256)] * 4)})
    with pytest.raises(UsageError, match=r"mixed GPU architectures.*4x gfx942, 4x gfx950"):
        A.detect(host, tmp_path)


def test_no_gpu_and_no_arch(tmp_path):
    with pytest.raises(UsageError, match="no AMD GPU found.*pass --arch"):
        A.detect(FakeHost({"rocminfo": rocminfo([])}), tmp_path)


def test_unsupported_detected_arch(tmp_path):
    with pytest.raises(UsageError, match="gfx90a.*not supported"):
        A.detect(FakeHost({"rocminfo": rocminfo([("gfx90a", 110)])}), tmp_path)


def test_resolve_with_arch_does_not_probe(tmp_path):
    host = FakeHost({})
    assert A.resolve(Arch.GFX950, host, tmp_path).arch is Arch.GFX950
    assert host.calls == []


def test_real_runner_times_out_a_hanging_command(tmp_path):
    script = tmp_path / "hang"
    script.write_text("#!/bin/sh\nsleep 30\n")
    script.chmod(0o755)
    assert A.host_runner([str(script)], 0.5) == ("", True)
    assert A.host_runner(["definitely-not-a-binary-xyz"], 1) is None


# ---- output that is not UTF-8 (defect 9: it crashed detection even when it named gfx942) ---------------------

NOT_UTF8 = b"\xff\xfe\x80 driver banner \xc3(\n"


def test_parser_reads_a_decoded_probe_with_replacement_characters():
    text = (NOT_UTF8 + rocminfo([("gfx942", 304)]).encode()).decode(errors="replace")
    assert A.parse_rocminfo(text) == [Gpu("gfx942", 304)]


def fake_tool(folder, name: str, output: bytes, code: int = 0):
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.out").write_bytes(output)
    script = folder / name
    script.write_text(f"#!/bin/sh\ncat '{folder / (name + '.out')}'\nexit {code}\n")
    script.chmod(0o755)


def test_detection_through_the_real_runner_survives_non_utf8_output(tmp_path, monkeypatch):
    """amd-smi fails, rocminfo prints bytes that are not UTF-8 around a gfx942 agent: rocminfo decides."""
    bin_dir = tmp_path / "bin"
    fake_tool(bin_dir, "amd-smi", b"\xff\xfe", code=1)
    fake_tool(bin_dir, "rocminfo", NOT_UTF8 + rocminfo(EIGHT_MI300X).encode() + b"\xff\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    det = A.detect(A.host_runner, tmp_path / "sys")
    assert (det.arch, det.source, len(det.gpus)) == (Arch.GFX942, "rocminfo", 8)
    assert "amd-smi: not available" in det.notes


def test_kfd_properties_that_are_not_utf8_still_name_the_gpu(tmp_path):
    node = tmp_path / "class/kfd/kfd/topology/nodes/1"
    node.mkdir(parents=True)
    (node / "properties").write_bytes(NOT_UTF8 + kfd_gpu(90402).encode())
    det = A.detect(FakeHost({}), tmp_path)
    assert (det.arch, det.source) == (Arch.GFX942, "kfd-sysfs")
