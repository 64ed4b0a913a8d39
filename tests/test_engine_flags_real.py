"""Launch commands and checkpoint names as published (engine docs, recipes, Hugging Face), read with
hand-written expectations from the engines' own sources."""

from __future__ import annotations

from inferlab.engines import parse_engine_args

SGLANG = "python3 -m sglang.launch_server --trust-remote-code"


def test_sglang_eagle_on_deepseek_without_a_draft_path_is_its_own_mtp():
    """SGLang's DeepSeek guide launches ``--speculative-algorithm EAGLE`` (or NEXTN) with no draft
    path; server_args then sets ``speculative_draft_model_path = model_path`` for a
    DeepseekV3ForCausalLM ("Auto set draft_model_path DeepSeek-V3/R1"): the drafts come from the
    model's NextN (MTP) layer, not an EAGLE head. k: a chain's num_draft_tokens - 1 = 3."""
    launch = parse_engine_args(f"{SGLANG} --model-path deepseek-ai/DeepSeek-V3-0324 --tp 8 --speculative-algorithm EAGLE "
                               "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4")
    assert (launch.speculation.method, launch.speculation.k) == ("mtp", 3)
    assert any("multi-token prediction" in n for n in launch.notes)
    # a dense model without MTP layers keeps its EAGLE head
    llama = parse_engine_args(f"{SGLANG} --model-path meta-llama/Llama-3.1-8B-Instruct --speculative-algorithm EAGLE "
                              "--speculative-draft-model-path lmsys/sglang-EAGLE-LLaMA3-Instruct-8B "
                              "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4")
    assert llama.speculation.method == "eagle"


def test_sglang_enable_deepep_moe_spreads_the_experts_over_the_tp_gpus():
    """SGLang 0.4.x server_args: ``if self.enable_deepep_moe: ... self.ep_size = self.tp_size``;
    later releases map the deprecated flag to ``--moe-a2a-backend deepep``, which sets the same.
    A two-node DeepSeek launch of the 0.4 era: 16 GPUs, experts over all 16."""
    launch = parse_engine_args(f"{SGLANG} --model-path deepseek-ai/DeepSeek-V3-0324 --tp 16 --dist-init-addr 10.0.0.1:5000 "
                               "--nnodes 2 --node-rank 0 --enable-deepep-moe --deepep-mode auto")
    assert (launch.tp, launch.ep) == (16, 16)
    assert "--enable-deepep-moe" not in " ".join(launch.unknown)


def test_published_quantized_and_revised_checkpoint_names_resolve():
    """Hugging Face names as published: Red Hat's ``-quantized.w8a8`` ("quantizing the weights and
    activations ... to INT8", its model card) and ``-quantized.w4a16`` (INT4 GPTQ weights);
    NVIDIA's ``DeepSeek-R1-0528-FP4-v2`` (an NVFP4 DeepseekV3ForCausalLM, re-quantized: "-v2");
    Qwen's ``-Thinking-2507`` (the Instruct-2507 architecture, a reasoning fine-tune)."""
    w8a8 = parse_engine_args("vllm serve RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8")
    assert (w8a8.model, w8a8.weights, w8a8.activations) == ("llama-3.1-8b", "int8", "int8")
    w4a16 = parse_engine_args("vllm serve RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16")
    assert (w4a16.model, w4a16.weights) == ("llama-3.1-8b", "int4")
    fp4 = parse_engine_args("trtllm-serve nvidia/DeepSeek-R1-0528-FP4-v2 --tp_size 8 --ep_size 8")
    assert (fp4.model, fp4.weights, fp4.checkpoint) == ("deepseek-v3", "nvfp4", "nvidia/DeepSeek-R1-0528-FP4-v2")
    thinking = parse_engine_args("vllm serve Qwen/Qwen3-235B-A22B-Thinking-2507-FP8 -tp 4 --enable-expert-parallel")
    assert (thinking.model, thinking.weights) == ("qwen3-235b-a22b", "fp8")


def test_vllm_config_yaml_of_the_gpt_oss_recipe_is_read():
    """vLLM's gpt-oss recipe launches ``vllm serve openai/gpt-oss-120b --config GPT-OSS_Hopper.yaml``
    (the YAML below, as the recipe prints it). vLLM's docs (Server Arguments, "Configuration
    file"): the keys are the long flags, and "command line > config file values > defaults"."""
    launch = parse_engine_args(
        "cat > GPT-OSS_Hopper.yaml <<'EOF'\n"
        "compilation-config: '{\"cudagraph_mode\":\"PIECEWISE\"}'\n"
        "async-scheduling: true\n"
        "no-enable-prefix-caching: true\n"
        "cuda-graph-sizes: 2048\n"
        "max-num-batched-tokens: 8192\n"
        "max-model-len: 10240\n"
        "EOF\n"
        "vllm serve openai/gpt-oss-120b --config GPT-OSS_Hopper.yaml --tensor-parallel-size 2 --max-num-seqs 512")
    assert (launch.model, launch.tp, launch.max_num_seqs) == ("gpt-oss-120b", 2, 512)
    assert (launch.max_num_batched_tokens, launch.max_model_len, launch.prefix_caching) == (8192, 10240, False)
    assert "--config GPT-OSS_Hopper.yaml" not in launch.unknown
    # the command line wins over the file, the positional model over its model:
    override = parse_engine_args("cat > c.yaml <<'EOF'\nmodel: meta-llama/Llama-3.1-70B-Instruct\nmax-num-seqs: 64\n"
                                 "EOF\nvllm serve meta-llama/Llama-3.1-8B-Instruct --config c.yaml --max-num-seqs 128")
    assert (override.model, override.max_num_seqs) == ("llama-3.1-8b", 128)


def test_logging_and_detokenizer_workers_are_harmless_not_unknown():
    """SGLang's ``--log-requests-level`` sets how much of each request is logged; TensorRT-LLM's
    gpt-oss guide puts ``num_postprocess_workers: 4`` in the options YAML (the LLM-API field behind
    ``--num_postprocess_workers``, detokenizer processes): neither changes a step's time."""
    sglang = parse_engine_args(f"{SGLANG} --model-path meta-llama/Llama-3.1-8B-Instruct --log-requests-level 1")
    assert sglang.unknown == () and "--log-requests-level" in sglang.no_effect
    trt = parse_engine_args("cat > o.yml <<'EOF'\nnum_postprocess_workers: 4\nEOF\n"
                            "trtllm-serve openai/gpt-oss-120b --tp_size 8 --ep_size 8 --extra_llm_api_options o.yml")
    assert trt.unknown == () and any("num_postprocess_workers" in n for n in trt.no_effect)
