"""The host side without an engine: input checks, the probe's container spec, inspect-based findings, the report."""

from __future__ import annotations

import json

import pytest
from audit_helpers import REPO, make_context, site_copy
from rich.console import Console

from cleanbuild.commands import audit_image, audit_report
from cleanbuild.core import engine
from cleanbuild.core.errors import EnvironmentProblem, UsageError
from cleanbuild.gpuhost.arch import Arch
from validation.probes import runner

IMAGE_ATTRS = {"Size": 3 * 2**30, "Config": {"Env": ["PATH=/opt/venv/bin:/usr/bin", "PYTHONPATH=/app/aiter",
                                                      "HF_TOKEN=hf_abcdef123", "GPU_ARCHS=gfx942"],
                                              "Labels": {"io.atom-build.arch": "gfx950", "maintainer": "x"}}}
HISTORY = [  # newest first, as the engine returns it
    {"CreatedBy": "RUN |2 GITHUB_TOKEN=ghp_topsecret GPU_ARCH=gfx942 /bin/sh -c pip install x", "Size": 10},
    {"CreatedBy": "ARG GITHUB_TOKEN", "Size": 0},
    {"CreatedBy": "RUN --mount=type=secret,id=ca /bin/sh -c apt-get update", "Size": 5},
    {"CreatedBy": "ENV GPG_KEY=A035C8C19219BA821ECEA86B64E628F8D684696D", "Size": 0},
]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"tp": (0,)}, "--tp must be one or more sizes >= 1"),
    ({"tp": ()}, "--tp must be one or more sizes >= 1"),
    ({"tp": ("8", "x")}, "--tp must be one or more sizes >= 1"),
    ({"model": "/nonexistent/model"}, "--model /nonexistent/model is neither an existing path nor a preset"),
    ({"model": "llama-9000"}, "one of: llama3-8b, qwen3-30b-a3b, deepseek-v3"),
])
def test_bad_input_is_a_usage_error_before_the_engine(monkeypatch, kwargs, message):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # an engine call would be exit 3
    args = {"arch": None, "model": None, "tp": (1,), "report_dir": None, "device": False, **kwargs}
    with pytest.raises(UsageError) as info:
        audit_image.audit("any:image", **args)
    assert message in str(info.value)
    assert info.value.exit_code == 2


def test_a_model_folder_without_config_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError) as info:
        audit_image.check_inputs(None, str(tmp_path), (1,))
    assert "has no config.json" in str(info.value)


