"""MiniMax-M2.5 in the catalog: parameters and KV bytes by hand, the config reader, the names
that reach it; Kimi-K2.5's config.json read as Kimi K2's decoder, its names refused."""

from __future__ import annotations

import json

import pytest

from inferlab import SpecError, UnknownNameError, estimate, load_model
from inferlab.specs.model import ModelSpec


def test_minimax_m25_parameters_by_hand():
    """62 layers, 3,072 wide; attention 48 query heads of 128 over 8 KV heads (q and o 3,072 x
    6,144, k and v 3,072 x 1,024), RMSNorm over all of q (6,144) and all of k (1,024); 256 experts
    of 3 x 3,072 x 1,536, a router 3,072 x 256 with its 256 score biases; two RMSNorms a layer;
    untied embeddings of 200,064 x 3,072. transformers' MiniMax-M2 page: 230B total, 10B active."""
    h, vocab, layers = 3072, 200_064, 62
    attention = 2 * h * 6144 + 2 * h * 1024 + 6144 + 1024
    experts = 256 * 3 * h * 1536
    router = h * 256 + 256
    per_layer = attention + experts + router + 2 * h
    expected = layers * per_layer + 2 * vocab * h + h
    model = load_model("minimax-m2.5")
    assert model.qk_norm and model.qk_norm_span == "layer"
    assert model.total_params == expected
    assert abs(expected / 230e9 - 1) < 0.015
    # activated, without the input embedding: 8 of 256 experts
    active = layers * (attention + 8 * 3 * h * 1536 + router + 2 * h) + vocab * h + h
    assert model.active_params - vocab * h == active
    assert 9.5e9 < active < 10.5e9


def test_a_norm_over_all_heads_is_all_reduced_across_tensor_parallel_ranks():
    """vLLM's MiniMax-M2 (MiniMaxText01RMSNormTP.forward_qk) sums each token's q and k squares
    on every rank and all-reduces the two FP32 sums over the tensor-parallel group before it
    normalises: one all-reduce of 8 B a token per layer. At TP 2 and 4 tokens a step: 62 of
    them, 2 x (2 - 1) / 2 x 32 B = 32 B sent each. None on one GPU, none under attention data
    parallelism (each rank holds whole heads), none for Qwen3's per-head norm."""
    kw = dict(batch_size=4, isl=1024, osl=1024, precision="nvfp4", engine="vllm")

    def stats(model, **layout):
        rows = estimate(model, "b200", **layout, **kw).op_table("decode")
        return [(r["count"], r["comm_bytes"]) for r in rows if r["op"] == "all_reduce_qk_norm"]

    assert stats("minimax-m2.5", tp=2) == [(62, 62 * 32.0)]
    assert stats("minimax-m2.5", tp=1) == []
    assert stats("minimax-m2.5", tp=4, ep=4, attention_dp=True) == []
    assert stats("qwen3-30b-a3b", tp=2) == []
    # and it costs time: a decode step at TP 2 is slower than without it by at least 62 of the
    # engine's smallest all-reduces (a few microseconds each on NVLink)
    row = [r for r in estimate("minimax-m2.5", "b200", tp=2, **kw).op_table("decode")
           if r["op"] == "all_reduce_qk_norm"][0]
    assert row["time_s"] > 62 * 2e-6


def test_minimax_m25_kv_bytes_and_checkpoint():
    model = load_model("MiniMaxAI/MiniMax-M2.5")
    # 62 layers x 2 (K, V) x 8 KV heads x 128 x 2 B
    assert model.kv_cache_bytes_per_token() == {"full": 62 * 2 * 8 * 128 * 2.0}
    assert model.checkpoint is not None and model.checkpoint.weights == "fp8_block"
    assert model.moe is not None and model.moe.router_bias and model.moe.num_shared_experts == 0


def test_minimax_m2_config_json_reads_like_the_catalog(tmp_path):
    fields = {"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2", "hidden_size": 3072,
              "intermediate_size": 1536, "num_hidden_layers": 62, "num_attention_heads": 48,
              "num_key_value_heads": 8, "head_dim": 128, "num_local_experts": 256, "num_experts_per_tok": 8,
              "vocab_size": 200064, "max_position_embeddings": 196608, "use_qk_norm": True}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    spec = ModelSpec.from_hf_config(path)
    assert spec.total_params == load_model("minimax-m2.5").total_params
    assert spec.qk_norm and spec.qk_norm_span == "layer" and spec.moe.router_bias
    # qk_norm_type per_head: one 128-wide weight for q and one for k, as Qwen3's
    path.write_text(json.dumps({**fields, "qk_norm_type": "per_head"}))
    per_head = ModelSpec.from_hf_config(path)
    assert per_head.qk_norm_span == "head"
    assert spec.total_params - per_head.total_params == 62 * (6144 + 1024 - 2 * 128)


def test_kimi_k25_is_not_an_alias_of_kimi_k2():
    """Kimi-K2.5 keeps Kimi K2's decoder but ships INT4 routed experts, not K2's block FP8: read
    as K2 its weights would be K2's (a silent 1.7x); its names say what to use instead."""
    with pytest.raises(SpecError, match="kimi-k2"):
        load_model("moonshotai/Kimi-K2.5")
    with pytest.raises(UnknownNameError, match="kimi-k2"):
        load_model("kimi-k2.5")


def test_kimi_k25_config_json_reads_its_text_decoder(tmp_path):
    """A Kimi-K2.5 config.json wraps the decoder's fields in text_config."""
    k2 = load_model("kimi-k2")
    text = {"model_type": "kimi_k2", "hidden_size": 7168, "intermediate_size": 18432, "num_hidden_layers": 61,
            "num_attention_heads": 64, "num_key_value_heads": 64, "vocab_size": 163840,
            "max_position_embeddings": 262144, "n_routed_experts": 384, "n_shared_experts": 1,
            "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "moe_layer_freq": 1,
            "first_k_dense_replace": 1, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64, "v_head_dim": 128}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "kimi_k25", "architectures": ["KimiK25ForConditionalGeneration"],
                                "text_config": text, "vision_config": {"vt_num_hidden_layers": 27}}))
    spec = ModelSpec.from_hf_config(path)
    assert spec.total_params == k2.total_params
    assert spec.max_position_embeddings == 262_144
