"""Import of Hugging Face config.json files: matches the catalog, fails clearly on bad input."""

from __future__ import annotations

import json

import pytest

from inferlab import ModelSpec, SpecError, load_model

#: config file in tests/data/hf-configs -> catalog id it must reproduce
CATALOG_OF = {
    "meta-llama--Meta-Llama-3.1-8B.json": "llama-3.1-8b",
    "meta-llama--Meta-Llama-3.1-70B.json": "llama-3.1-70b",
    "meta-llama--Meta-Llama-3.1-405B.json": "llama-3.1-405b",
    "meta-llama--Llama-4-Scout-17B-16E-Instruct.json": "llama-4-scout",
    "meta-llama--Llama-4-Maverick-17B-128E-Instruct.json": "llama-4-maverick",
    "mistralai--Mixtral-8x7B-v0.1.json": "mixtral-8x7b",
    "mistralai--Mixtral-8x22B-v0.1.json": "mixtral-8x22b",
    "deepseek-ai--DeepSeek-V3.json": "deepseek-v3",
    "deepseek-ai--DeepSeek-R1.json": "deepseek-r1",
    "Qwen--Qwen3-8B.json": "qwen3-8b",
    "Qwen--Qwen3-32B.json": "qwen3-32b",
    "Qwen--Qwen3-30B-A3B.json": "qwen3-30b-a3b",
    "Qwen--Qwen3-235B-A22B.json": "qwen3-235b-a22b",
    "openai--gpt-oss-20b.json": "gpt-oss-20b",
    "openai--gpt-oss-120b.json": "gpt-oss-120b",
    "EleutherAI--gpt-j-6b.json": "gpt-j-6b",
    "meta-llama--Llama-2-7b-hf.json": "llama-2-7b",
    "meta-llama--Llama-2-13b-hf.json": "llama-2-13b",
    "meta-llama--Llama-2-70b-hf.json": "llama-2-70b",
    "tiiuae--falcon-180B.json": "falcon-180b",
    "internlm--internlm-20b.json": "internlm-20b",
    "Qwen--Qwen2.5-7B-Instruct.json": "qwen2.5-7b",
    "Qwen--Qwen2.5-72B-Instruct.json": "qwen2.5-72b",
    "Qwen--QwQ-32B.json": "qwq-32b",
    "moonshotai--Kimi-K2-Instruct.json": "kimi-k2",
    "zai-org--GLM-4.5-Air.json": "glm-4.5-air",
}

_IDENTITY = {"id", "name", "card"}


def test_every_config_file_is_mapped(data_dir):
    files = {p.name for p in (data_dir / "hf-configs").glob("*.json")}
    assert files == set(CATALOG_OF)


@pytest.mark.parametrize("fname, model_id", sorted(CATALOG_OF.items()))
def test_import_matches_catalog_entry(data_dir, fname, model_id):
    imported = ModelSpec.from_hf_config(data_dir / "hf-configs" / fname)
    catalog = load_model(model_id)
    assert imported.model_dump(exclude=_IDENTITY) == catalog.model_dump(exclude=_IDENTITY)
    assert imported.name == fname[:-5].replace("--", "/")


def test_dict_input_and_folder_input(data_dir):
    cfg = json.loads((data_dir / "hf-configs" / "meta-llama--Meta-Llama-3.1-8B.json").read_text())
    assert ModelSpec.from_hf_config(cfg).total_params == load_model("llama-3.1-8b").total_params
    folder = ModelSpec.from_hf_config(data_dir / "llama-3.1-70b-fp8")
    # ModelOpt hf_quant_config.json beside config.json: FP8 weights and KV cache
    assert folder.checkpoint.weights == "fp8" and folder.checkpoint.activations == "fp8"
    assert folder.checkpoint.kv_cache == "fp8"
    assert "hf_quant_config.json" in folder.checkpoint.source
    # 70,553,706,496 params at 1 byte each (per-tensor scales are negligible)
    assert folder.weight_bytes(folder.checkpoint.weights) == pytest.approx(70_553_706_496)


