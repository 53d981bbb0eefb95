"""Each probe on small hand-written image trees: a fake / (root) with a fake site-packages on sys.path."""

from __future__ import annotations

import csv
import json

import pytest
from audit_helpers import executable, install_files, make_context

from tests.support.gpucode import hip_fixture
from validation.aiterpkg.tuned_csv import UNTUNED_COLUMNS
from validation.core.models import M_BUCKETS, PRESETS, gemm_shapes
from validation.probes import (
    arch_env,
    coverage,
    gpu_payload,
    prebuilt,
    pyenv,
    runner,
    versions,
)
from validation.probes.image import OK, PRESENT, UNKNOWN, WARNING


def hip(name: str) -> bytes:
    """Real hipcc output (.ci/hip-fixture.sh): bundle.so holds gfx942 and gfx950 entries, gfx950.co one object."""
    return (hip_fixture() / name).read_bytes()


@pytest.fixture
def site(fake_root):
    path = fake_root / "usr" / "lib" / "python3" / "site-packages"
    path.mkdir(parents=True)
    return path


def aiter_pkg(site, extra: dict | None = None):
    files = {"aiter/__init__.py": "", "aiter/jit/__init__.py": "", **(extra or {})}
    install_files(site, "amd-aiter", "0.1.9", files)


# gpu-archs ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("env", "status"), [
    ({}, OK),
    ({"GPU_ARCHS": "gfx942", "PYTORCH_ROCM_ARCH": "gfx942"}, OK),
    ({"GPU_ARCHS": "native"}, OK),
    ({"GPU_ARCHS": "gfx942;gfx950"}, PRESENT),
    ({"PYTORCH_ROCM_ARCH": "gfx942 gfx950"}, PRESENT),
    ({"GPU_ARCHS": "gfx950"}, PRESENT),
])
def test_gpu_archs(site, fake_root, env, status):
    assert arch_env.gpu_archs(make_context(site, fake_root, env=env)).status == status


def test_gpu_archs_names_the_mismatch_first(site, fake_root):
    f = arch_env.gpu_archs(make_context(site, fake_root, env={"GPU_ARCHS": "gfx942", "PYTORCH_ROCM_ARCH": "gfx950"}))
    assert f.evidence == ["PYTORCH_ROCM_ARCH='gfx950' but the target is gfx942 (--arch)", "GPU_ARCHS='gfx942'"]


@pytest.mark.parametrize(("asked", "env", "recorded", "want"), [
    ("gfx950", {"GPU_ARCHS": "gfx942"}, None, ("gfx950", "--arch")),
    ("auto", {"GPU_ARCHS": "gfx942"}, None, ("gfx942", "GPU_ARCHS=gfx942")),
    ("auto", {"GPU_ARCHS": "gfx942;gfx950", "PYTORCH_ROCM_ARCH": "gfx950"}, None, ("gfx950", "PYTORCH_ROCM_ARCH=gfx950")),
    ("auto", {}, {"arch": "gfx950"}, ("gfx950", "/opt/atom-build/versions.json")),
])
def test_infer_arch(asked, env, recorded, want):
    assert arch_env.infer_arch(asked, env, recorded) == want


def test_infer_arch_from_a_list_alone_is_none():
    arch, why = arch_env.infer_arch("auto", {"GPU_ARCHS": "gfx942;gfx950"}, None)
    assert arch is None
    assert "names one arch" in why


def test_fp8_with_an_unknown_layout_is_unknown(site, fake_root):
    aiter_pkg(site, {"aiter/utility/dtypes.py": "fp8 = None\n"})
    f = arch_env.fp8_dtype(make_context(site, fake_root))
    assert (f.status, "layout changed" in f.evidence[0]) == (UNKNOWN, True)


