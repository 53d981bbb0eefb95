"""validation.warmcache and its program, validation.tritoncache: which calls an image makes (its plan, from ATOM's
and aiter's own code), a real compile into a Triton cache for a HIP target on this CPU-only machine, the check that
finds every kernel there (or names the ones it lacks), and the program's bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.gpucode import MIRROR
from tests.support.upstream import ATOM_PIN
from validation import tritoncache
from validation.core import models
from validation.warmcache import manifest, plan
from validation.warmcache.plan import TritonCall

ROOT = Path(__file__).resolve().parents[3]


def atom_config(dest: Path) -> Path:
    """atom/config.py at the pin, as the image's ATOM package holds it (dest/atom/config.py)."""
    git_dir = Path(os.environ.get("ATOM_BUILD_MIRROR") or MIRROR) / "atom.git"
    text = subprocess.run(["git", "-c", "safe.directory=*", f"--git-dir={git_dir}", "show",  # noqa: S603,S607
                           f"{ATOM_PIN}:atom/config.py"], capture_output=True, text=True, check=True).stdout
    (dest / "atom").mkdir(parents=True, exist_ok=True)
    (dest / "atom" / "config.py").write_text(text)
    return dest / "atom"


# ---- the plan -------------------------------------------------------------------------------------------------

def test_atoms_cuda_graph_sizes_are_read_from_its_own_config(tmp_path):
    sizes, where = plan.graph_batch_sizes(atom_config(tmp_path))
    assert sizes == [1, 2, 4, 8, *range(16, 513, 16)]
    assert where.startswith("ATOM's CUDA-graph sizes (")


def test_an_atom_whose_expansion_moved_is_an_error_naming_it(tmp_path):
    (tmp_path / "config.py").write_text(textwrap.dedent("""
        class CompilationConfig:
            def __post_init__(self):
                self.cuda_graph_sizes = [512]
        class Config:
            def _set_cudagraph_sizes(self):
                self.graph_bs = list(range(1, 9))
        """))
    with pytest.raises(ValueError, match="_set_cudagraph_sizes no longer expands a size"):
        plan.graph_batch_sizes(tmp_path)


def test_m_values_cover_each_side_of_every_bound_and_the_graph_sizes(tmp_path):
    values, _ = plan.m_values(atom_config(tmp_path), (4, 8, 16))
    assert {1, 4, 5, 8, 9, 16, 17, 32, 33, 512} <= set(values) and values == sorted(set(values))


@pytest.mark.parametrize(("cfg", "want"), [({}, plan.BF16), ({"quantization_config": {"quant_method": "fp8"}}, plan.FP8),
                                           (models.PRESETS["deepseek-v3"], plan.FP8_BLOCK),
                                           ({"quantization_config": {"quant_method": "awq"}}, plan.BF16)])
def test_the_models_dtype_comes_from_its_quantization_config(cfg, want):
    assert plan.quantization(cfg) == want


def routes(model: str, ck_mode: str, libtype: str = "hipblaslt") -> plan.Plan:
    return plan.make(model, "gfx950", ck_mode, [8], [1, 16], "test", lambda M, N, K: libtype)


def test_a_ck_free_image_routes_fp8_layers_to_aiters_triton_gemm_and_bf16_ones_to_the_tuned_dispatch():
    made = routes("deepseek-v3", "ckfree")
    layers = {c.layer for c in made.calls}
    assert {c.entry for c in made.calls} == {"gemm_a8w8_blockscale"}
    assert not layers & set(plan.BF16_LAYERS)  # lm_head and the router went to tgemm: hipblaslt here
    assert made.dispatch == {"hipblaslt": 4}  # lm_head and router at M 1 and 16
    assert made.not_planned == ["experts at tp=8: fp8-blockscale fused MoE (aiter's Triton fused_moe with fp8 weights "
                                "is not planned)", *plan.atom_own_kernels(models.PRESETS["deepseek-v3"], 8)]


@pytest.mark.parametrize(("cfg", "tp", "want"), [
    (models.PRESETS["qwen3-30b-a3b"], 1, []),
    (models.PRESETS["qwen3-30b-a3b"], 8, ["masked_embedding"]),
    (models.PRESETS["deepseek-v3"], 1, ["MLA"]),
    ({**models.PRESETS["llama3-8b"], "head_dim": 64}, 1, ["head_dim 64"]),
    ({**models.PRESETS["llama3-8b"], "sliding_window": 4096}, 2, ["masked_embedding", "sliding_window 4096"]),
    ({**models.PRESETS["llama3-8b"], "sliding_window": 4096, "use_sliding_window": False}, 1, []),
])
def test_atoms_own_triton_kernels_are_said_not_planned(cfg, tp, want):
    """A CK image's 0 kernels must not read as "nothing compiles at first request": ATOM's own kernels are named."""
    said = plan.atom_own_kernels(cfg, tp)
    assert len(said) == len(want) and all(w in line for w, line in zip(want, said, strict=True))