def test_kimi_k2_reads_as_deepseek_v3(data_dir):
    cfg = json.loads((data_dir / "hf-configs" / "deepseek-ai--DeepSeek-V3.json").read_text())
    cfg["model_type"] = "kimi_k2"
    spec = ModelSpec.from_hf_config(cfg)
    assert spec.attention_type == "MLA" and spec.moe.num_experts == 256
    # Kimi-K2's config.json carries DeepSeek's block-scaled FP8 recipe
    assert (spec.checkpoint.weights, spec.checkpoint.activations) == ("fp8_block", "fp8")


def test_glm4_moe_reads_biases_qk_norm_and_the_moe_layout(data_dir):
    """GLM-4.5-Air's config.json (zai-org), read by the glm4_moe reader: q/k/v biases but none on
    the output projection, QK-Norm only where use_qk_norm says so, head_dim read (4096/96 is not
    128), first_k_dense_replace dense layers, one shared expert, the router's correction bias."""
    cfg = json.loads((data_dir / "hf-configs" / "zai-org--GLM-4.5-Air.json").read_text())
    spec = ModelSpec.from_hf_config(cfg)
    assert (spec.head_dim, spec.qkv_bias, spec.o_bias, spec.qk_norm) == (128, True, False, False)
    assert (spec.num_dense_layers, spec.num_moe_layers, spec.num_mtp_layers) == (1, 45, 1)
    assert (spec.moe.num_experts, spec.moe.num_shared_experts, spec.moe.router_bias) == (128, 1, True)
    with_norm = ModelSpec.from_hf_config({**cfg, "use_qk_norm": True})
    assert with_norm.total_params - spec.total_params == 46 * 2 * 128  # q_norm and k_norm per layer
    with pytest.raises(SpecError, match="head_dim"):
        ModelSpec.from_hf_config({k: v for k, v in cfg.items() if k != "head_dim"})
    with pytest.raises(SpecError, match="use_qk_norm"):
        ModelSpec.from_hf_config({**cfg, "use_qk_norm": "false"})


def test_unknown_architecture_lists_supported():
    with pytest.raises(SpecError) as info:
        ModelSpec.from_hf_config({"model_type": "bert", "hidden_size": 768})
    msg = str(info.value)
    assert "'bert'" in msg and "llama" in msg and "deepseek_v3" in msg and "gptj" in msg


def test_missing_field_is_named(data_dir):
    cfg = json.loads((data_dir / "hf-configs" / "Qwen--Qwen3-8B.json").read_text())
    del cfg["num_hidden_layers"]
    with pytest.raises(SpecError, match="num_hidden_layers"):
        ModelSpec.from_hf_config(cfg)


def test_bad_field_type_is_named(data_dir):
    cfg = json.loads((data_dir / "hf-configs" / "Qwen--Qwen3-8B.json").read_text())
    cfg["hidden_size"] = "big"
    with pytest.raises(SpecError, match="hidden_size"):
        ModelSpec.from_hf_config(cfg)


def test_heads_that_do_not_split_the_width_need_a_head_dim(data_dir):
    """Llama-3.1-8B is 4,096 wide: 24 heads would be 170.67 wide each, which no model is; with
    head_dim given (Qwen3 style: 24 heads of 128 on a 4,096 model) it is read as given."""
    cfg = json.loads((data_dir / "hf-configs" / "meta-llama--Meta-Llama-3.1-8B.json").read_text())
    cfg["num_attention_heads"] = 24
    with pytest.raises(SpecError, match="hidden_size 4096 is not a multiple of num_attention_heads 24, and no "
                                        "head_dim is given"):
        ModelSpec.from_hf_config(cfg)
    assert ModelSpec.from_hf_config({**cfg, "head_dim": 128}).head_dim == 128
    assert ModelSpec.from_hf_config({**cfg, "num_attention_heads": 32}).head_dim == 4096 // 32
    # MLA sets its own head width (qk_nope 128 + qk_rope 64): no split of the 7,168 to check
    mla = json.loads((data_dir / "hf-configs" / "deepseek-ai--DeepSeek-V3.json").read_text())
    assert ModelSpec.from_hf_config({**mla, "num_attention_heads": 96}).head_dim == 128 + 64


