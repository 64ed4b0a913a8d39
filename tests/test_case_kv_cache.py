"""A case's KV cache where the case does not state it: the engine's, for the checkpoint such a run
loads (``validation.case_setup.unstated_kv_cache``).

Expected formats by hand from the engines' documented defaults: TensorRT-LLM follows the
checkpoint's ``kv_cache_quant_algo`` (FP8 in its FP8 and FP4 checkpoints); vLLM and SGLang keep
``--kv-cache-dtype auto``, the checkpoint's KV format: FP8 for a quantizer's checkpoint
(NVIDIA's ModelOpt ``hf_quant_config.json``, as ``nvidia/Llama-3.1-70B-Instruct-FP8`` in the
shared reference configs: ``"kv_cache_quant_algo": "FP8"``), 16-bit for a makers' FP8 release
(DeepSeek-V3's ``quantization_config`` names no KV format).
"""

from __future__ import annotations

import pytest

from inferlab.validation.cases import Case, case_precision
from inferlab.validation.predict import predict_case

BASE = {
    "id": "kv", "regime": "closed_loop", "model": "llama-3.1-70b", "hardware": "h200-sxm", "num_gpus": 8,
    "parallelism": {"tp": 8, "pp": 1, "ep": 1, "dp": 1, "attention_dp": False},
    "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": None}, "engine": "vllm",
    "isl": 1024, "osl": 1024, "load": {"concurrency": 8}, "speculative": None, "metric": "tpot_ms", "measured": 10.0,
}


def case(**changes) -> Case:
    return Case(**{**BASE, **changes})


@pytest.mark.parametrize("engine, model, weights, kv", [
    ("trtllm", "llama-3.1-70b", "fp8", "fp8"),        # a ModelOpt checkpoint's FP8 cache
    ("trtllm", "deepseek-v3", "fp8", "fp8"),          # TensorRT-LLM's rule whatever the checkpoint
    ("vllm", "llama-3.1-70b", "fp8", "fp8"),          # Meta ships BF16: an FP8 run loads a quantizer's checkpoint
    ("vllm", "llama-3.1-70b", "nvfp4", "fp8"),
    ("sglang", "deepseek-v3", "fp8", None),           # DeepSeek's own FP8 release: no KV format, BF16
    ("sglang", "deepseek-v3", "nvfp4", "fp8"),        # NVIDIA's NVFP4 checkpoint
    ("vllm", "minimax-m2.5", "fp8", None),            # MiniMax's own FP8 release
])
def test_an_unstated_kv_cache_is_the_engines_for_the_checkpoint(engine, model, weights, kv):
    c = case(engine=engine, model=model, precision={"weights": weights, "activations": weights, "kv_cache": None})
    assert case_precision(c).get("kv_cache") == kv


def test_sixteen_bit_activations_keep_a_sixteen_bit_cache():
    trt = case(engine="trtllm", precision={"weights": "bf16", "activations": "bf16", "kv_cache": None})
    assert case_precision(trt)["kv_cache"] == "bf16"
    vllm = case(precision={"weights": "bf16", "activations": "bf16", "kv_cache": None})
    assert "kv_cache" not in case_precision(vllm)  # the checkpoint's: Llama's BF16


def test_a_stated_kv_cache_is_kept():
    c = case(model="deepseek-v3", engine="sglang", precision={"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"})
    assert case_precision(c)["kv_cache"] == "fp8"


def test_a_makers_fp8_release_decodes_slower_with_its_sixteen_bit_cache_than_with_fp8():
    """DeepSeek-V3 FP8 under SGLang at 64 clients: the checkpoint's BF16 latent cache (576 values a
    token a layer, 70,272 B a token) is read at every decode step, twice FP8's bytes, so the
    predicted TPOT with the cache unstated lies above the same case with an FP8 cache stated."""
    common = dict(model="deepseek-v3", engine="sglang", hardware="h200-sxm", load={"concurrency": 64})
    unstated, _ = predict_case(case(**common))
    fp8, _ = predict_case(case(**common, precision={"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}))
    assert unstated > fp8


@pytest.mark.parametrize("engine, precision, kv", [
    # NVIDIA's FP4 experts beside DeepSeek's FP8 attention: a ModelOpt checkpoint, its FP8 cache
    ("sglang", {"weights": "fp8", "moe_weights": "nvfp4", "activations": "fp8"}, "fp8"),
    # an INT8 W8A8 checkpoint (llm-compressor's) names no KV format
    ("vllm", {"weights": "int8", "activations": "int8"}, None),
    # MXFP8 activations (8.25 bits a value) are 8-bit ones: TensorRT-LLM's FP8 cache
    ("trtllm", {"weights": "mxfp8", "activations": "mxfp8"}, "fp8"),
])
def test_the_checkpoints_formats_decide(engine, precision, kv):
    c = case(engine=engine, model="deepseek-v3", precision={**precision, "kv_cache": None})
    assert case_precision(c).get("kv_cache") == kv


def test_a_model_the_catalog_does_not_know_is_its_cases_reason_not_a_crash():
    c = case(model="no-such-model")
    predicted, reason = predict_case(c)
    assert predicted is None and "no-such-model" in reason