def test_with_ck_nothing_is_triton_unless_the_tuned_dispatch_says_triton():
    assert routes("deepseek-v3", "ck").calls == []
    triton = routes("deepseek-v3", "ck", "triton")
    assert {(c.entry, c.layer) for c in triton.calls} == {("gemm_a16w16", "lm_head"), ("gemm_a16w16", "router")}


def test_bf16_experts_of_a_ck_free_image_are_aiters_fused_moe_at_every_m_and_a_prefill():
    made = routes("qwen3-30b-a3b", "ckfree")
    moe = sorted(c for c in made.calls if c.entry == "fused_moe")
    assert [c.M for c in moe] == [1, 16, plan.MOE_PREFILL]
    assert (moe[0].N, moe[0].K, moe[0].experts, moe[0].top_k) == (2 * 768 // 8, 2048, 128, 8)


# ---- a real compile for gfx950 on this machine, and the check --------------------------------------------------

SCRIPT = """
import json, sys
from pathlib import Path
from validation.warmcache import hooks, replay
from validation.warmcache.plan import TritonCall
cache, mode, arch = sys.argv[1], sys.argv[2], sys.argv[3]
import os; os.environ["TRITON_CACHE_DIR"] = cache
target = hooks.Target.parse(f"hip:{arch}")
N, K = int(sys.argv[5]), int(sys.argv[6])
calls = [TritonCall("gemm_a8w8_blockscale", "t", m, N, K, 1) for m in (1, 16, 17)]
guard = hooks.reading_only() if mode == "check" else hooks.compile_only()
from validation.warmcache import reuse
machine = Path(sys.argv[7]) if len(sys.argv) > 7 else None
with hooks.stand_in(target), guard, reuse.behind(machine):
    replay.open_aiter(Path(sys.argv[4]), arch)
    done = replay.replay(calls, arch, target)
print(json.dumps({"events": [[e.kernel, e.cache_hit] for e in done.events], "missed": done.missed,
                  "failures": done.failures}))
sys.stdout.flush()
os._exit(0)
"""


def replayed(cache: Path, mode: str, arch: str, aiter: Path, shape: tuple[int, int] = (2112, 7168),
             machine: Path | None = None) -> dict:
    """The script in a process of its own; shape: (N, K), by default DeepSeek-V3's fused_qkv_a_proj; machine: the
    build machine's cache behind this one (validation.warmcache.reuse)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    argv = [str(cache), mode, arch, str(aiter), *map(str, shape), *([str(machine)] if machine else [])]
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *argv],  # noqa: S603
                          capture_output=True, text=True, env=env, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def warmed(tmp_path_factory, pin_patched) -> Path:
    """aiter's gemm_a8w8_blockscale (and its split-K reduce) compiled for gfx950 into a cache, once."""
    cache = tmp_path_factory.mktemp("triton") / "cache"
    first = replayed(cache, "warm", "gfx950", pin_patched)
    assert first["failures"] == [] and first["events"] and not any(hit for _, hit in first["events"])
    return cache


def test_a_second_process_finds_every_kernel_in_the_cache(warmed, pin_patched):
    second = replayed(warmed, "check", "gfx950", pin_patched)
    assert (second["missed"], second["failures"]) == ({}, [])
    assert second["events"] and all(hit for _, hit in second["events"])


def files(cache: Path) -> dict[str, bytes]:
    return {str(p.relative_to(cache)): p.read_bytes() for p in sorted(cache.rglob("*")) if p.is_file()}


def test_a_kernel_in_the_machines_cache_is_copied_byte_for_byte_not_compiled(tmp_path, pin_patched):
    """The warm step's --reuse: a first build compiles into its image's cache and the machine's; a second build's
    fresh image cache gets every kernel from the machine's (all cache hits), the same files with the same bytes but
    for group files naming the image's own copies; and a reading-only check finds them all there."""
    machine = tmp_path / "machine"
    first = replayed(tmp_path / "one", "warm", "gfx950", pin_patched, machine=machine)
    assert first["events"] and not any(hit for _, hit in first["events"]) and first["failures"] == []
    second = replayed(tmp_path / "two", "warm", "gfx950", pin_patched, machine=machine)
    assert second["events"] and all(hit for _, hit in second["events"]) and second["failures"] == []
    one, two = files(tmp_path / "one"), files(tmp_path / "two")
    assert sorted(one) == sorted(two)
    groups = [name for name in one if Path(name).name.startswith("__grp__")]
    assert groups and all(one[n] == two[n] for n in one if n not in groups)
    for name in groups:  # the same children, each named at its own cache's path
        children = json.loads(two[name])["child_paths"]
        assert json.loads(one[name])["child_paths"] == {c: p.replace(str(tmp_path / "two"), str(tmp_path / "one"))
                                                       for c, p in children.items()}
        assert all(p.startswith(str(tmp_path / "two") + "/") for p in children.values())
    check = replayed(tmp_path / "two", "check", "gfx950", pin_patched)
    assert (check["missed"], check["failures"]) == ({}, []) and all(hit for _, hit in check["events"])


def test_a_launcher_in_the_machines_cache_needs_no_compiler(tmp_path, monkeypatch):
    """Triton's C modules go through the same cache manager: taken from the machine's cache with compiles refused."""
    from triton.runtime.build import compile_module_from_src

    from validation.warmcache import hooks, reuse

    source = ("#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"atom_build_reuse_probe\"};\n"
              "PyMODINIT_FUNC PyInit_atom_build_reuse_probe(void) { return PyModule_Create(&m); }\n")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "one"))
    with reuse.behind(tmp_path / "machine"):
        compile_module_from_src(source, "atom_build_reuse_probe")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "two"))
    with reuse.behind(tmp_path / "machine"), hooks.no_compiler():
        compile_module_from_src(source, "atom_build_reuse_probe")
    assert [p.name for p in (tmp_path / "two").rglob("atom_build_reuse_probe*")] == \
        [p.name for p in (tmp_path / "one").rglob("atom_build_reuse_probe*")]


