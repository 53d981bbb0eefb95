import json

import pytest

from validation.core.models import (
    M_BUCKETS,
    PRESETS,
    GemmShape,
    gemm_shapes,
    load_config,
)


def _by_layer(shapes):
    return {s.layer: (s.N, s.K) for s in shapes}


def test_llama3_8b_tp1_and_tp8_by_hand():
    tp1 = _by_layer(gemm_shapes(PRESETS["llama3-8b"], 1))
    assert tp1["qkv_proj"] == ((32 + 2 * 8) * 128, 4096)
    assert tp1["o_proj"] == (4096, 4096)
    assert tp1["mlp.gate_up"] == (2 * 14336, 4096)
    assert tp1["mlp.down"] == (4096, 14336)
    tp8 = _by_layer(gemm_shapes(PRESETS["llama3-8b"], 8))
    assert tp8["qkv_proj"] == ((4 + 2 * 1) * 128, 4096)
    assert tp8["o_proj"] == (4096, 512)
    assert tp8["mlp.down"] == (4096, 1792)


def test_deepseek_v3_mla_shapes():
    s = _by_layer(gemm_shapes(PRESETS["deepseek-v3"], 8))
    assert s["fused_qkv_a_proj"] == (1536 + 512 + 64, 7168)
    assert s["q_b_proj"] == (16 * 192, 1536)
    assert s["kv_b_proj"] == (16 * 256, 512)
    assert s["o_proj"] == (7168, 16 * 128)
    assert s["router"] == (256, 7168)


def test_qwen3_moe_has_router_and_no_dense_mlp():
    s = _by_layer(gemm_shapes(PRESETS["qwen3-30b-a3b"], 4))
    assert s["router"] == (128, 2048)
    assert s["qkv_proj"] == ((8 + 2 * 1) * 128, 2048)
    assert not any(k.startswith("mlp") for k in s)


def test_hf_config_json_path(tmp_path):
    cfg = {**PRESETS["llama3-8b"], "_name_or_path": "my-llama"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    name, loaded = load_config(str(tmp_path))
    assert name == "my-llama"
    assert gemm_shapes(loaded, 2) == gemm_shapes(PRESETS["llama3-8b"], 2)


def test_bad_model_and_bad_tp():
    with pytest.raises(ValueError, match="neither a preset"):
        load_config("/nonexistent/config.json")
    with pytest.raises(ValueError, match="not divisible by tp=3"):
        gemm_shapes(PRESETS["llama3-8b"], 3)


def test_buckets_are_powers_of_two_to_8192():
    assert M_BUCKETS[0] == 1 and M_BUCKETS[-1] == 8192 and len(M_BUCKETS) == 14
    assert GemmShape("a", 1, 2) < GemmShape("b", 1, 2)


@pytest.mark.parametrize(("text", "kind"), [("[1, 2]", "JSON array"), ('"llama"', "JSON string"),
                                            ("7", "JSON number")])
def test_a_config_that_is_not_an_object_is_refused(tmp_path, text, kind):
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ValueError, match=f"is a JSON object, this one is a {kind}"):
        load_config(str(tmp_path))


def test_a_config_that_is_not_json_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a readable JSON file"):
        load_config(str(tmp_path))
