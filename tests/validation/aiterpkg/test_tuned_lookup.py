"""aiter's tuned-GEMM lookup EXECUTED from the real aiter source, unpatched and patched (validation.aiterpkg.tuned_lookup),
and the two checks that use it where aiter cannot run: gemm-hipblaslt's dispatch cases and gemm-asm.

The trees: aiter at the pin (79366eb8) as upstream has it, the same after `python -m patches apply`, and aiter
main at e4048607 patched (its gfx1250 Triton branch is not ours to check).
"""

from __future__ import annotations

import inspect
import json
import sys
import textwrap

import pytest

from tests.support.upstream import AITER_HEAD
from validation import cli
from validation.aiterpkg import tuned_lookup
from validation.aiterpkg.tuned_csv import index, tuned_paths
from validation.checks import gemm_asm, gemm_hipblaslt

UNTUNED = (4099, 4097, 4096)
PRESHUFFLED = (4099, 4096, 4096)  # N, K multiples of 64: the shape aiter's bpreshuffle asm default takes
CU = {"gfx942": 304, "gfx950": 256}


@pytest.fixture(scope="module")
def head_patched(aiter_at, patched_copy):
    checkout = aiter_at(AITER_HEAD, ("/aiter/tuned_gemm.py", "/aiter/jit/core.py", "/aiter/configs/"))
    return patched_copy(checkout / "aiter")


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch):
    monkeypatch.delenv("AITER_CONFIG_GEMM_BF16", raising=False)


def _libtype(pkg, arch, shape, bpreshuffle=False):
    with tuned_lookup.load(pkg, arch, CU[arch]) as lookup:
        return lookup.config(*shape, bpreshuffle=bpreshuffle)["libtype"]


def _asm_rows(pkg, arch, cu):
    paths, _ = tuned_paths(None, pkg)
    return paths, [k for k, row in index(paths, arch, cu).items() if row["libtype"] == "asm"]


# --- the lookup, executed from the real source --------------------------------------------------


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_unpatched_pin_gives_untuned_shapes_torch(aiter_pkg, arch):
    assert _libtype(aiter_pkg, arch, UNTUNED) == "torch"


@pytest.mark.parametrize(("arch", "lib"), [("gfx942", "hipblaslt"), ("gfx950", "asm")])
def test_unpatched_pin_preshuffled_default_is_asm_on_gfx950_only(aiter_pkg, arch, lib):
    assert _libtype(aiter_pkg, arch, PRESHUFFLED, bpreshuffle=True) == lib


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize(("shape", "bpreshuffle"), [(UNTUNED, False), (PRESHUFFLED, True)])
def test_patched_pin_gives_hipblaslt(pin_patched, arch, shape, bpreshuffle):
    assert _libtype(pin_patched, arch, shape, bpreshuffle) == "hipblaslt"


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize(("shape", "bpreshuffle"), [(UNTUNED, False), (PRESHUFFLED, True)])
def test_patched_head_gives_hipblaslt(head_patched, arch, shape, bpreshuffle):
    assert _libtype(head_patched, arch, shape, bpreshuffle) == "hipblaslt"


def test_every_gfx950_asm_row_is_asm_unpatched(aiter_pkg):
    paths, rows = _asm_rows(aiter_pkg, "gfx950", 256)
    assert len(rows) == 508
    with tuned_lookup.load(aiter_pkg, "gfx950", 256, paths) as lookup:
        got = {lookup.config(k.M, k.N, k.K, bias=k.bias, dtype=k.dtype, otype=k.outdtype)["libtype"] for k in rows}
    assert got == {"asm"}


