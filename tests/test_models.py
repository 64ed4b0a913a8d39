"""Model catalog: parameter counts, KV-cache bytes and weight bytes against hand derivations
and published figures."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import UnknownNameError, load_model, model_ids

REQUIRED_IDS = {
    "gpt-j-6b", "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
    "llama-3.3-70b", "llama-4-scout", "llama-4-maverick", "mistral-7b", "mixtral-8x7b", "mixtral-8x22b",
    "falcon-180b", "internlm-20b", "deepseek-v3", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
    "gpt-oss-20b", "gpt-oss-120b", "gemma-3-27b", "phi-3-mini",
    "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b", "qwq-32b", "kimi-k2", "glm-4.5", "glm-4.5-air",
    "minimax-m2.5",
}


def test_catalog_has_every_required_model():
    assert REQUIRED_IDS <= set(model_ids())


def test_alias_deepseek_r1():
    assert load_model("deepseek-r1") is load_model("deepseek-v3")
    assert load_model("meta-llama/Llama-3.1-70B").id == "llama-3.1-70b"


def test_unknown_model_suggests():
    with pytest.raises(UnknownNameError, match="llama-3.1-70b"):
        load_model("llama-3.1-70")


def _convention(model, published, derived):
    """Apply the published figure's convention to a derived count."""
    pc = model.param_counts
    value = derived
    if "mtp" in published.includes:
        value += pc.mtp
    if "input_embedding" in published.excludes:
        value -= pc.embedding
    if "lm_head" in published.excludes:
        value -= pc.lm_head
    return value


@pytest.mark.parametrize("model_id", sorted(REQUIRED_IDS))
def test_parameter_counts_match_published_within_1_5_percent(model_id):
    """Tolerance: 1.5% beyond the precision of the published figure itself ("3.3B" is 3.25-3.35B)."""
    model = load_model(model_id)
    card = model.card
    assert card is not None and card.total_params is not None
    for published, derived in ((card.total_params, model.total_params), (card.active_params, model.active_params)):
        if published is None:
            continue
        value = _convention(model, published, derived)
        assert abs(value - published.value) <= 0.015 * published.value + published.rounding, (
            f"{model_id}: derived {value / 1e9:.3f}B vs published {published.stated}"
        )


def test_llama_3_1_8b_parameters_by_hand():
    # embed 128256*4096 = 525,336,576 (and the same again for the untied LM head)
    # per layer: q 4096*4096 + k,v 2*4096*1024 + o 4096*4096 = 41,943,040
    #            SwiGLU 3*4096*14336 = 176,160,768; two RMSNorms 8,192  -> 218,112,000
    # 32 layers = 6,979,584,000; final norm 4,096
    expected = 2 * 525_336_576 + 32 * 218_112_000 + 4_096
    assert expected == 8_030_261_248
    assert load_model("llama-3.1-8b").total_params == expected


def test_mixtral_8x7b_active_parameters_by_hand():
    # per layer: attention 4096*(4096+1024+1024+4096) = 41,943,040; router 4096*8 = 32,768
    # one expert 3*4096*14336 = 176,160,768; two of eight active; norms 8,192
    active_layer = 41_943_040 + 32_768 + 2 * 176_160_768 + 8_192
    expected = 32 * active_layer + 2 * 32000 * 4096 + 4096
    assert load_model("mixtral-8x7b").active_params == expected == 12_879_925_248


def test_kv_bytes_llama_3_1_70b_bf16():
    # 2 (K,V) * 8 KV heads * 128 head_dim * 2 B * 80 layers = 327,680 B per token
    assert load_model("llama-3.1-70b").kv_cache_bytes_per_token("bf16") == {"full": 327_680.0}


def test_kv_bytes_deepseek_v3_mla_bf16():
    # MLA latent: (kv_lora_rank 512 + rope 64) * 2 B * 61 layers = 70,272 B, not the GQA formula
    model = load_model("deepseek-v3")
    assert model.attention_type == "MLA"
    assert model.kv_cache_bytes_per_token("bf16") == {"full": 70_272.0}
    assert model.num_key_value_heads == 128  # what the config says; it is not what is cached


def test_kv_bytes_at_fp8_halve():
    assert load_model("llama-3.1-8b").kv_cache_bytes_per_token("fp8") == {"full": 65_536.0}


def test_gemma3_sliding_layers_capped_at_window():
    model = load_model("gemma-3-27b")
    # layer i is global when (i+1) % 6 == 0: 10 global, 52 local with a 1024 window
    assert model.layer_kinds == {"sliding(1024)": 52, "full": 10}
    per_layer = 2 * 16 * 128 * 2  # 8,192 B
    ctx = 32_768
    expected = 10 * per_layer * ctx + 52 * per_layer * 1024
    assert model.kv_cache_bytes(ctx) == pytest.approx(expected) == 3_120_562_176


