"""cleanbuild.images.warmcache: the report's Triton cache section, from the manifest the warm step writes into the
image, the line it prints into the build log, and validation's first-use-compile result."""

from __future__ import annotations

from cleanbuild.images import warmcache

MANIFEST = {"target": "hip:gfx950", "triton": "3.6.0", "models": ["deepseek-v3"], "tp": [8], "calls": 220,
            "kernels": 210, "cache": {"bytes": 17_301_504, "by_arch": {"gfx950": {"files": 210, "bytes": 16_000_000}}},
            "stubs": {"launchers": 0, "error": "", "not_made": "no HIP runtime in this image"},
            "plans": [{"not_planned": ["experts at tp=8: fp8-blockscale fused MoE"]}]}
VALIDATION = {"checks": [{"name": "first-use-compile", "status": "passed", "reason": "2 cases passed",
                          "metrics": {"triton_cache": {"compiled_at_first_use": [], "kernels": 210}}}]}


def test_the_run_facts_are_the_last_line_the_warm_step_printed(tmp_path):
    log = tmp_path / "candidate.log"
    log.write_text("#12 3.1 python -m validation.tritoncache warm: 210 kernels ...\n"
                   '#12 3.1 atom-build-warm-run: {"jobs": 2, "seconds": {"compile": 30.1, "total": 31.0}}\n#12 DONE 31.5s\n')
    assert warmcache.run_facts(log) == {"jobs": 2, "seconds": {"compile": 30.1, "total": 31.0}}
    assert warmcache.run_facts(tmp_path / "reused-no-log") is None


def test_the_section_says_kernels_bytes_arch_seconds_and_compiles_at_first_use():
    section = warmcache.section(MANIFEST, {"seconds": {"total": 31.0}, "jobs": 2}, VALIDATION)
    assert (section["kernels"], section["by_arch"], section["seconds"], section["first_use"]["compiles"]) == (
        210, {"gfx950": {"files": 210, "bytes": 16_000_000}}, {"total": 31.0}, [])
    lines = warmcache.markdown(section)
    assert lines[3] == ("- kernels compiled ahead: 210 for hip:gfx950 (Triton 3.6.0), from 220 calls of deepseek-v3 at "
                        "tp [8]")
    assert "- warm step: 31.0 s on 2 processes" in lines
    assert lines[-1] == "- compiles at first use: 0"


def test_an_image_without_a_cache_says_every_kernel_compiles_at_first_use():
    failed = {"checks": [{"name": "first-use-compile", "status": "failed", "metrics": {"triton_cache": {
        "compiled_at_first_use": ["_gemm_a8w8_blockscale_kernel (23RCSS6HMLL4)"], "kernels": 1}}}]}
    section = warmcache.section(None, None, failed)
    assert section["present"] is False
    assert warmcache.markdown(section)[-1] == "- compiles at first use: 1: _gemm_a8w8_blockscale_kernel (23RCSS6HMLL4)"
