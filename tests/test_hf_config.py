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
    assert folder.checkpoint_format == "fp8"
    assert folder.checkpoint_kv_format == "fp8"
    # 70,553,706,496 params at 1 byte each (per-tensor scales are negligible)
    assert folder.weight_bytes(folder.checkpoint_format) == pytest.approx(70_553_706_496)


def test_kimi_k2_reads_as_deepseek_v3(data_dir):
    cfg = json.loads((data_dir / "hf-configs" / "deepseek-ai--DeepSeek-V3.json").read_text())
    cfg["model_type"] = "kimi_k2"
    spec = ModelSpec.from_hf_config(cfg)
    assert spec.attention_type == "MLA" and spec.moe.num_experts == 256


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