@pytest.mark.parametrize(("binary_only", "folder"), [(True, "binary-only"), (False, "every-stage")])
def test_the_files_a_kernel_keeps_choose_the_machines_folder(tmp_path, monkeypatch, binary_only, folder):
    """TRITON_STORE_BINARY_ONLY changes the files of a kernel but not its key: a build that keeps only code objects
    never copies another's IR files into its image."""
    import triton

    from validation.warmcache import reuse

    monkeypatch.setattr(triton.knobs.compilation, "store_binary_only", binary_only)
    with reuse.behind(tmp_path):
        assert reuse.Layered.machine == str(tmp_path / folder)
        assert triton.knobs.cache.manager_class is reuse.Layered
    assert triton.knobs.cache.manager_class is not reuse.Layered


def test_reuse_that_cannot_be_written_is_one_line(capsys, tmp_path):
    (tmp_path / "file").write_text("")
    code = tritoncache.main(["warm", "--arch", "gfx950", "--ck-mode", "ckfree", "--model", "qwen3-30b-a3b",
                             "--cache", str(tmp_path / "c"), "--reuse", str(tmp_path / "file" / "k")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"python -m validation.tritoncache: error: --reuse {tmp_path / 'file' / 'k'} cannot be "
                                 "written (Not a directory); the warm step takes kernels from it and adds what it "
                                 "compiles: point it at a writable folder"]


def test_a_cache_for_the_other_arch_is_as_good_as_none_and_the_misses_are_named(warmed, pin_patched):
    other = replayed(warmed, "check", "gfx942", pin_patched)
    assert set(other["missed"].values()) == {"_gemm_a8w8_blockscale_kernel"} and other["events"] == []


def test_a_kernel_that_does_not_compile_for_the_arch_is_named_with_its_call(tmp_path, pin_patched):
    """Found by the warm step at the pin: aiter's block-scale GEMM does not compile for gfx950 at M=1 with PyPI's
    Triton 3.6.0 (DeepSeek-V3's dense MLP down projection at tp 8: Triton specialises M=1, and its
    TritonAMDGPUCanonicalizePointers pass fails on aiter's M_LEQ_4 config). A decode at batch 1 would fail at its first
    request, so the build stops naming the call; M=16 and M=17 compile."""
    done = replayed(tmp_path / "cache", "warm", "gfx950", pin_patched, (7168, 2304))
    assert done["failures"] == ["gemm_a8w8_blockscale t tp1 M=1 N=7168 K=2304: RuntimeError: PassManager::run failed"]
    assert [hit for _, hit in done["events"]] == [False, False]


def test_the_code_objects_arch_is_read_from_their_bytes(warmed):
    held = manifest.read_cache(warmed)
    assert list(held["by_arch"]) == ["gfx950"]
    assert {k["name"] for k in held["kernels"]} == {"_gemm_a8w8_blockscale_kernel", "_gemm_splitk_reduce_kernel"}


def test_a_cubins_arch_comes_from_its_metadata(tmp_path):
    key = tmp_path / "KEY"
    key.mkdir()
    (key / "k.cubin").write_bytes(b"\x7fELF" + b"\0" * 60)
    (key / "k.json").write_text(json.dumps({"target": {"backend": "cuda", "arch": 90, "warp_size": 32}}))
    assert manifest.read_cache(tmp_path)["by_arch"] == {"sm_90": {"files": 1, "bytes": 64}}


def test_the_cache_is_open_to_every_user(warmed, tmp_path):
    import shutil
    import stat

    copy = tmp_path / "cache"
    shutil.copytree(warmed, copy)
    manifest.open_to_all(copy)
    assert stat.S_IMODE(copy.stat().st_mode) == 0o1777
    assert {stat.S_IMODE(p.stat().st_mode) for p in copy.rglob("*") if p.is_file()} == {0o644}


# ---- the program: bad input in one line ------------------------------------------------------------------------

def one_line(capsys, *argv: str) -> tuple[int, str]:
    code = tritoncache.main(list(argv))
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return code, err.strip()


def test_warm_without_a_model_names_the_flag(capsys, tmp_path):
    code, err = one_line(capsys, "warm", "--arch", "gfx950", "--ck-mode", "ckfree", "--cache", str(tmp_path))
    assert (code, err) == (2, "python -m validation.tritoncache: error: no model to warm for: give --model "
                              "PRESET|CONFIG.json")


def test_a_cache_that_cannot_be_written_is_one_line(capsys, tmp_path):
    (tmp_path / "file").write_text("")
    code, err = one_line(capsys, "warm", "--arch", "gfx950", "--ck-mode", "ckfree", "--model", "llama3-8b",
                         "--cache", str(tmp_path / "file" / "cache"))
    assert code == 2 and err.startswith(f"python -m validation.tritoncache: error: --cache {tmp_path}/file/cache "
                                        "cannot be written (Not a directory)")


def test_a_model_config_aiter_cannot_read_is_one_line(capsys, tmp_path):
    (tmp_path / "config.json").write_text("[1]")
    code, err = one_line(capsys, "warm", "--arch", "gfx950", "--ck-mode", "ckfree", "--model",
                         str(tmp_path / "config.json"), "--cache", str(tmp_path / "c"))
    assert code == 2 and "a Hugging Face config.json is a JSON object, this one is a JSON array" in err


def test_an_unknown_arch_is_one_line(capsys):
    code, err = one_line(capsys, "check", "--arch", "gfx90a", "--ck-mode", "ck")
    assert code == 2 and "invalid choice: 'gfx90a'" in err


def test_the_host_reads_the_line_the_warm_step_prints():
    from cleanbuild.images import warmcache

    assert warmcache.RUN_LINE == tritoncache.RUN_LINE


def test_a_check_against_a_manifest_of_another_triton_says_so():
    from validation.warmcache import cache

    warmed = {"arch": "gfx950", "target": "hip:gfx950", "triton": "3.5.1", "triton_build": "aa", "env": {}}
    result = {"arch": "gfx950", "target": "hip:gfx950", "triton": "3.6.0", "triton_build": "aa", "env": {}}
    assert cache.mismatch(warmed, result) == ["the cache was warmed for triton '3.5.1', this run is '3.6.0'"]
    rebuilt = {**result, "triton": "3.5.1", "triton_build": "bb"}  # the same version, other files
    assert cache.mismatch(warmed, rebuilt) == ["the cache was warmed for triton_build 'aa', this run is 'bb'"]
    assert cache.mismatch(None, result) == ["this image has no Triton cache manifest (built without the warm step)"]


def test_a_check_whose_launcher_key_differs_says_why():
    """Triton keys its launchers by the platform, linkage included, which Python learns from `file`."""
    from validation.warmcache import cache

    warmed = {"arch": "gfx950", "target": "hip:gfx950", "triton": "3.6.0", "triton_build": "aa", "env": {},
              "launcher_key": "x86_64,Linux,64bit,ELF"}
    result = {**warmed, "launcher_key": "x86_64,Linux,64bit,"}
    [why] = cache.mismatch(warmed, result)
    assert why.startswith("the cache was warmed for launcher_key 'x86_64,Linux,64bit,ELF', this run is "
                          "'x86_64,Linux,64bit,'") and "`file`" in why
    older = {k: v for k, v in warmed.items() if k != "launcher_key"}  # a manifest from before the key was kept
    assert cache.mismatch(older, result) == []


def test_the_launcher_key_is_the_one_triton_computes_and_follows_file_on_path(tmp_path):
    """Measured, not assumed: the same Python with `file` on PATH and without it gets two keys, and
    launcher_key() is Triton's own."""
    import shutil

    from triton.runtime.build import platform_key

    from validation.warmcache import cache

    assert cache.launcher_key() == platform_key()
    if shutil.which("file") is None:
        pytest.skip("`file` is not on this machine's PATH")
    code = "from validation.warmcache.cache import launcher_key; print(launcher_key())"
    keys = [subprocess.run([sys.executable, "-c", code], env={"PATH": path, "PYTHONPATH": str(ROOT)},
                           capture_output=True, text=True, check=True).stdout.strip()
            for path in (str(Path(shutil.which("file")).parent), str(tmp_path))]
    assert keys[0].endswith(",ELF") and keys[1] != keys[0]


def test_a_model_whose_shapes_do_not_split_is_one_line(capsys, tmp_path):
    """A config aiter's dispatch cannot plan for (heads not divisible by the tensor-parallel size)."""
    cfg = {**models.PRESETS["llama3-8b"], "num_attention_heads": 30}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code = tritoncache.main(["warm", "--arch", "gfx950", "--ck-mode", "ckfree", "--model", str(tmp_path / "config.json"),
                             "--tp", "8", "--cache", str(tmp_path / "c"), "--aiter-src", str(ROOT / "no-such-aiter")])
    err = capsys.readouterr().err
    assert (code, err) == (2, f"python -m validation.tritoncache: error: --model {tmp_path / 'config.json'}: its shapes "
                              "cannot be planned at tp [8] (heads=30 is not divisible by tp=8)\n")


def test_a_size_the_model_does_not_split_at_is_left_out_and_said():
    made = plan.make("llama3-8b", "gfx950", "ckfree", [1, 3], [1], "test", lambda M, N, K: "hipblaslt")
    assert made.not_planned == ["tp=3: heads=32 is not divisible by tp=3"]  # tp=1: no ATOM kernel of its own
    assert made.dispatch == {"hipblaslt": 5}  # tp=1's five layers (lm_head, qkv, o, gate_up, down) at M=1


def test_calls_are_ordered_and_hashable():
    assert sorted({TritonCall("gemm_a8w8", "o", 1, 8, 8, 1), TritonCall("gemm_a8w8", "o", 1, 8, 8, 1)}) == [
        TritonCall("gemm_a8w8", "o", 1, 8, 8, 1)]


def test_first_use_compile_skips_saying_so_where_the_build_turned_the_warm_step_off(cpu_ctx, monkeypatch):
    from validation.checks import first_use_compile

    monkeypatch.setenv("ATOM_BUILD_WARM", "off")
    result = first_use_compile.run(cpu_ctx("gfx950", ck_mode="ckfree"))
    assert (result.status, result.cases[0].note) == ("skipped", "the build turned the warm step off (profile "
                                                     "warm.enabled = false): every Triton kernel the image runs "
                                                     "compiles at its first call")


def test_first_use_compile_names_an_unknown_ck_mode(cpu_ctx):
    from validation.checks import first_use_compile

    result = first_use_compile.run(cpu_ctx("gfx950"))
    assert result.status == "skipped" and "ATOM_BUILD_CK_MODE unset" in result.cases[0].note


def test_with_no_compiler_a_c_module_missing_from_the_cache_fails_naming_itself(tmp_path, monkeypatch):
    """What a runtime image with no C compiler does with a launcher stub the cache lacks (hooks.no_compiler)."""
    from triton.runtime.build import compile_module_from_src

    from validation.warmcache import hooks

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    with hooks.no_compiler(), pytest.raises(RuntimeError, match="wanted to compile its C module atom_build_probe"):
        compile_module_from_src("int atom_build_probe;\n", "atom_build_probe")