def test_fp8_arch_missing_from_the_table_falls_back_to_uint8(site, fake_root):
    aiter_pkg(site, {"aiter/utility/dtypes.py": (
        "import torch\ndefaultDtypes = {'gfx942': {'fp8': torch.float8_e4m3fnuz}}\n"
        "def get_dtype_fp8():\n    return defaultDtypes.get(get_gfx(), {'fp8': torch.uint8})['fp8']\n")})
    f = arch_env.fp8_dtype(make_context(site, fake_root, arch="gfx950", env={"GPU_ARCHS": "gfx950"}))
    assert f.status == PRESENT
    assert f.evidence[0].startswith("dtypes.fp8 = uint8 (aiter's 8-bit fallback): get_gfx() takes GPU_ARCHS's last")


# locating packages without importing them ----------------------------------------------------------------

def test_locate_finds_a_package_without_importing_it(site, fake_root):
    aiter_pkg(site, {"aiter/__init__.py": "raise SystemExit('importing aiter ends the process')\n"})
    where = pyenv.locate(make_context(site, fake_root), "aiter")
    assert (where.path, where.dist.label) == (site / "aiter", "amd-aiter 0.1.9")


def test_locate_through_record_when_the_finder_cannot(site, fake_root, tmp_path):
    """A dist whose package lives outside sys.path's folders (e.g. a .pth-less develop layout) is found by RECORD."""
    ctx = make_context(site, fake_root)
    install_files(site, "atom", "0.2.0", {"atom/__init__.py": ""})
    elsewhere = tmp_path / "src"
    install_files(elsewhere, "amd-aiter", "0.1.9", {"aiter/__init__.py": ""})
    (site / "amd_aiter-0.1.9.dist-info").mkdir()
    for name in ("METADATA", "RECORD"):  # the dist-info in site-packages, the package itself not on sys.path
        (site / "amd_aiter-0.1.9.dist-info" / name).write_text(
            (elsewhere / "amd_aiter-0.1.9.dist-info" / name).read_text().replace("aiter/", "../../../src/aiter/"))
    assert pyenv.locate(ctx, "atom").how == "import path finder"
    assert pyenv.locate(ctx, "nothere") is None


# prebuilt kernels and CK ---------------------------------------------------------------------------------

def test_prebuilt_modules_for_the_arch_are_ok(site, fake_root):
    aiter_pkg(site, {"aiter/jit/module_gemm_a8w8.so": hip("bundle.so"), "aiter/jit/module_moe.so": hip("bundle-compressed.so")})
    f = prebuilt.prebuilt_kernels(make_context(site, fake_root))
    assert f.status == OK
    assert f.evidence[0].startswith("2 of 2 prebuilt modules carry gfx942 code objects, e.g. ")


def test_a_module_without_the_arch_would_jit_at_first_use(site, fake_root):
    aiter_pkg(site, {"aiter/jit/module_gemm.so": hip("bundle.so"), "aiter/jit/module_moe.so": hip("gfx950.co")})
    f = prebuilt.prebuilt_kernels(make_context(site, fake_root))
    assert (f.status, f.evidence[0]) == (PRESENT, "1 of 2 prebuilt modules carry gfx942 code objects; 1 would JIT at "
                                                  "first use: module_moe.so (they hold gfx942, gfx950)")


def test_a_module_that_only_names_the_arch_as_text_is_not_code(site, fake_root):
    """The old probe grepped for the string: a module whose bytes merely say gfx942 carries no gfx942 code."""
    aiter_pkg(site, {"aiter/jit/module_moe.so": hip("gfx950.co") + b"amdgcn-amd-amdhsa--gfx942"})
    f = prebuilt.prebuilt_kernels(make_context(site, fake_root))
    assert f.status == PRESENT


def test_payload_is_present_for_foreign_assembly_kernels_and_ok_without(site, fake_root):
    aiter_pkg(site, {"aiter_meta/hsa/gfx942/a.co": hip("gfx942.co"), "aiter_meta/hsa/gfx950/a.co": hip("gfx950.co")})
    f = gpu_payload.payload(make_context(site, fake_root))
    assert f.status == PRESENT
    assert f.evidence[0] == ("aiter assembly kernels: gfx942 1 files 0.0 MiB, and another arch's beside it where the "
                             "loader picks by arch: gfx950 1 files 0.0 MiB")
    (site / "aiter_meta/hsa/gfx950/a.co").unlink()
    assert gpu_payload.payload(make_context(site, fake_root)).status == OK