def test_every_gfx950_asm_row_becomes_hipblaslt_patched(pin_patched):
    paths, rows = _asm_rows(pin_patched, "gfx950", 256)
    with tuned_lookup.load(pin_patched, "gfx950", 256, paths) as lookup:
        configs = [lookup.config(k.M, k.N, k.K, bias=k.bias, dtype=k.dtype, otype=k.outdtype) for k in rows]
        warnings = lookup.log.warnings()
    assert {(c["libtype"], c["solidx"]) for c in configs} == {("hipblaslt", -1)}
    assert all("us" in c for c in configs)  # the tuned row, turned: not the untuned default
    assert len(warnings) == 1 and "ASM GEMM is disabled on gfx950" in warnings[0]


def test_gfx942_asm_rows_stay_asm_patched(pin_patched):
    paths, rows = _asm_rows(pin_patched, "gfx942", 80)
    assert len(rows) == 14
    with tuned_lookup.load(pin_patched, "gfx942", 80, paths) as lookup:
        got = {lookup.config(k.M, k.N, k.K, bias=k.bias, dtype=k.dtype, otype=k.outdtype)["libtype"] for k in rows}
    assert got == {"asm"}


def test_lookup_leaves_sys_modules_as_it_found_them(pin_patched):
    def aiter_modules():
        return {k: v for k, v in sys.modules.items() if k == "aiter" or k.startswith("aiter.")}

    before = aiter_modules()
    assert _libtype(pin_patched, "gfx950", PRESHUFFLED, bpreshuffle=True) == "hipblaslt"
    assert aiter_modules() == before


def test_without_pandas_untuned_lookups_still_run(pin_patched, monkeypatch):
    monkeypatch.setattr(tuned_lookup, "pandas_available", lambda: False)
    with tuned_lookup.load(pin_patched, "gfx950", 256) as lookup:
        assert lookup.config(*UNTUNED)["libtype"] == "hipblaslt"
        assert inspect.unwrap(lookup.fn).__globals__["pd"] is not sys.modules.get("pandas")
    paths, _ = tuned_paths(None, pin_patched)
    with pytest.raises(tuned_lookup.AiterLookupError, match="pandas is not installed"), \
            tuned_lookup.load(pin_patched, "gfx950", 256, paths):
        pass


def test_a_stand_in_fails_only_when_called(tmp_path):
    (tmp_path / "tuned_gemm.py").write_text(textwrap.dedent("""
        from aiter import hipb_mm
        from aiter.jit.utils.chip_info import get_gfx

        def get_GEMM_A16W16_config(M, N, K, bias, dtype, otype, scaleAB=False, bpreshuffle=False):
            if M == 1:
                return {"libtype": get_gfx()}
            return hipb_mm(M)
    """))
    with tuned_lookup.load(tmp_path, "gfx950", 256) as lookup:
        assert lookup.config(1, 64, 64) == {"libtype": "gfx950"}
        with pytest.raises(tuned_lookup.AiterLookupError, match="called `aiter.hipb_mm`, a stand-in"):
            lookup.config(2, 64, 64)


def test_no_tuned_gemm_is_a_lookup_error(tmp_path):
    with pytest.raises(tuned_lookup.AiterLookupError, match="tuned_gemm.py: not found"), \
            tuned_lookup.load(tmp_path, "gfx950", 256):
        pass


@pytest.mark.parametrize(("M", "N", "gl", "padded"), [
    (100, 64, 0, 112), (1000, 64, 0, 1024), (4099, 4096, 0, 4224), (1, 64, 1, 1), (4099, 4096, 1, 8192),
    (9000, 8192, 1, 8192), (9000, 4096, 1, 16384), (77, 64, None, 77),
])
def test_padded_m_follows_aiters_get_padded_m(M, N, gl, padded):
    assert tuned_lookup.padded_m(M, N, 4096, gl) == padded