def test_missing_model_type_and_bad_files(tmp_path):
    with pytest.raises(SpecError, match="model_type"):
        ModelSpec.from_hf_config({"hidden_size": 1})
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(SpecError, match="not valid JSON"):
        ModelSpec.from_hf_config(bad)
    with pytest.raises(SpecError, match="cannot read"):
        ModelSpec.from_hf_config(tmp_path / "absent.json")


def test_multimodal_wrapper_without_text_config():
    with pytest.raises(SpecError, match="text_config"):
        ModelSpec.from_hf_config({"model_type": "llama4", "vision_config": {}})


QWEN25_7B = {
    # Qwen/Qwen2.5-7B config.json architecture fields
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
    "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28, "vocab_size": 152064,
    "max_position_embeddings": 131072, "tie_word_embeddings": False, "use_sliding_window": False,
    "sliding_window": 131072, "max_window_layers": 28, "hidden_act": "silu",
}


def test_qwen2_counts_qkv_biases_by_hand():
    spec = ModelSpec.from_hf_config(QWEN25_7B)
    # head_dim 3584/28 = 128; per layer: q,o 2*3584*3584 = 25,690,112; k,v 2*3584*512 = 3,670,016;
    # q/k/v biases 3584+512+512 = 4,608; SwiGLU 3*3584*18944 = 203,685,888; 2 RMSNorms 7,168
    per_layer = 25_690_112 + 3_670_016 + 4_608 + 203_685_888 + 7_168
    embeddings = 2 * 152064 * 3584  # untied
    assert spec.total_params == 28 * per_layer + embeddings + 3584 == 7_615_616_512  # card: "7.61B"
    assert spec.layer_kinds == {"full": 28}  # use_sliding_window false: the window is inert


def test_qwen2_sliding_window_from_max_window_layers():
    spec = ModelSpec.from_hf_config({**QWEN25_7B, "use_sliding_window": True, "sliding_window": 4096,
                                     "max_window_layers": 20})
    assert spec.layer_kinds == {"full": 20, "sliding(4096)": 8}


def test_gemma3_text_flat_config_equals_wrapped(data_dir):
    wrapped = load_model("gemma-3-27b")
    flat = {"model_type": "gemma3_text", "head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
            "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16, "sliding_window": 1024,
            "vocab_size": 262208, "max_position_embeddings": 131072}
    spec = ModelSpec.from_hf_config(flat)
    assert spec.model_dump(exclude=_IDENTITY) == wrapped.model_dump(exclude=_IDENTITY)


FALCON_7B = {
    # tiiuae/falcon-7b config.json architecture fields (original decoder: multi-query, parallel attention)
    "model_type": "falcon", "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
    "multi_query": True, "parallel_attn": True, "new_decoder_architecture": False, "bias": False,
    "vocab_size": 65024,
}


def test_falcon_original_architecture_by_hand():
    spec = ModelSpec.from_hf_config(FALCON_7B)
    # head_dim 64; q,o 2*4544*4544 = 41,295,872; MQA k,v 2*4544*64 = 581,632;
    # GELU MLP 2*4544*18176 = 165,183,488; one LayerNorm with bias 9,088 -> 207,070,080 per layer
    per_layer = 41_295_872 + 581_632 + 165_183_488 + 9_088
    expected = 32 * per_layer + 65024 * 4544 + 9_088  # tied LM head, final LayerNorm with bias
    assert spec.total_params == expected == 6_921_720_704
    assert spec.attention_type == "MQA"
    assert spec.kv_cache_bytes_per_token() == {"full": 2 * 1 * 64 * 2 * 32.0}