def test_no_engine_is_exit_3(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(EnvironmentProblem) as info:
        audit_image.audit("any:image", arch=Arch.GFX942, model=None, tp=(1,), report_dir=None, device=False)
    assert (info.value.exit_code, "the Docker engine is not reachable" in str(info.value)) == (3, True)


def test_model_folder_and_file_are_mounted_read_only(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    folder = audit_image.check_inputs(Arch.GFX942, str(tmp_path), ("1", "8"))
    assert folder.tp == (1, 8)
    inside = f"/opt/atom-audit-model/{tmp_path.name}"
    assert (folder.model_arg, folder.model_mount) == (inside, (str(tmp_path), inside, "ro"))
    file = audit_image.check_inputs(Arch.GFX942, str(tmp_path / "config.json"), (1,))
    assert file.model_mount == (str(tmp_path / "config.json"), f"{inside}/config.json", "ro")
    assert audit_image.check_inputs(None, "deepseek-v3", (8,)).model_mount is None


def test_probe_spec_mounts_read_only_and_keeps_the_images_pythonpath(tmp_path):
    inputs = audit_image.check_inputs(Arch.GFX942, "llama3-8b", (1, 8))
    spec = audit_image.probe_spec(inputs, IMAGE_ATTRS, tmp_path, "RUN1", "python", want_csv=True)
    assert spec.name == "atom-audit-RUN1-python"
    assert spec.network == "none"
    assert spec.mounts == ((str(REPO / "validation"), "/opt/atom-audit/validation", "ro"),
                           (str(REPO / "patches"), "/opt/atom-audit/patches", "ro"), (str(tmp_path), "/out", "rw"))
    assert dict(spec.env)["PYTHONPATH"] == "/opt/atom-audit:/app/aiter"
    assert spec.command == ("python", "-m", "validation.audit", "--arch", "gfx942", "--json-file", "/out/audit.json",
                            "--model", "llama3-8b", "--tp", "1", "8", "--untuned-csv", "/out/untuned-gemm.csv")


def test_sealed_container_options():
    spec = audit_image.probe_spec(audit_image.check_inputs(None, None, (1,)), {}, REPO, "R", "python3", want_csv=False)
    kwargs = engine._sealed_kwargs(spec)
    assert (kwargs["read_only"], kwargs["tmpfs"], kwargs["entrypoint"], kwargs["network_mode"]) == (
        True, {"/tmp": "rw,nosuid,size=256m"}, [], "none")
    assert [(m["Source"], m["Target"], m["ReadOnly"]) for m in kwargs["mounts"]] == [
        (str(REPO / "validation"), "/opt/atom-audit/validation", True),
        (str(REPO / "patches"), "/opt/atom-audit/patches", True), (str(REPO), "/out", False)]
    assert spec.command[4] == "auto"


def test_device_spec_runs_validation_on_the_gpu(tmp_path):
    spec = audit_image.device_spec("gfx950", IMAGE_ATTRS, tmp_path, "RUN1", "python3")
    assert (spec.gpu, spec.network, spec.name) == (True, "none", "atom-audit-RUN1-device")
    assert spec.command == ("python3", "-m", "validation", "--arch", "gfx950", "--device", "cuda",
                            "--json-file", "/out/validation.json")
    assert spec.mounts[0] == (str(REPO / "validation"), "/opt/atom-audit/validation", "ro")
    assert dict(spec.env)["PYTHONPATH"] == "/opt/atom-audit:/app/aiter"


def test_secret_like_env_and_build_args_are_named_never_shown():
    f = audit_report.config_secrets(IMAGE_ATTRS, HISTORY)
    assert f["status"] == "PRESENT"
    assert f["evidence"] == ["Config.Env sets HF_TOKEN (value not shown)",
                             "layer 2 (ARG) names build arg GITHUB_TOKEN (value not shown)",
                             "layer 3 (RUN) names build arg GITHUB_TOKEN (value not shown)"]
    assert "ghp_topsecret" not in json.dumps(f)
    assert "hf_abcdef123" not in json.dumps(f)


def test_label_arch_that_disagrees_with_arch_is_present():
    f = audit_report.labels_finding(IMAGE_ATTRS, "gfx942")
    assert (f["status"], f["evidence"][-1]) == ("PRESENT", "label io.atom-build.arch=gfx950 but --arch gfx942")
    assert audit_report.labels_finding(IMAGE_ATTRS, None)["status"] == "ok"


@pytest.fixture(scope="module")
def result(pristine_site, tmp_path_factory) -> audit_report.AuditResult:
    """An AuditResult made of what the probe really writes (unpatched real aiter and ATOM) plus host findings.
    Once per module, on a site laid out as real_site's: AuditResult is frozen and the tests only read it."""
    root = tmp_path_factory.mktemp("host") / "root"
    site = site_copy(pristine_site, root)
    probe = json.loads(json.dumps(runner.audit(make_context(site, root, env={"ENABLE_CK": "0", "ATOM_CK_FREE": "1"}))))
    layers = [{"size": 2 * 2**30, "created_by": "RUN /bin/sh -c pip install"}]
    findings = (*probe["findings"], *audit_report.host_findings(IMAGE_ATTRS, HISTORY, None, layers))
    return audit_report.AuditResult(image="team/atom:old", image_id="sha256:" + "ab" * 32, arch=None,
                             image_arch=probe["image_arch"], arch_source=probe["arch_source"], findings=findings,
                             versions=probe["versions"], size_bytes=IMAGE_ATTRS["Size"], largest_layers=tuple(layers),
                             labels={}, packages=probe["packages"], seconds=1.5)


def test_exit_code_follows_present_findings(result):
    assert result.exit_code == 1
    assert [f["id"] for f in result.present] == ["tuned-gemm-default", "ck-free", "config-secrets"]


def test_report_md_has_build_cleans_layout(result, tmp_path):
    written = audit_report.write_report(result, tmp_path / "rep", tmp_path / "no-such.csv")
    md = (tmp_path / "rep" / "report.md").read_text().splitlines()
    assert md[0] == "# Audit report: team/atom:old"
    assert md[2] == f"- image: sha256:{'ab' * 32}, size 3.00 GiB"
    # unknown: first-use-compile (not the image's Python) and route (no model, no manifest)
    assert "- result: 3 PRESENT, 0 warning, 3 unknown, 13 ok (exit 1)" in md
    table = md[md.index("## Findings") + 2:]
    assert table[:2] == ["| pitfall | status | evidence | fix |", "| --- | --- | --- | --- |"]
    assert table[2].startswith("| gpu-archs | ok | ")
    assert "## Versions" in md and "## Largest layers" in md
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert (data["exit_code"], data["counts"], written.report_dir) == (1, {"PRESENT": 3, "warning": 0, "unknown": 3, "ok": 13},
                                                                       tmp_path / "rep")


@pytest.mark.parametrize("width", [80, 120, 160])
def test_table_fits_one_screen(result, width):
    console = Console(record=True, width=width, color_system=None)
    console.print(audit_report.table(result, width=width))
    lines = console.export_text().splitlines()
    assert len(lines) <= 30
    assert max(map(len, lines)) <= width
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == len(result.findings)
    assert all(line.rstrip().endswith("│") for line in rows)  # nothing spills past the right border
    assert any(line.startswith("│ tuned-gemm-default │ PRESENT │ patch would apply: ") for line in lines)


def test_patched_result_exits_zero_without_host_problems(patched_site, fake_root):
    probe = runner.audit(make_context(patched_site, fake_root, env={"ENABLE_CK": "0", "ATOM_CK_FREE": "1"}))
    clean = {"Size": 1, "Config": {"Env": ["PATH=/usr/bin"]}}
    findings = (*probe["findings"], *audit_report.host_findings(clean, [{"CreatedBy": "RUN x", "Size": 1}], None, []))
    res = audit_report.AuditResult("img", "sha256:1", None, "gfx942", "--arch", findings, {}, 1, (), {}, {}, 0.1)
    assert res.exit_code == 0