def test_merged_csvs_union_columns_and_give_legacy_rows_their_gfx(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("gfx,cu_num,M,libtype\ngfx950,256,1,asm\n")
    b.write_text("cu_num,M,libtype,us\n304,2,hipblaslt,3.5\n")
    merged = tuned_lookup.merge_csvs([a, tmp_path / "absent.csv", b], tmp_path / "merged.csv")
    assert (tmp_path / "merged.csv").read_text().splitlines() == [
        "gfx,cu_num,M,libtype,us", "gfx950,256,1,asm,", "gfx942,304,2,hipblaslt,3.5"]
    assert merged == str(tmp_path / "merged.csv")
    assert tuned_lookup.merge_csvs([a], tmp_path / "unused.csv") == str(a)


# --- the checks, where aiter cannot run -----------------------------------------------------------


def test_dispatch_case_says_the_dispatcher_was_executed(pin_patched, cpu_ctx):
    case = gemm_hipblaslt.run(cpu_ctx("gfx950", aiter_root=pin_patched)).cases[0]
    assert (case.name, case.status) == ("untuned bfloat16 M=4099 N=4097 K=4096", "passed")
    assert case.backend == "aiter-dispatch:hipblaslt"
    assert f"tgemm.mm EXECUTED from {pin_patched / 'tuned_gemm.py'}" in case.note
    assert "get_gfx()=gfx950, get_cu_num()=256" in case.note


def test_asm_check_names_the_shape_that_gets_asm(aiter_pkg, cpu_ctx):
    res = gemm_asm.run(cpu_ctx("gfx950", aiter_root=aiter_pkg))
    assert res.status == "failed"
    assert res.cases[0].note.startswith("asm returned for untuned M=4099 N=4096 K=4096 bpreshuffle=True and 20 more")
    assert "20 sampled of 508" in res.cases[0].note


def test_the_sample_of_asm_rows_holds_every_kind_of_row(aiter_pkg):
    paths, _ = tuned_paths(None, aiter_pkg)
    asm = {k: row for k, row in index(paths, "gfx950", 256).items() if row["libtype"] == "asm"}
    sample = gemm_asm._sample(asm, 20)
    assert len({k for k, _ in sample}) == 20
    assert {(k.bias, k.outdtype) for k, _ in sample} == {(k.bias, k.outdtype) for k in asm}
    assert gemm_asm._sample({}, 20) == []


def test_asm_check_without_pandas_skips_the_tuned_rows_and_says_so(pin_patched, cpu_ctx, monkeypatch):
    monkeypatch.setattr(tuned_lookup, "pandas_available", lambda: False)
    res = gemm_asm.run(cpu_ctx("gfx950", aiter_root=pin_patched))
    assert [(c.name, c.status) for c in res.cases] == [("asm-reachable", "passed"),
                                                        ("asm-reachable tuned rows", "skipped"),
                                                        ("asm-dispatch", "passed")]
    assert res.cases[1].note.startswith("pandas is not installed")


def test_asm_on_gfx942_without_gpu_is_skipped_not_passed(aiter_pkg, cpu_ctx):
    res = gemm_asm.run(cpu_ctx("gfx942", aiter_root=aiter_pkg, cu_num=80))
    assert res.status == "skipped"
    assert "needs the GPU" in res.reason


@pytest.mark.parametrize(("tree", "arch", "hipblaslt", "asm", "code"), [
    ("pin_patched", "gfx942", "passed", "passed", 0),
    ("pin_patched", "gfx950", "passed", "passed", 0),
    ("aiter_pkg", "gfx942", "failed", "passed", 1),  # asm is allowed on gfx942 (and unreachable at 304 CUs)
    ("aiter_pkg", "gfx950", "failed", "failed", 1),
])
def test_cli_checks_on_the_real_tree(request, tmp_path, capsys, tree, arch, hipblaslt, asm, code):
    pkg = request.getfixturevalue(tree)
    out = tmp_path / "report.json"
    got = cli.main(["--arch", arch, "--device", "cpu", "--aiter-src", str(pkg), "--json-file", str(out),
                    "--only", "gemm-hipblaslt", "gemm-asm"])
    capsys.readouterr()
    status = {c["name"]: c["status"] for c in json.loads(out.read_text())["checks"]}
    assert status == {"gemm-hipblaslt": hipblaslt, "gemm-asm": asm}
    assert got == code