def test_deepseek_v2_lite_shape_without_q_lora():
    cfg = {"model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27, "num_attention_heads": 16,
           "num_key_value_heads": 16, "vocab_size": 102400, "max_position_embeddings": 163840,
           "intermediate_size": 10944, "moe_intermediate_size": 1408, "q_lora_rank": None, "kv_lora_rank": 512,
           "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 64,
           "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1, "topk_method": "greedy"}
    spec = ModelSpec.from_hf_config(cfg)
    # MLA cache: (512 + 64) * 2 B * 27 layers = 31,104 B per token
    assert spec.kv_cache_bytes_per_token() == {"full": 31_104.0}
    assert spec.mla.q_lora_rank is None and spec.num_moe_layers == 26
    # published: 15.7B total, 2.4B activated (DeepSeek-V2-Lite model card); the activated figure
    # matches with the input embedding (102400 x 2048 = 0.21B) left out, as gpt-oss counts it
    assert abs(spec.total_params - 15.7e9) <= 0.015 * 15.7e9 + 0.05e9
    active_without_embedding = spec.active_params - spec.param_counts.embedding
    assert abs(active_without_embedding - 2.4e9) <= 0.015 * 2.4e9 + 0.05e9


def test_llama4_explicit_empty_moe_layers_means_dense(data_dir):
    cfg = json.loads((data_dir / "hf-configs" / "meta-llama--Llama-4-Scout-17B-16E-Instruct.json").read_text())
    cfg["text_config"]["moe_layers"] = []
    spec = ModelSpec.from_hf_config(cfg)
    assert spec.num_moe_layers == 0


def test_gemma3_config_without_vocab_uses_transformers_defaults():
    text = {"model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504,
            "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16, "head_dim": 128,
            "sliding_window": 1024}
    spec = ModelSpec.from_hf_config({"model_type": "gemma3", "text_config": text})
    assert spec.vocab_size == 262_208 and spec.max_position_embeddings == 131_072
    no_head_dim = {k: v for k, v in text.items() if k != "head_dim"}
    assert ModelSpec.from_hf_config(no_head_dim).head_dim == 256  # Gemma3TextConfig default, not 5376/32


@pytest.mark.parametrize(
    "qc, fmt",
    [
        ({"quant_method": "gptq", "bits": 4}, ("int4", "bf16")),
        ({"quant_method": "awq", "bits": 8}, ("int8", "bf16")),
        ({"quant_method": "fp8"}, ("fp8", "fp8")),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, ("fp8_block", "fp8")),
        ({"quant_method": "compressed-tensors"}, None),  # no quantization group: not guessed
        # compressed-tensors groups (vllm-project/compressed-tensors QuantizationConfig)
        ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
            "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32},
            "input_activations": None}}}, ("int4_g32", "bf16")),  # a BF16 scale per 32 weights: 4.5 bits
        ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
            "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128},
            "input_activations": None}}}, ("int4", "bf16")),
        ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
            "weights": {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]},
            "input_activations": {"num_bits": 8, "type": "float", "dynamic": True}}}}, ("fp8_block", "fp8")),
        ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "float"}}}}, ("fp8", "fp8")),
        ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
            "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "int"}}}}, ("int8", "int8")),
        ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
            "weights": {"num_bits": 4, "type": "float", "group_size": 16},
            "input_activations": {"num_bits": 4, "type": "float", "group_size": 16}}}}, ("nvfp4", "nvfp4")),
        ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
            "weights": {"num_bits": 2, "type": "int"}}}}, None),  # a width with no format here
        ({"quant_method": "bitsandbytes"}, None),
    ],
)
def test_quantization_config_formats(data_dir, qc, fmt):
    cfg = json.loads((data_dir / "hf-configs" / "Qwen--Qwen3-8B.json").read_text())
    checkpoint = ModelSpec.from_hf_config({**cfg, "quantization_config": qc}).checkpoint
    if fmt is None:  # unknown recipes stay BF16 and the source says so
        assert (checkpoint.weights, checkpoint.activations) == ("bf16", "bf16")
        assert "not read" in checkpoint.source
    else:
        assert (checkpoint.weights, checkpoint.activations) == fmt


def test_missing_field_message_is_not_reworded():
    cfg = {**FALCON_7B, "new_decoder_architecture": True}
    cfg.pop("hidden_size")
    with pytest.raises(SpecError) as info:
        ModelSpec.from_hf_config(cfg)
    assert "needs field 'hidden_size'" in str(info.value) and "unexpected shape" not in str(info.value)