def test_no_modules_and_hipcc_means_jit_at_first_use(site, fake_root):
    aiter_pkg(site)
    executable(fake_root / "opt/rocm/bin/hipcc")
    f = prebuilt.prebuilt_kernels(make_context(site, fake_root, env={"PATH": "/usr/bin"}))
    assert f.status == PRESENT
    assert f.evidence[1].startswith("hipcc at /opt/rocm/bin/hipcc will build them")


def test_no_modules_with_rocm_and_no_hipcc_fails_at_first_use(site, fake_root):
    aiter_pkg(site)
    (fake_root / "opt/rocm/.info").mkdir(parents=True)
    (fake_root / "opt/rocm/.info/version").write_text("7.2.0\n")
    f = prebuilt.prebuilt_kernels(make_context(site, fake_root))
    assert (f.status, f.evidence[-1]) == (PRESENT, "and no hipcc in the image to build them: the first aiter C++ op fails")


def test_modules_promised_by_the_manifest_but_missing(site, fake_root):
    aiter_pkg(site)
    (fake_root / "opt/atom-build").mkdir(parents=True)
    (fake_root / "opt/atom-build/manifest.json").write_text(json.dumps({"prebuild_kernels": True}))
    assert prebuilt.prebuilt_kernels(make_context(site, fake_root)).status == PRESENT


def test_ck_module_names_follow_aiters_own_rules(tmp_path):
    jit = tmp_path / "aiter" / "jit"
    jit.mkdir(parents=True)
    (jit / "optCompilerConfig.json").write_text(json.dumps({
        "module_gemm_a8w8": {"srcs": ["f'{CK_DIR}/x.cu'"]},
        "module_fmha_v3_fwd": {"srcs": ["f'{CK_DIR}/y.cu'"], "flags_extra_cc": ["'-DONLY_FAV3=1'"]},
        "module_aiter_core": {"srcs": ["core.cu"]},
    }))
    (jit / "core.py").write_text("def _get_ck_exclude_modules():\n    s = set()\n    s |= {'module_cache'}\n    return s\n")
    assert prebuilt.ck_module_names(tmp_path / "aiter") == {"module_gemm_a8w8", "module_cache"}


def test_full_ck_image_without_ck_is_present(site, fake_root):
    aiter_pkg(site)
    f = prebuilt.ck_free(make_context(site, fake_root))
    assert f.status == PRESENT
    assert "aiter has no CK kernels or sources" in f.evidence[0]


def test_full_ck_image_with_ck_sources_is_ok(site, fake_root):
    aiter_pkg(site)
    (site / "aiter_meta/3rdparty/composable_kernel/include").mkdir(parents=True)
    f = prebuilt.ck_free(make_context(site, fake_root))
    assert f.status == OK
    assert "aiter_meta/3rdparty/composable_kernel" in f.evidence[1]


def test_ck_free_aiter_without_atom_ck_free_is_present(site, fake_root):
    aiter_pkg(site)
    f = prebuilt.ck_free(make_context(site, fake_root, env={"ENABLE_CK": "0"}))
    assert f.status == PRESENT
    assert f.evidence[0].startswith("aiter is CK-free but ATOM_CK_FREE is not 1")


def test_contradictory_ck_mode_is_present(site, fake_root):
    aiter_pkg(site)
    f = prebuilt.ck_free(make_context(site, fake_root, env={"ATOM_BUILD_CK_MODE": "ck", "ATOM_CK_FREE": "1"}))
    assert (f.status, f.evidence[0]) == (PRESENT, "contradictory CK settings: ATOM_BUILD_CK_MODE=ck contradicts ATOM_CK_FREE=1")