def test_mistral_rolling_buffer_caps_kv_at_512_mib():
    model = load_model("mistral-7b")
    # 131,072 B/token * 4,096 window = 512 MiB, whatever the context
    assert np.all(model.kv_cache_bytes([4096, 8192, 32768]) == 512 * 2**20)


def test_gpt_oss_alternates_sliding_and_full():
    model = load_model("gpt-oss-120b")
    assert model.layer_kinds == {"sliding(128)": 18, "full": 18}
    assert model.layers[0].attention == "sliding" and model.layers[1].attention == "full"


def test_gpt_oss_120b_checkpoint_size():
    # A quoted figure puts the MXFP4 checkpoint at 60.8 GiB (reference NOTES.md, trap 7)
    model = load_model("gpt-oss-120b")
    size = model.weight_bytes(model.checkpoint.weights, expert_precision=model.checkpoint.moe_weights) / 2**30
    assert size == pytest.approx(60.8, rel=0.01)


def test_weight_bytes_at_precisions():
    model = load_model("llama-3.1-70b")
    n = 70_553_706_496
    assert model.weight_bytes("bf16") == 2 * n
    assert model.weight_bytes("fp8") == n
    assert model.weight_bytes("nvfp4") == pytest.approx(n * (4 + 8 / 16) / 8)  # 16-element blocks, FP8 scale


def test_moe_structures():
    ds = load_model("deepseek-v3")
    assert (ds.num_dense_layers, ds.num_moe_layers) == (3, 58)
    assert (ds.moe.num_experts, ds.moe.num_shared_experts, ds.moe.num_experts_per_tok) == (256, 1, 8)
    assert ds.param_counts.mtp == 11_610_068_224  # MTP block, embedding and head shared
    mav = load_model("llama-4-maverick")
    assert (mav.num_moe_layers, mav.num_dense_layers) == (24, 24)
    assert {layer.intermediate_size for layer in mav.layers if layer.mlp == "dense"} == {16384}
    assert load_model("llama-4-scout").layer_kinds == {"chunked(8192)": 36, "full": 12}
    q = load_model("qwen3-30b-a3b")
    assert (q.moe.num_experts, q.moe.num_experts_per_tok, q.num_moe_layers) == (128, 8, 48)


def test_attention_types():
    assert load_model("llama-2-7b").attention_type == "MHA"
    assert load_model("llama-2-70b").attention_type == "GQA"
    assert load_model("falcon-180b").num_key_value_heads == 8
    assert load_model("gpt-j-6b").attention_type == "MHA"


def test_max_context():
    assert load_model("llama-4-scout").max_position_embeddings == 10_485_760
    assert load_model("deepseek-v3").max_position_embeddings == 163_840
    assert load_model("qwen3-8b").max_position_embeddings == 40_960


@settings(max_examples=50, deadline=None)
@given(model_id=st.sampled_from(sorted(REQUIRED_IDS)), a=st.integers(0, 200_000), b=st.integers(0, 200_000))
def test_kv_bytes_monotone_and_linear_below_windows(model_id, a, b):
    model = load_model(model_id)
    lo, hi = sorted((a, b))
    kv_lo, kv_hi = model.kv_cache_bytes([lo, hi])
    assert 0 <= kv_lo <= kv_hi
    smallest_window = min((layer.window for layer in model.layers if layer.window), default=None)
    per_token = sum(model.kv_cache_bytes_per_token("bf16").values())
    if smallest_window is None or hi <= smallest_window:
        assert kv_hi == pytest.approx(per_token * hi)
    assert not np.isnan(kv_hi)


def test_kv_bytes_accepts_token_quantities_and_rejects_other_units():
    from inferlab import Q, UnitError

    model = load_model("llama-3.1-8b")
    assert model.kv_cache_bytes(Q("8 ktok")) == model.kv_cache_bytes(8000) == 131_072 * 8000
    with pytest.raises(UnitError, match="token"):
        model.kv_cache_bytes(Q("8 GB"))
    with pytest.raises(UnitError):
        model.kv_cache_bytes([1, "x"])
    with pytest.raises(UnitError):
        model.kv_cache_bytes(-1)


def test_odd_names_are_unknown_name_errors():
    from inferlab import load_hardware

    with pytest.raises(UnknownNameError):
        load_hardware(["a"])
    assert load_hardware("H100-SXM").id == "h100-sxm"