def test_paligemma_wraps_a_gemma_decoder_by_hand():
    """PaliGemma 3B's config.json states its Gemma 2B decoder under text_config (2048 wide, 18
    layers, 8 heads of 256 with one KV head, MLP 16384, vocab 257216); head_dim 256 is
    transformers' GemmaConfig default. Parameters by hand, embeddings tied:
    embedding 257,216 x 2048 = 526,778,368; per layer q and o 2 x 2048 x 2048 = 8,388,608, k and
    v 2 x 2048 x 256 = 1,048,576, gated MLP 3 x 2048 x 16384 = 100,663,296, two norms 4,096:
    110,104,576; x 18 = 1,981,882,368; final norm 2048: 2,508,662,784 in all."""
    cfg = {"model_type": "paligemma", "hidden_size": 2048, "projection_dim": 2048,
           "text_config": {"model_type": "gemma", "hidden_size": 2048, "intermediate_size": 16384,
                           "num_attention_heads": 8, "num_hidden_layers": 18, "num_key_value_heads": 1,
                           "vocab_size": 257216}}
    m = ModelSpec.from_hf_config(cfg, id="paligemma")
    assert (m.head_dim, m.num_key_value_heads, m.hidden_act, m.tie_word_embeddings) == (256, 1, "gelu_pytorch_tanh", True)
    assert m.param_counts.total == 2_508_662_784
    with pytest.raises(SpecError, match="text_config"):
        ModelSpec.from_hf_config({"model_type": "paligemma", "projection_dim": 2048})


def test_compressed_tensors_routed_experts_only(data_dir):
    """Kimi-K2.5's layout: INT4 groups over the linear layers, attention and the shared experts
    in the ignore list: the routed experts are INT4, everything else BF16 (as gpt-oss's MXFP4)."""
    cfg = json.loads((data_dir / "hf-configs" / "moonshotai--Kimi-K2-Instruct.json").read_text())
    qc = {"quant_method": "compressed-tensors", "format": "pack-quantized",
          "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                                        "weights": {"num_bits": 4, "type": "int", "group_size": 32}}},
          "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"]}
    checkpoint = ModelSpec.from_hf_config({**cfg, "quantization_config": qc}).checkpoint
    assert (checkpoint.weights, checkpoint.moe_weights, checkpoint.activations) == ("bf16", "int4_g32", "bf16")
    with pytest.raises(SpecError, match="ignore"):
        ModelSpec.from_hf_config({**cfg, "quantization_config": {**qc, "ignore": "lm_head"}})


def test_a_yarn_rope_scaling_extends_the_positions(data_dir):
    """Qwen's model cards extend Qwen3 with YaRN by adding rope_scaling {rope_type: yarn, factor 4,
    original_max_position_embeddings 32,768} to config.json: 4 x 32,768 = 131,072 positions,
    although max_position_embeddings stays 40,960 (a 100,000-token prompt had been refused as
    past the trained length). Llama 3's llama3 scaling states its long length already."""
    cfg = json.loads((data_dir / "hf-configs" / "Qwen--Qwen3-8B.json").read_text())
    assert ModelSpec.from_hf_config(cfg).max_position_embeddings == 40_960
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32_768}
    assert ModelSpec.from_hf_config(cfg).max_position_embeddings == 131_072
    llama = json.loads((data_dir / "hf-configs" / "meta-llama--Meta-Llama-3.1-8B.json").read_text())
    assert ModelSpec.from_hf_config(llama).max_position_embeddings == 131_072  # factor 8 of 8,192: as stated
    cfg["rope_scaling"] = {"type": "linear", "factor": 8.0}  # no original length: as stated (Gemma 3's)
    assert ModelSpec.from_hf_config(cfg).max_position_embeddings == 40_960
    cfg["rope_scaling"] = {"type": "yarn", "factor": "4", "original_max_position_embeddings": 32_768}
    with pytest.raises(SpecError, match=r"rope_scaling.factor' must be a number in \[1, 1024\], got '4'"):
        ModelSpec.from_hf_config(cfg)