def test_egg_info_sources_are_not_installed_files(site, fake_root):
    """Two develop-mode egg-infos listing the same SOURCES.txt names own nothing in site-packages."""
    for name in ("a", "b"):
        egg = site / f"{name}.egg-info"
        egg.mkdir()
        (egg / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (egg / "SOURCES.txt").write_text("setup.py\nREADME.md\n")
    assert all(d.files is None for d in pyenv.distributions(make_context(site, fake_root)))


def test_ck_free_without_atom_is_unknown(site, fake_root):
    aiter_pkg(site)
    f = prebuilt.ck_free(make_context(site, fake_root, env={"ENABLE_CK": "0", "ATOM_CK_FREE": "1"}))
    assert f.status == UNKNOWN
    assert "atom not found" in f.evidence[-1]


def test_toolchain_lists_compilers_and_git(fake_root):
    executable(fake_root / "usr/bin/gcc")
    executable(fake_root / "usr/bin/git")
    f = prebuilt.toolchain(make_context(None, fake_root, env={"PATH": "/usr/local/bin:/usr/bin"}))
    assert (f.status, f.evidence) == (OK, ["compilers: /usr/bin/gcc", "git: /usr/bin/git"])


# tuned-CSV coverage ----------------------------------------------------------------------------------------

def full_csv(path, gfx: str, cu: int, shapes) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["gfx", "cu_num", "M", "N", "K", "bias", "dtype", "outdtype", "scaleAB", "libtype", "solidx"])
        for s in shapes:
            for m in M_BUCKETS:
                w.writerow([gfx, cu, m, s.N, s.K, False, "torch.bfloat16", "torch.bfloat16", False, "hipblaslt", 1])


def test_coverage_of_a_fully_tuned_model_is_ok(site, fake_root):
    aiter_pkg(site)
    (site / "aiter/configs").mkdir()
    full_csv(site / "aiter/configs/bf16_tuned_gemm.csv", "gfx942", 304, gemm_shapes(PRESETS["llama3-8b"], 8))
    f = coverage.tuned_csv_coverage(make_context(site, fake_root, model="llama3-8b", tp=(8,)))
    assert f.status == OK
    assert f.evidence[0] == "llama3-8b tp8: 70/70 shapes tuned for cu_num 304"


def test_coverage_gaps_are_listed_and_written(real_site, fake_root, tmp_path):
    out = tmp_path / "untuned.csv"
    ctx = make_context(real_site, fake_root, arch="gfx950", model="llama3-8b", tp=(1, 8), untuned_csv=out)
    f = coverage.tuned_csv_coverage(ctx)
    assert f.status == WARNING  # 23/70 and 14/70: below the 90% threshold; a warning, not a pitfall (exit 0)
    # aiter 79366eb8's CSVs (bf16_tuned_gemm.csv and model_configs/*) tune some of Llama-3-8B's shapes on gfx950.
    assert f.evidence[0].startswith("llama3-8b tp1: 23/70 shapes tuned for cu_num 256; missing mlp.down M=1 N=4096 K=14336;")
    assert f.evidence[1].startswith("llama3-8b tp8: 14/70 shapes tuned for cu_num 256; missing qkv_proj M=1 N=768 K=4096;")
    assert f.evidence[2] == f"untuned CSV with 103 shapes written to {out}"
    with out.open() as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == UNTUNED_COLUMNS
    assert rows[1] == ["1", "768", "4096", "False", "torch.bfloat16", "torch.bfloat16", "False"]
    assert len(rows) - 1 == 47 + 56


def test_coverage_below_the_threshold_is_a_warning(site, fake_root):
    aiter_pkg(site)
    (site / "aiter/configs").mkdir()
    shapes = gemm_shapes(PRESETS["llama3-8b"], 8)
    full_csv(site / "aiter/configs/bf16_tuned_gemm.csv", "gfx942", 304, [s for s in shapes if s.layer != "lm_head"])
    f = coverage.tuned_csv_coverage(make_context(site, fake_root, model="llama3-8b", tp=(8,)))
    assert f.evidence[0].startswith("llama3-8b tp8: 56/70 shapes tuned")  # 80%: below 90%
    assert f.status == WARNING


