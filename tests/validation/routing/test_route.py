"""The route of a model through the real ATOM and aiter at the pins (shared/upstream), read as an image holds them.

What it must find is what the issue read by hand in ATOM 181b0f46 and aiter 79366eb8: bf16 experts reach aiter's CK
2-stage MoE through aiter.fused_moe.fused_moe (no Triton path), the router's topk_softmax is in module_moe_asm,
SiluAndMul calls module_activation, and DeepSeek-V3's block-scale linears take the preshuffled GEMM unless
ATOM_FP8_BLOCKSCALE_WEIGHT_PRESHUFFLE is "0".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from devsupport.builds import ck_free_env
from tests.validation.conftest import REPO
from validation import route as cli
from validation.core import models
from validation.routing import layers as route
from validation.routing import leaves


def make(site, model: str, ck_mode: str = "ckfree", env: dict | None = None, flydsl: bool = True) -> route.Route:
    _, cfg = models.load_config(model)
    return route.make(model, cfg, models.quantization(cfg), ck_mode, {"atom": site / "atom", "aiter": site / "aiter"},
                      env or {}, flydsl)


def layer(r: route.Route, path: str, op: str) -> route.LayerRoute:
    found = [lr for lr in r.layers if lr.layer == path and lr.op == op]
    assert found, f"no {path} [{op}] in {[(lr.layer, lr.op) for lr in r.layers]}"
    return found[0]


@pytest.fixture(scope="session")
def qwen(site):
    return make(site, "qwen3-30b-a3b")


def test_bf16_experts_reach_ck_two_stage_moe_and_the_router_asm_module(qwen):
    experts = layer(qwen, "model.layers.mlp.experts", "FusedMoE")
    via_fused_moe = {k.module for k in experts.kernels if k.entry == "aiter.fused_moe.fused_moe"}
    assert "module_moe_ck2stages" in via_fused_moe
    unquantized = {k.module for k in experts.kernels if k.site.endswith("UnquantizedFusedMoEMethod.apply")}
    assert "module_moe_ck2stages" in unquantized
    topk = [k for k in experts.kernels if k.name.endswith("topk_softmax")]
    assert topk and {k.module for k in topk} == {"module_moe_asm"}
    assert not any(k.name.endswith("fused_moe_kernel") for k in experts.kernels), "aiter's Triton fused_moe"
    assert {k.module for k in experts.missing} >= {"module_moe_ck2stages", "module_moe_asm"}


def test_silu_and_mul_is_module_activation_missing_only_without_ck(qwen):
    act = layer(qwen, "model.layers.mlp.act_fn", "SiluAndMul")
    assert {(k.entry, k.module, k.present) for k in act.kernels} == {
        ("aiter.ops.activation.silu_and_mul", "module_activation", False)}
    with_ck = [route.present(k.kind, k.module, ck=set(), has_flydsl=True) for k in act.kernels]
    assert with_ck == [True]


@pytest.fixture(scope="session")
def deepseek(site):
    return make(site, "deepseek-v3")


def test_blockscale_linears_follow_atoms_preshuffle_switch(site, deepseek):
    default = layer(deepseek, "model.layers.mlp.down_proj", "RowParallelLinear")
    entries = {k.entry for k in default.kernels}
    assert "aiter.ops.gemm_op_a8w8.gemm_a8w8_blockscale_bpreshuffle" in entries
    assert not any(e.endswith("gemm_a8w8_blockscale.gemm_a8w8_blockscale") for e in entries)
    triton = make(site, "deepseek-v3", env={"ATOM_FP8_BLOCKSCALE_WEIGHT_PRESHUFFLE": "0", "ATOM_USE_TRITON_GEMM": "1"})
    switched = layer(triton, "model.layers.mlp.down_proj", "RowParallelLinear")
    assert {k.entry for k in switched.kernels} == {
        "aiter.ops.triton.gemm.basic.gemm_a8w8_blockscale.gemm_a8w8_blockscale"}
    assert triton.switches["ATOM_FP8_BLOCKSCALE_WEIGHT_PRESHUFFLE"] == "False"
    assert all(k.kind == leaves.TRITON and k.present for k in switched.kernels)


@pytest.fixture(scope="session")
def patched(site, tmp_path_factory):
    """ATOM as a CK-free image holds it: a copy of the pin after `python -m patches apply --only` its CK-free patches
    (aiter's patches change its GEMM fallbacks, which these routes do not reach: aiter stays the pin, linked)."""
    folder = tmp_path_factory.mktemp("patched-site")
    shutil.copytree(site / "atom", folder / "atom", ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "aiter").symlink_to(site / "aiter")
    subprocess.run([sys.executable, "-m", "patches", "apply", "--root", str(folder), "--only",  # noqa: S603
                    "atom-ck-free-triton-gemm", "atom-ck-free-triton-moe", "atom-ck-free-triton-norm",
                    "atom-ck-free-native-act", "atom-ck-free-native-topk"], cwd=REPO, check=True, capture_output=True,
                   timeout=300)
    return folder


def test_the_ck_free_image_sends_bf16_experts_to_aiters_triton_fused_moe(patched):
    """The patched ATOM on the CK-free image's environment: UnquantizedFusedMoEMethod.apply returns through
    ck_free_triton_experts (aiter's Triton align and fused_moe kernels, which the image has) and no longer reaches
    aiter.fused_moe's CK 2-stage modules, and the softmax router is torch's (no topk_softmax); without ATOM_CK_FREE
    the same code still reaches both."""
    experts = layer(make(patched, "qwen3-30b-a3b", env=ck_free_env()), "model.layers.mlp.experts", "FusedMoE")
    apply = [k for k in experts.kernels if k.site.endswith("UnquantizedFusedMoEMethod.apply")]
    assert apply == [], apply
    assert not [k for k in experts.kernels if k.name.endswith("topk_softmax")], "the router is torch's now"
    ours = [k for k in experts.kernels if k.site.endswith("moe.ck_free_triton_experts")]
    assert {k.name.rsplit(".", 1)[-1] for k in ours} >= {"_fused_moe_kernel", "_moe_align_block_size_stage1_kernel"}
    assert all(k.kind == leaves.TRITON and k.present for k in ours)
    off = layer(make(patched, "qwen3-30b-a3b", env={**ck_free_env(), "ATOM_CK_FREE": "0"}),
                "model.layers.mlp.experts", "FusedMoE")
    unpatched = {k.module for k in off.kernels if k.site.endswith("UnquantizedFusedMoEMethod.apply")}
    assert "module_moe_ck2stages" in unpatched
    assert {k.module for k in off.kernels if k.name.endswith("topk_softmax")} == {"module_moe_asm"}


def test_the_ck_free_image_sends_rmsnorm_to_aiters_triton_rmsnorm(patched):
    """RMSNorm's plain path through the patched wrappers: aiter's Triton rms_norm kernels (reached through its
    autograd Function's forward), nothing the image lacks; without ATOM_CK_FREE, module_rmsnorm_quant."""
    norm = layer(make(patched, "qwen3-30b-a3b", env=ck_free_env()), "model.norm", "RMSNorm")
    names = {k.name.rsplit(".", 1)[-1] for k in norm.kernels}
    assert {"_rms_norm_kernel", "_fused_add_rmsnorm_kernel"} <= names
    assert all(k.kind == leaves.TRITON and k.present for k in norm.kernels), norm.kernels
    off = layer(make(patched, "qwen3-30b-a3b", env={**ck_free_env(), "ATOM_CK_FREE": "0"}), "model.norm", "RMSNorm")
    assert {k.module for k in off.missing} == {"module_rmsnorm_quant"}


def test_the_ck_free_image_runs_silu_and_mul_on_atoms_torch_path(patched):
    """SiluAndMul's forward returns ATOM's own forward_native (torch: no aiter kernel, so the layer leaves the route);
    without ATOM_CK_FREE it is aiter's silu_and_mul, module_activation."""
    r = make(patched, "llama3-8b", env=ck_free_env())
    assert not [lr for lr in r.layers if lr.op == "SiluAndMul"]
    off = layer(make(patched, "llama3-8b", env={**ck_free_env(), "ATOM_CK_FREE": "0"}), "model.layers.mlp.act_fn",
                "SiluAndMul")
    assert {k.module for k in off.missing} == {"module_activation"}


def test_the_ck_free_image_sends_deepseeks_block_scale_linears_to_triton(patched):
    """The CK-free image's own environment on the patched ATOM: every block-scale linear reaches aiter's Triton
    gemm_a8w8_blockscale, a kernel the image has (ATOM's default preshuffle switch reaches CK modules instead)."""
    env = ck_free_env()
    assert env["ATOM_FP8_BLOCKSCALE_WEIGHT_PRESHUFFLE"] == "0" and env["ATOM_CK_FREE"] == "1"
    r = make(patched, "deepseek-v3", env=env)
    for path in ("model.layers.mlp.down_proj", "model.layers.self_attn.fused_qkv_a_proj"):
        linear = [lr for lr in r.layers if lr.layer == path][0]
        assert {k.entry for k in linear.kernels} == {
            "aiter.ops.triton.gemm.basic.gemm_a8w8_blockscale.gemm_a8w8_blockscale"}, linear.kernels
        assert all(k.kind == leaves.TRITON and k.present for k in linear.kernels)
    default = make(patched, "deepseek-v3", env={**env, "ATOM_FP8_BLOCKSCALE_WEIGHT_PRESHUFFLE": "1"})
    assert len(default.unservable) > len(r.unservable)


def test_lm_head_stays_bf16_in_an_fp8_checkpoint(deepseek):
    head = layer(deepseek, "lm_head", "ParallelLMHead")
    assert {k.entry for k in head.kernels} == {"aiter.tuned_gemm.TunedGemm.mm"}


def test_the_ck_modules_are_aiters_own_list(site):
    ck = leaves.ck_modules(site / "aiter")
    assert {"module_activation", "module_moe_asm", "module_quant"} <= ck  # its hard-coded list
    assert "module_moe_ck2stages" in ck  # its optCompilerConfig.json pattern match
    assert "module_hipbsolgemm" not in ck


@pytest.fixture
def on_path(site, monkeypatch):
    """The site's atom/ and aiter/ found on sys.path, as the image's Python finds them (never imported)."""
    monkeypatch.syspath_prepend(str(site))
    for var in ("ATOM_FP8_BLOCKSCALE_WEIGHT_PRESHUFFLE", "ATOM_USE_TRITON_GEMM", "ATOM_CK_FREE"):
        monkeypatch.delenv(var, raising=False)
    return site


def test_a_ck_free_route_that_needs_a_missing_module_is_refused_naming_it(on_path, tmp_path, capsys):
    assert cli.main(["--model", "llama3-8b", "--ck-mode", "ckfree", "--json-file", str(tmp_path / "r.json")]) == 1
    out, err = capsys.readouterr()
    message = err.strip().splitlines()[-1]
    assert "cannot serve llama3-8b" in message and "module_" in message and "--allow-unservable" in message
    report = json.loads((tmp_path / "r.json").read_text())
    assert not report["servable"] and report["missing"][0]["module"] in message
    layers = {lr["layer"] for lr in report["layers"]}  # the decoder layers, reached through make_layers' lambda
    assert {"model.layers.mlp.act_fn", "model.layers.self_attn.qkv_proj", "model.layers.input_layernorm"} <= layers
    assert "model.layers.mlp.act_fn [SiluAndMul]: jit:module_activation MISSING" in out
    assert cli.main(["--model", "llama3-8b", "--ck-mode", "ckfree", "--allow-unservable", "--json-file",
                     str(tmp_path / "a.json")]) == 0
    assert json.loads((tmp_path / "a.json").read_text())["allowed_unservable"] is True


def test_bad_input_is_one_line_exit_2(on_path, tmp_path, capsys):
    assert cli.main(["--model", "no-such-model"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "preset" in err
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["NoSuchForCausalLM"], "hidden_size": 8}))
    assert cli.main(["--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "NoSuchForCausalLM" in err and len(err.strip().splitlines()) == 1


def test_no_atom_to_read_is_exit_3(capsys):
    assert cli.main(["--model", "llama3-8b"]) == 3
    assert "atom to read" in capsys.readouterr().err


def test_the_program_runs_as_python_m_validation_route():
    out = subprocess.run([sys.executable, "-m", "validation.route", "--help"], capture_output=True, text=True,  # noqa: S603
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60, check=False)
    assert out.returncode == 0 and "--allow-unservable" in out.stdout
