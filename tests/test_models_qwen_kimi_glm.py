"""Qwen2.5, QwQ, Kimi K2 and GLM-4.5 in the catalog: parameter counts by hand against the
checkpoints' tensor listings and the makers' published figures, KV bytes, and the names
that reach them."""

from __future__ import annotations

import pytest

from inferlab import load_model
from inferlab.specs.catalog import catalog_model


def _qwen2_layer(h, heads, kv, inter, hd=128):
    """q and o, k and v, the q/k/v biases (qwen2: none on o), a SwiGLU MLP, two RMSNorms."""
    return 2 * h * heads * hd + 2 * h * kv * hd + (heads + 2 * kv) * hd + 3 * h * inter + 2 * h


@pytest.mark.parametrize("model_id, h, layers, heads, kv, inter, expected", [
    # Qwen2.5-72B-Instruct: its checkpoint's tensors (a third-party listing of every tensor of the
    # Hugging Face release) add up to 72,706,203,648; the card says 72.7B
    ("qwen2.5-72b", 8192, 80, 64, 8, 29568, 72_706_203_648),
    # QwQ-32B's tensors add up to 32,763,876,352; Qwen2.5-32B has the same shape (cards: 32.5B)
    ("qwq-32b", 5120, 64, 40, 8, 27648, 32_763_876_352),
    ("qwen2.5-32b", 5120, 64, 40, 8, 27648, 32_763_876_352),
    # card: 14.7B (13.1B non-embedding)
    ("qwen2.5-14b", 5120, 48, 40, 8, 13824, 14_770_033_664),
    # the Hugging Face API's safetensors count for Qwen2.5-7B-Instruct, 7,615,616,512 (card: 7.61B)
    ("qwen2.5-7b", 3584, 28, 28, 4, 18944, 7_615_616_512),
])
def test_qwen25_parameters_by_hand(model_id, h, layers, heads, kv, inter, expected):
    model = load_model(model_id)
    vocab = 152_064  # 7B and up; embeddings untied (0.5B-3B tie theirs)
    assert not model.tie_word_embeddings and model.qkv_bias and not model.o_bias and not model.qk_norm
    assert layers * _qwen2_layer(h, heads, kv, inter) + 2 * vocab * h + h == model.total_params == expected


def test_qwq_and_qwen25_32b_differ_only_in_context():
    qwq, qwen = load_model("qwq-32b"), load_model("qwen2.5-32b")
    # 64 layers x 2 (K, V) x 8 KV heads x 128 x 2 B = 262,144 B per token for both
    assert qwq.kv_cache_bytes_per_token() == qwen.kv_cache_bytes_per_token() == {"full": 262_144.0}
    assert (qwq.max_position_embeddings, qwen.max_position_embeddings) == (40_960, 32_768)  # QwenLM/QwQ#26


def test_kimi_k2_parameters_by_hand():
    """Kimi K2 Instruct: DeepSeek-V3's architecture at 64 heads, 384 experts and one dense layer.

    A third-party listing of every tensor of moonshotai/Kimi-K2-Instruct counts 1,026,470,731,056
    elements, of which the FP8 block scales (weight_scale_inv) and rotary buffers are not
    parameters: per layer kv_a 5x56 + kv_b 128x4 + o 56x64 + q_a 12x56 + q_b 96x12 = 6,200
    (x61 = 378,200); the dense layer's MLP 3 x 144x56 = 24,192; the experts 60 x 384 x 3 x 16x56
    = 61,931,520; the shared experts 60 x 3 x 896 = 161,280; inv_freq 61 x 56 = 3,416:
    62,498,608 in all, leaving 1,026,408,232,448. The model card says 1T total, 32B activated.
    """
    h, vocab = 7168, 163_840
    attention = h * 1536 + 1536 + 1536 * 64 * 192 + h * 576 + 512 + 512 * 64 * 256 + 64 * 128 * h  # MLA
    assert attention == 101_124_096
    expert = 3 * h * 2048
    moe_layer = 384 * expert + expert + 384 * h + 384  # routed, shared, router with its correction bias
    expected = 2 * vocab * h + 61 * (attention + 2 * h) + 3 * h * 18432 + 60 * moe_layer + h
    assert expected == 1_026_470_731_056 - 62_498_608 == 1_026_408_232_448
    model = load_model("kimi-k2")
    assert model.total_params == expected
    assert model.active_params == expected - 60 * 376 * expert  # 8 of the 384 routed experts
    assert abs(model.active_params - 32e9) <= 0.03 * 32e9
    assert (model.num_dense_layers, model.num_moe_layers, model.num_mtp_layers) == (1, 60, 0)
    # MLA cache: (512 + 64) x 2 B x 61 layers, as for DeepSeek-V3
    assert model.kv_cache_bytes_per_token() == {"full": 70_272.0}
    assert model.checkpoint.weights == "fp8_block"