def test_coverage_honours_cu_num_and_the_env_csv(site, fake_root, tmp_path):
    aiter_pkg(site)
    tuned = fake_root / "cfg" / "mine.csv"
    tuned.parent.mkdir()
    full_csv(tuned, "gfx942", 80, gemm_shapes(PRESETS["llama3-8b"], 1))
    env = {"AITER_CONFIG_GEMM_BF16": "/cfg/mine.csv", "CU_NUM": "80"}
    f = coverage.tuned_csv_coverage(make_context(site, fake_root, env=env, model="llama3-8b", tp=(1,)))
    assert (f.status, f.evidence[-1]) == (OK, "CSVs (AITER_CONFIG_GEMM_BF16): /cfg/mine.csv")


def test_coverage_without_arch_is_unknown(real_site, fake_root):
    f = coverage.tuned_csv_coverage(make_context(real_site, fake_root, arch=None, model="llama3-8b"))
    assert f.status == UNKNOWN


def test_coverage_is_skipped_without_a_model(real_site, fake_root):
    assert coverage.tuned_csv_coverage(make_context(real_site, fake_root)) is None


# versions and the run ------------------------------------------------------------------------------------

def test_versions_from_metadata_and_rocm(site, fake_root):
    aiter_pkg(site)
    install_files(site, "torch", "2.9.0+rocm7.2", {"torch/__init__.py": "", "torch/version.py":
                  "__version__ = '2.9.0+rocm7.2'\nhip = '7.2.26015'\ncuda = None\n"})
    install_files(site, "pytorch-triton-rocm", "3.5.0", {"triton/__init__.py": ""})
    (fake_root / "opt/rocm/.info").mkdir(parents=True)
    (fake_root / "opt/rocm/.info/version").write_text("7.2.0-43\n")
    v = versions.versions(make_context(site, fake_root))
    assert {k: v[k] for k in ("torch", "triton", "aiter", "atom", "torch_hip", "rocm")} == {
        "torch": "2.9.0+rocm7.2", "triton": "3.5.0", "aiter": "0.1.9", "atom": None, "torch_hip": "7.2.26015",
        "rocm": "7.2.0-43"}


def test_versions_json_wins(fake_root):
    (fake_root / "opt/atom-build").mkdir(parents=True)
    (fake_root / "opt/atom-build/versions.json").write_text(json.dumps({"aiter": "0.1.8", "arch": "gfx942"}))
    v = versions.versions(make_context(None, fake_root))
    assert v == {"source": "/opt/atom-build/versions.json", "aiter": "0.1.8", "arch": "gfx942"}


def test_a_probe_that_breaks_is_unknown_and_the_rest_still_run(site, fake_root):
    def broken(ctx):
        raise KeyError("layout")

    f = runner.run_probe(broken, make_context(site, fake_root))
    assert (f.id, f.status, f.evidence) == ("broken", UNKNOWN, ["probe failed: KeyError: 'layout'"])


# the probe's command line ------------------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "message"), [
    (["--arch", "gfx90a"], "argument --arch: invalid choice: 'gfx90a'"),
    (["--arch", "gfx942", "--tp", "0"], "--tp must be >= 1, got [0]"),
    (["--json-file", "x.json"], "the following arguments are required: --arch"),
    (["--arch", "gfx942", "--json-file", "/proc/nope/audit.json"],
     "--json-file /proc/nope/audit.json: cannot write there (a new file in /proc was refused: No such file or directory)"),
    (["--arch", "gfx942", "--untuned-csv", "/"], "--untuned-csv /: is a folder, not a file"),
])
def test_cli_usage_errors_are_one_line_exit_2(capsys, argv, message):
    from validation.audit import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m validation.audit: error: ")
    assert message in err
    assert err.count("\n") == 1