def _glm_layer_attention(h, qk_norm):
    """96 query heads and 8 KV heads of 128, q/k/v biases, no output bias, optional per-head q/k norms."""
    return h * 12288 + 2 * h * 1024 + 12288 * h + (12288 + 2 * 1024) + (2 * 128 if qk_norm else 0)


@pytest.mark.parametrize("model_id, h, layers, dense, inter, experts, moe_inter, qk_norm, total, published", [
    # README of zai-org/GLM-4.5: 355B total / 32B active; GLM-4.5-Air 106B / 12B
    ("glm-4.5", 5120, 92, 3, 12288, 160, 1536, True, 352_797_829_024, (355e9, 32e9)),
    ("glm-4.5-air", 4096, 46, 1, 10944, 128, 1408, False, 106_852_251_264, (106e9, 12e9)),
])
def test_glm45_parameters_by_hand(model_id, h, layers, dense, inter, experts, moe_inter, qk_norm, total, published):
    model = load_model(model_id)
    vocab, expert = 151_552, 3 * h * moe_inter
    moe_layer = experts * expert + expert + experts * h + experts  # routed, one shared, router + correction bias
    per_layer = _glm_layer_attention(h, qk_norm) + 2 * h
    expected = 2 * vocab * h + layers * per_layer + dense * 3 * h * inter + (layers - dense) * moe_layer + h
    assert model.total_params == expected == total
    active = expected - (layers - dense) * (experts - 8) * expert
    assert model.active_params == active
    # published active counts match with the input embedding and LM head left out (32.08B, 12.18B)
    assert abs(active - 2 * vocab * h - published[1]) <= 0.5e9
    assert abs(expected - published[0]) <= 0.015 * published[0]
    # one MTP layer: an MoE decoder layer, a 2H x H projection and three norms, counted apart
    assert model.param_counts.mtp == per_layer + moe_layer + 2 * h * h + 3 * h
    # GQA cache: 2 x 8 KV heads x 128 x 2 B per layer
    assert model.kv_cache_bytes_per_token() == {"full": 4096.0 * layers}
    assert (model.num_dense_layers, model.qk_norm, model.qkv_bias, model.o_bias) == (dense, qk_norm, True, False)


@pytest.mark.parametrize("name, model_id", [
    ("deepseek-ai/DeepSeek-V3.1", "deepseek-v3"),  # its card: "the same as DeepSeek-V3"
    ("deepseek-v3.1", "deepseek-v3"),
    ("deepseek-ai/DeepSeek-R1-0528", "deepseek-v3"),
    ("deepseek-r1-0528", "deepseek-v3"),
    ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3"),
    ("moonshotai/Kimi-K2-Instruct", "kimi-k2"),
    ("Qwen/QwQ-32B", "qwq-32b"),
    ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b"),
    ("Qwen/Qwen2.5-7B", "qwen2.5-7b"),
    ("zai-org/GLM-4.5", "glm-4.5"),
    ("zai-org/GLM-4.5-Air", "glm-4.5-air"),
])
def test_names_reach_the_catalog(name, model_id):
    assert load_model(name).id == model_id
    assert catalog_model(name) == (model_id, None)


def test_quantized_repositories_keep_the_architecture():
    assert catalog_model("zai-org/GLM-4.5-Air-FP8")[0] == "glm-4.5-air"
    assert catalog_model("Qwen/Qwen2.5-72B-Instruct-AWQ")[0] == "qwen2.5-72b"
