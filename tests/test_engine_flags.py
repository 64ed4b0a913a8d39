"""Engine launch flags read (each engine's own spellings, hand-written expectations) and written back (round trips)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines import EngineLaunch, Speculation, launch_command, launch_from_deployment, parse_engine_args
from inferlab import estimate
from inferlab.errors import SpecError
from inferlab.engines.scheduler import default_scheduler


def test_vllm_real_spellings():
    launch = parse_engine_args(
        "env CUDA_VISIBLE_DEVICES=0,1,2,3 VLLM_USE_V1=1 vllm serve meta-llama/Llama-3.1-70B-Instruct \\\n"
        "  --tensor-parallel-size 4 --max-num-seqs 128 --max_num_batched_tokens 4096 --no-enable-chunked-prefill \\\n"
        "  --kv-cache-dtype fp8_e4m3 --quantization fp8 --gpu-memory-utilization=0.85 --block-size 32 \\\n"
        "  --max-model-len 16384 --no-enable-prefix-caching --host 0.0.0.0 --port 8000 --served-model-name m \\\n"
        "  --speculative-config '{\"method\": \"eagle3\", \"model\": \"yuhuili/EAGLE3-LLaMA3.3-Instruct-70B\", "
        "\"num_speculative_tokens\": 3}' --swap-space 4 --enforce-eager")
    assert launch.modelled() == dict(
        model="llama-3.1-70b", checkpoint="meta-llama/Llama-3.1-70B-Instruct", tp=4, pp=1, ep=1, dp=1,
        attention_dp=False, attention_tp=1, weights="fp8", activations="fp8", kv_cache="fp8", state=None, dtype=None,
        max_num_seqs=128,
        max_num_batched_tokens=4096, max_prefill_tokens=None, chunked_prefill=False, mixed_prefill=None, gpu_memory_utilization=0.85,
        kv_block_size=32, max_model_len=16384, prefix_caching=False, graph_max_batch=None, prefill_graph_tokens=None, reserve_output=None,
        overlap_host=None, balance_timeout_iters=None, state_pool_ratio=None, state_pool_slots=None, state_slots=None, hybrid_overlap=None,
        window_kv=None, window_pool_ratio=None, speculation=Speculation("eagle", 3, drafter="yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"))
    assert launch.engine == "vllm" and launch.precision == "fp8"  # FP8 weights, activations and KV: the fp8 preset
    assert launch.unknown == ("--swap-space 4",)
    assert any(n.startswith("--enforce-eager: vLLM's host time per kernel") for n in launch.notes)  # read, not modelled
    assert launch.no_effect == ("--host", "--port", "--served-model-name")


def test_vllm_moe_data_parallel_is_attention_dp_with_experts_over_all_gpus():
    # vLLM docs: -dp on a MoE model = attention DP, experts over dp x tp GPUs (EP with the flag)
    launch = parse_engine_args("vllm serve deepseek-ai/DeepSeek-V3 -dp 8 --enable-expert-parallel")
    assert (launch.tp, launch.ep, launch.dp, launch.attention_dp) == (8, 8, 1, True)
    dense = parse_engine_args("vllm serve meta-llama/Llama-3.1-8B -dp 2 --enable-expert-parallel")
    assert (dense.tp, dense.ep, dense.dp, dense.attention_dp) == (1, 1, 2, False)
    assert "--enable-expert-parallel" in dense.no_effect  # no experts to spread


def test_sglang_real_spellings():
    launch = parse_engine_args(
        "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention "
        "--ep-size 8 --chunked-prefill-size 4096 --max-running-requests 512 --mem-fraction-static 0.8 "
        "--kv-cache-dtype fp8_e5m2 --speculative-algorithm NEXTN --speculative-num-steps 2 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3 --disable-radix-cache --page-size 64 "
        "--trust-remote-code --port 30000 --cuda-graph-max-bs 256")
    assert launch.modelled() == dict(
        model="deepseek-v3", checkpoint="deepseek-ai/DeepSeek-V3", tp=8, pp=1, ep=8, dp=1, attention_dp=True, attention_tp=1,
        weights=None, activations=None, kv_cache="fp8", dtype=None, max_num_seqs=512, max_num_batched_tokens=4096, max_prefill_tokens=None,
        chunked_prefill=True, mixed_prefill=None, gpu_memory_utilization=0.8, kv_block_size=64, max_model_len=None,
        prefix_caching=False, graph_max_batch=256, prefill_graph_tokens=None, reserve_output=None, overlap_host=None, balance_timeout_iters=None, state_pool_ratio=None, state_pool_slots=None, state_slots=None, hybrid_overlap=None, state=None,
        window_kv=None, window_pool_ratio=None, speculation=Speculation("mtp", 2))
    assert launch.engine == "sglang" and launch.precision == "kv:fp8"
    assert launch.unknown == () and launch.no_effect == ("--trust-remote-code", "--port")


def test_sglang_no_chunking_and_replicas():
    launch = parse_engine_args("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp-size 2 --dp-size 3 "
                               "--chunked-prefill-size -1 --max-prefill-tokens 16384")
    assert (launch.tp, launch.dp, launch.chunked_prefill, launch.max_num_batched_tokens) == (2, 3, False, 16384)


def test_trtllm_flags_and_extra_options_heredoc():
    launch = parse_engine_args("""cat > opts.yml <<'EOF'
enable_attention_dp: true
enable_chunked_prefill: true
kv_cache_config:
  dtype: fp8
  free_gpu_memory_fraction: 0.75
  enable_block_reuse: false
speculative_config:
  decoding_type: MTP
  num_nextn_predict_layers: 3
print_iter_log: true
cuda_graph_config: {max_batch_size: 128}
scheduler_config: {capacity_scheduler_policy: MAX_UTILIZATION}
EOF
trtllm-serve deepseek-ai/DeepSeek-V3 --backend pytorch --tp_size 8 --ep_size 8 --max_batch_size 128 \\
  --max_num_tokens 3072 --kv_cache_free_gpu_memory_fraction 0.9 --extra_llm_api_options opts.yml --host 0.0.0.0
""")
    assert launch.modelled() == dict(
        model="deepseek-v3", checkpoint="deepseek-ai/DeepSeek-V3", tp=8, pp=1, ep=8, dp=1, attention_dp=True, attention_tp=1,
        weights=None, activations=None, kv_cache="fp8", dtype=None, max_num_seqs=128, max_num_batched_tokens=3072, max_prefill_tokens=None,
        chunked_prefill=True, mixed_prefill=None, gpu_memory_utilization=0.75, kv_block_size=None, max_model_len=None,
        prefix_caching=False, graph_max_batch=128, prefill_graph_tokens=None, reserve_output=False, overlap_host=None, balance_timeout_iters=0, state_pool_ratio=None, state_pool_slots=None, state_slots=None, hybrid_overlap=None, state=None,
        window_kv=None, window_pool_ratio=None, speculation=Speculation("mtp", 3))
    assert launch.engine == "trtllm-pytorch"
    assert launch.unknown == ()
    assert launch.no_effect == ("--host", "--extra_llm_api_options: print_iter_log")
    assert any("0.75" in n and "wins" in n for n in launch.notes)  # the YAML over the flag, said


def test_trtllm_cuda_graph_config_is_the_largest_graphed_decode_batch():
    """The largest of ``batch_sizes``, else ``max_batch_size``, else TensorRT-LLM's documented
    default of 128 (DecodeCudaGraphConfig); ``null`` turns graphs off; the legacy TensorRT backend
    has no such option."""
    def limit(options: str, backend: str = "pytorch"):
        return parse_engine_args(f"cat > o.yml <<'EOF'\n{options}\nEOF\ntrtllm-serve meta-llama/Llama-3.1-8B-Instruct "
                                 f"--backend {backend} --extra_llm_api_options o.yml")
    assert limit("cuda_graph_config: {enable_padding: true, batch_sizes: [1, 8, 64, 32]}").graph_max_batch == 64
    assert limit("cuda_graph_config: {max_batch_size: 256}").graph_max_batch == 256
    assert limit("cuda_graph_config: {}").graph_max_batch == 128
    assert limit("cuda_graph_config: null").graph_max_batch == 0
    sparse = limit("cuda_graph_config: {batch_sizes: [1, 2, 4]}")
    assert sparse.graph_max_batch == 4 and any("enable_padding" in n for n in sparse.notes)
    legacy = limit("cuda_graph_config: {max_batch_size: 64}", backend="tensorrt")
    assert legacy.graph_max_batch is None and legacy.unknown
    with pytest.raises(SpecError, match="batch_sizes"):
        limit("cuda_graph_config: {batch_sizes: [0, 8]}")
    with pytest.raises(SpecError, match="not the largest of batch_sizes"):
        limit("cuda_graph_config: {batch_sizes: [1, 2, 4], max_batch_size: 256}")
    assert limit("cuda_graph_config: {batch_sizes: []}").graph_max_batch == 128  # empty: unset
    # the engine's default is the same limit: no options and an empty cuda_graph_config agree
    from inferlab.engines.scheduler import default_scheduler
    assert default_scheduler("trtllm-pytorch").graph_max_batch == 128
    # written back: padded graphs up to the limit, or none
    assert "max_batch_size: 64" in launch_command(limit("cuda_graph_config: {max_batch_size: 64}")).script
    assert "cuda_graph_config: null" in launch_command(limit("cuda_graph_config: null")).script
    # a decode batch beyond the graphs runs eagerly: slower at a small batch, where the host's issue is the longer
    graphed = estimate(hardware="h100-sxm", batch_size=8, **limit("cuda_graph_config: {max_batch_size: 64}").to_kwargs())
    eager = estimate(hardware="h100-sxm", batch_size=8, **limit("cuda_graph_config: null").to_kwargs())
    assert float(eager.tpot_s) > float(graphed.tpot_s)


def test_trtllm_reads_the_options_file_from_disk(tmp_path):
    path = tmp_path / "o.yaml"
    path.write_text("quant_config: {quant_algo: NVFP4}\n")
    launch = parse_engine_args(f"trtllm-serve meta-llama/Llama-3.1-8B --extra_llm_api_options {path}")
    assert (launch.weights, launch.activations, launch.precision) == ("nvfp4", "nvfp4", "w:nvfp4 a:nvfp4")
    path.write_bytes(b"quant_config: \xff\n")  # not UTF-8: one SpecError (it had been a bare UnicodeDecodeError)
    with pytest.raises(SpecError, match=r"--extra_llm_api_options .*o.yaml: not UTF-8 text \(byte 14\)"):
        parse_engine_args(f"trtllm-serve meta-llama/Llama-3.1-8B --extra_llm_api_options {path}")


@pytest.mark.parametrize("command, words", [
    ("vllm serve meta-llama/Llama-3.1-8B --gpu-memory-utilization 1.5", ["--gpu-memory-utilization", "'1.5'", "(0, 1]"]),
    ("vllm serve meta-llama/Llama-3.1-8B -tp two", ["-tp", "'two'", "whole number"]),
    ("vllm serve meta-llama/Llama-3.1-8B --quantization hqq", ["--quantization", "'hqq'", "allowed: fp8"]),
    ("vllm serve meta-llama/Llama-3.1-8B --speculative-config {bad", ["--speculative-config", "not JSON"]),
    # a config without a method had said "method '' is not one inferlab models"
    ("vllm serve meta-llama/Llama-3.1-8B --speculative-config '{\"num_speculative_tokens\": 3}'",
     ["--speculative-config method is missing; give one of eagle"]),
    ("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --kv-cache-dtype int8", ["--kv-cache-dtype", "allowed"]),
    ("trtllm-serve meta-llama/Llama-3.1-8B --extra_llm_api_options /no/such.yml", ["cannot read", "here-document"]),
    ("vllm serve meta-llama/Llama-3.1-9B", ["not a catalog model", "did you mean"]),
    ("llama-server -m x.gguf", ["cannot tell the engine", "vllm serve"]),
    ("vllm serve 'unclosed", ["quotes"]),
])
def test_bad_values_are_one_line(command, words):
    with pytest.raises(SpecError) as err:
        parse_engine_args(command)
    message = str(err.value)
    assert "\n" not in message and all(w in message for w in words), message


def test_fine_tune_suffix_maps_to_its_base_with_a_note():
    launch = parse_engine_args("vllm serve Qwen/Qwen3-8B-Instruct")
    assert launch.model == "qwen3-8b" and "fine-tune" in launch.notes[0]


def test_speculation_needs_an_acceptance_that_agrees():
    launch = parse_engine_args('vllm serve meta-llama/Llama-3.1-8B --speculative-config '
                               '\'{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3}\'')
    assert launch.speculation == Speculation("ngram", 4)
    assert launch.no_effect == ("--speculative-config.prompt_lookup_max",)
    with pytest.raises(SpecError, match="no acceptance rate"):
        launch.to_kwargs()
    assert launch.to_kwargs(speculative="ngram:k=4,accept=0.5")["speculative"].acceptance == 0.5
    with pytest.raises(SpecError, match="contradicts"):
        launch.to_kwargs(speculative="eagle:k=4,accept=0.5")


def test_to_kwargs_per_target_and_contradictions():
    launch = parse_engine_args("vllm serve meta-llama/Llama-3.1-8B -tp 2 --max-num-seqs 64 "
                               "--max-num-batched-tokens 2048 --kv-cache-dtype fp8")
    assert launch.to_kwargs("estimate") == dict(model="llama-3.1-8b", engine="vllm", tp=2, pp=1, ep=1, dp=1,
                                                attention_dp=False, precision="kv:fp8", max_num_tokens=2048,
                                                max_num_seqs=64)  # a static batch runs in waves of it
    serve = launch.to_kwargs("serve")
    assert serve["max_num_seqs"] == 64 and serve["max_num_batched_tokens"] == 2048 and "max_num_tokens" not in serve
    assert launch.merged({"tp": 2, "precision": "kv:fp8", "isl": 10})["isl"] == 10  # agreeing options pass
    for clash in ({"tp": 4}, {"engine": "sglang"}, {"precision": "fp8"}, {"model": "llama-3.1-70b"}):
        with pytest.raises(SpecError, match="contradicts the engine args"):
            launch.merged(clash)


# --- flags out, and round trips ------------------------------------------------------------------

_FORMATS = st.sampled_from([(None, None), ("fp8", "fp8"), ("nvfp4", "nvfp4"), ("int4", "bf16")])
_SPECS = st.one_of(st.none(), st.builds(Speculation, st.sampled_from(["eagle", "mtp", "ngram"]), st.integers(1, 7)),
                   st.builds(lambda k: Speculation("draft", k, draft_model="llama-3.1-8b"), st.integers(1, 7)))


@st.composite
def deployments(draw):
    model = draw(st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b"]))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    moe = model == "qwen3-30b-a3b"
    attention_dp = moe and tp > 1 and draw(st.booleans())
    ep = draw(st.sampled_from([1, tp])) if moe else 1
    w, a = draw(_FORMATS)

    def opt(strategy):
        return draw(st.one_of(st.none(), strategy))

    return EngineLaunch(engine="vllm", model=model, tp=tp, pp=draw(st.sampled_from([1, 2])), ep=ep,
                        dp=draw(st.sampled_from([1, 2])), attention_dp=attention_dp,
                        weights=w, activations=a, kv_cache=opt(st.just("fp8")), dtype=opt(st.just("bf16")),
                        max_num_seqs=opt(st.integers(1, 4096)), max_num_batched_tokens=opt(st.integers(64, 65536)),
                        max_prefill_tokens=opt(st.integers(64, 65536)), chunked_prefill=opt(st.booleans()),
                        mixed_prefill=opt(st.booleans()), graph_max_batch=opt(st.integers(0, 1024)),
                        prefill_graph_tokens=opt(st.integers(1, 16384)),
                        gpu_memory_utilization=opt(st.sampled_from([0.5, 0.85, 0.9])),
                        kv_block_size=opt(st.sampled_from([16, 32, 64])), max_model_len=opt(st.integers(256, 131072)),
                        prefix_caching=opt(st.booleans()), reserve_output=opt(st.booleans()),
                        overlap_host=opt(st.booleans()), speculation=draw(_SPECS))


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm-pytorch"])
@settings(max_examples=60, deadline=None)
@given(launch=deployments())
def test_round_trip_is_identity_on_what_the_engine_expresses(engine, launch):
    rendered = launch_command(launch, engine)
    back = parse_engine_args(rendered.script)
    unsaid = {field for field, _ in rendered.unexpressed}
    if "weights" in unsaid:
        unsaid |= {"activations"}
    want, got = launch.modelled(), back.modelled()
    want["checkpoint"] = got["checkpoint"]  # the catalog card's repository is written
    # under attention DP, vLLM's limits are each rank's and SGLang's the totals over the ranks
    source, target = default_scheduler(launch.engine).limits_per_rank, default_scheduler(engine).limits_per_rank
    if launch.attention_dp and launch.tp > 1 and source != target:
        for key in ("max_num_seqs", "max_num_batched_tokens"):
            if want[key] is not None:
                want[key] = want[key] * launch.tp if source else max(1, -(-want[key] // launch.tp))
    # the engine's own batching is written by saying nothing: vLLM and TensorRT-LLM always decode
    # in the iterations that prefill, SGLang not unless --enable-mixed-chunk
    if want["mixed_prefill"] == default_scheduler(engine).mixed_prefill:
        want["mixed_prefill"] = None
    # so is its overlap scheduling: off in vLLM, on in SGLang and TensorRT-LLM's PyTorch runtime
    if want["overlap_host"] == default_scheduler(engine).overlap_host:
        want["overlap_host"] = None
    # TensorRT-LLM's attention DP is written with the balancing the simulation runs by default (NVIDIA's
    # recipes'); without attention DP there is nothing to balance
    if engine == "trtllm-pytorch" and launch.attention_dp and want["balance_timeout_iters"] is None:
        want["balance_timeout_iters"] = default_scheduler(engine).balance_timeout_iters
    # an unset chunking is the source engine's default, written where the target's differs (TensorRT-LLM
    # prefills whole prompts unless enable_chunked_prefill says otherwise; the others chunk)
    # (vLLM, which without chunking needs a budget of its whole context, keeps its own chunking
    # for another engine's whole prompts)
    chunks = default_scheduler(launch.engine).chunked_prefill
    if want["chunked_prefill"] is None and chunks != default_scheduler(engine).chunked_prefill and engine != "vllm":
        want["chunked_prefill"] = chunks
    if engine == "vllm" and launch.engine != "vllm" and (want["chunked_prefill"] is False or
                                                         want["chunked_prefill"] is None and chunks is False):
        want["chunked_prefill"] = None
    # vLLM and SGLang admit on the prompt and preempt when the cache fills: said by saying nothing
    if want["reserve_output"] is False and engine in ("vllm", "sglang"):
        want["reserve_output"] = None
    assert {k: v for k, v in got.items() if k not in unsaid} == {k: v for k, v in want.items() if k not in unsaid}
    assert back.unknown == () and back.engine == engine
    for field in unsaid:
        assert f"cannot express {field}" in rendered.script  # said in the script, not dropped


@pytest.mark.parametrize("command", [
    "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 2 --max-num-seqs 64 --kv-cache-dtype fp8 --enable-chunked-prefill",
    "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention "
    "--ep-size 8 --chunked-prefill-size 4096 --speculative-algorithm NEXTN --speculative-num-steps 2 "
    "--speculative-num-draft-tokens 3",
    "trtllm-serve Qwen/Qwen3-30B-A3B --tp_size 4 --ep_size 4 --max_batch_size 256 --max_num_tokens 8192",
])
def test_in_out_in_is_identity(command):
    first = parse_engine_args(command)
    assert parse_engine_args(launch_command(first).script).modelled() == first.modelled()


def test_what_an_engine_cannot_express_is_said():
    launch = launch_from_deployment("qwen3-30b-a3b", tp=4, ep=2, dp=2, precision="fp8_block")
    for engine in ("vllm", "sglang", "trtllm-pytorch"):
        said = dict(launch_command(launch, engine).unexpressed)
        assert ("dp" in said) == (engine != "sglang")  # SGLang runs replicas with --dp
        assert ("weights" in said) == (engine != "trtllm-pytorch")  # only TRT-LLM names block-scaled FP8
    assert "ep" in dict(launch_command(launch, "vllm").unexpressed)  # 2 groups of 2 GPUs: vLLM has 1 or all


def test_launch_from_deployment_precision_kinds():
    launch = launch_from_deployment("llama-3.1-8b", precision="fp8 kv:bf16", speculative="eagle3-llama-3.1-8b")
    assert (launch.weights, launch.activations, launch.kv_cache) == ("fp8", "fp8", "bf16")
    assert launch.speculation == Speculation("eagle", 7)
    script = launch_command(launch, "vllm").script
    assert "--quantization fp8" in script and "--kv-cache-dtype bfloat16" in script and "DRAFTER_CHECKPOINT" in script


def test_sglang_max_prefill_tokens_with_chunking_is_a_prompt_limit():
    # with chunking, --max-prefill-tokens stops a prefill batch taking prompts (SGLang's
    # rem_input_tokens); without it, it is the whole-prompt budget
    launch = parse_engine_args("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                               "--chunked-prefill-size 8192 --max-prefill-tokens 2524")
    assert (launch.max_num_batched_tokens, launch.max_prefill_tokens, launch.chunked_prefill) == (8192, 2524, True)
    assert launch.to_kwargs("serve")["max_prefill_tokens"] == 2524
    written = launch_command(launch, "sglang")
    assert "--max-prefill-tokens 2524" in written.script
    assert parse_engine_args(written.script).modelled() == launch.modelled()
    for engine in ("vllm", "trtllm-pytorch"):
        assert "max_prefill_tokens" in dict(launch_command(launch, engine).unexpressed)


def test_a_deployments_prompt_limit_is_written_for_sglang():
    launch = launch_from_deployment("llama-3.1-8b", engine="sglang", max_num_batched_tokens=8192,
                                    chunked_prefill=True, max_prefill_tokens=4096)
    assert "--max-prefill-tokens 4096" in launch_command(launch, "sglang").script


def test_sglang_cuda_graph_flags():
    # --cuda-graph-max-bs: the largest decode batch run from a graph; --disable-cuda-graph: none
    big = parse_engine_args("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                            "--cuda-graph-max-bs 512")
    assert big.graph_max_batch == 512 and big.to_kwargs("serve")["graph_max_batch"] == 512
    assert "--cuda-graph-max-bs 512" in " ".join(launch_command(big, "sglang").script.split())
    assert big.to_kwargs("estimate")["graph_max_batch"] == 512 and big.report("estimate") == []  # both use it
    off = parse_engine_args("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                            "--disable-cuda-graph")
    assert off.graph_max_batch == 0 and off.unknown == ()
    assert off.to_kwargs("estimate")["graph_max_batch"] == 0 and off.report("estimate") == []
    assert "--disable-cuda-graph" in launch_command(off, "sglang").script
    assert "cannot express graph_max_batch" in launch_command(off, "vllm").script


def test_dtype_sets_the_weights_a_checkpoint_stores_in_16_bits():
    # vLLM's --dtype is "the data type for model weights and activations": a BF16 checkpoint under
    # --dtype float16 runs FP16 weights (same bytes); quantized weights keep their stored format,
    # as gpt-oss's MXFP4 experts do under --dtype bfloat16 (13 GB of weights, not 41 GB in BF16)
    fp16 = parse_engine_args("vllm serve meta-llama/Llama-3.1-8B-Instruct --dtype float16")
    assert fp16.precision == "w:fp16 a:fp16 kv:fp16"
    assert str(estimate("llama-3.1-8b", "h100-sxm", precision=fp16.precision).deployment.precision) == "fp16"
    oss = parse_engine_args("vllm serve openai/gpt-oss-20b --dtype bfloat16")
    assert oss.precision == "w:bf16 a:bf16 kv:bf16"
    shipped = estimate("gpt-oss-20b", "h100-sxm")
    flagged = estimate("gpt-oss-20b", "h100-sxm", precision=oss.precision)
    assert flagged.deployment.precision.experts == "mxfp4"
    assert flagged.memory.weights == shipped.memory.weights < 16e9
    quantized = parse_engine_args("vllm serve meta-llama/Llama-3.1-8B-Instruct --quantization fp8 --dtype float16")
    assert quantized.precision.startswith("w:fp8")


def test_sglang_long_layout_names_abbreviations_and_the_a2a_backend():
    """SGLang's server arguments take --tensor-parallel-size (and the dp/ep/pp long names) as
    aliases, unique prefixes of a flag (argparse), and an all-to-all MoE backend (DeepEP) sets
    the expert-parallel size to the tensor-parallel size (server_args' _handle_a2a_moe)."""
    base = "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3"
    long = parse_engine_args(f"{base} --tensor-parallel-size 8 --expert-parallel-size 8 --mem-fraction 0.8")
    assert (long.tp, long.ep, long.gpu_memory_utilization, long.unknown) == (8, 8, 0.8, ())
    deepep = parse_engine_args(f"{base} --tp 8 --dp 8 --enable-dp-attention --moe-a2a-backend deepep")
    assert (deepep.tp, deepep.ep, deepep.attention_dp) == (8, 8, True)
    with pytest.raises(SpecError, match="requires the tensor-parallel size to divide by the DP size"):
        parse_engine_args(f"{base} --tp 8 --dp 3 --enable-dp-attention")


def test_sglang_tree_drafting_is_its_depth():
    """SGLang's EAGLE-3 example drafts a tree 5 steps deep, top 8 per step, 32 nodes verified:
    a request gains at most 5 tokens a step (it had been read as k = 31)."""
    launch = parse_engine_args("python3 -m sglang.launch_server --model meta-llama/Llama-3.1-8B-Instruct "
                               "--speculative-algorithm EAGLE3 --speculative-draft-model-path "
                               "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B --speculative-num-steps 5 "
                               "--speculative-eagle-topk 8 --speculative-num-draft-tokens 32")
    assert launch.speculation.k == 5 and any("depth" in n for n in launch.notes)


def test_vllm_refuses_what_vllm_refuses_and_names_eager_mode():
    with pytest.raises(SpecError, match="--max-num-batched-tokens 64 is below --max-num-seqs 256: vLLM refuses"):
        parse_engine_args("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-batched-tokens 64 --max-num-seqs 256")
    eager = parse_engine_args("vllm serve meta-llama/Llama-3.1-8B-Instruct --enforce-eager")
    assert eager.unknown == () and any("--enforce-eager" in n for n in eager.notes)


def test_limits_are_converted_between_engines_that_count_them_differently():
    """Under attention DP, vLLM's --max-num-seqs and --max-num-batched-tokens are each DP rank's,
    SGLang's --max-running-requests and --chunked-prefill-size the totals it divides over its
    ranks (server_args' data-parallel handling): 64 and 2,048 on each of 4 ranks are 256 and
    8,192 in SGLang's terms (they had been copied, a quarter of the batch); back, a quarter.
    TensorRT-LLM's memory fraction (of what the weights leave) is said, not copied silently."""
    vllm_cmd = parse_engine_args("vllm serve Qwen/Qwen3-30B-A3B -dp 4 --enable-expert-parallel --max-num-seqs 64 "
                                 "--max-num-batched-tokens 2048")
    to_sglang = parse_engine_args(launch_command(vllm_cmd, "sglang").script)
    assert (to_sglang.max_num_seqs, to_sglang.max_num_batched_tokens) == (256, 8192)
    back = parse_engine_args(launch_command(to_sglang, "vllm").script)
    assert (back.max_num_seqs, back.max_num_batched_tokens) == (64, 2048)
    trt = parse_engine_args("trtllm-serve meta-llama/Llama-3.1-70B-Instruct --tp_size 2 "
                            "--kv_cache_free_gpu_memory_fraction 0.5")
    said = launch_command(trt, "vllm").script
    assert "trtllm-pytorch's is a share of the memory weights and activations leave, vllm's of all memory" in said
    # SGLang's share holds weights and KV cache only: said too
    sglang = parse_engine_args("python -m sglang.launch_server --model-path Qwen/Qwen3-32B --mem-fraction-static 0.85")
    assert "sglang's is a share of all memory for weights and the KV pool, vllm's of all memory" in \
        launch_command(sglang, "vllm").script


def test_the_here_document_as_trtllm_guides_write_it():
    """TensorRT-LLM's deployment guides write the options file as `cat << EOF > ${FILE}` (it had
    been 'cannot tell the engine of cat << EOF')."""
    text = ("EXTRA_LLM_API_FILE=/tmp/config.yml\n\ncat << EOF > ${EXTRA_LLM_API_FILE}\nenable_attention_dp: true\n"
            "kv_cache_config:\n  dtype: fp8\nEOF\n\ntrtllm-serve deepseek-ai/DeepSeek-R1 --backend pytorch "
            "--tp_size 8 --ep_size 8 --extra_llm_api_options ${EXTRA_LLM_API_FILE}\n")
    launch = parse_engine_args(text)
    assert (launch.tp, launch.ep, launch.attention_dp, launch.kv_cache, launch.unknown) == (8, 8, True, "fp8", ())


@pytest.mark.parametrize("command, model, weights, activations", [
    ("vllm serve Qwen/Qwen3-235B-A22B-FP8 -tp 4", "qwen3-235b-a22b", "fp8", "fp8"),
    ("vllm serve hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4 -tp 2", "llama-3.1-70b", "int4", "bf16"),
    ("python3 -m sglang.launch_server --model-path nvidia/DeepSeek-R1-0528-FP4 --tp 8", "deepseek-v3", "nvfp4", "nvfp4"),
    ("vllm serve RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "llama-3.1-8b", "fp8", "fp8"),
])
def test_a_quantized_or_dated_checkpoint_is_its_base_model_in_the_format_its_name_states(command, model, weights,
                                                                                         activations):
    """The engines read a quantized checkpoint's format from its config (no --quantization):
    recipes launch Qwen/Qwen3-235B-A22B-FP8 or nvidia/DeepSeek-R1-0528-FP4 as they are (each had
    been refused as no catalog model)."""
    launch = parse_engine_args(command)
    assert (launch.model, launch.weights, launch.activations) == (model, weights, activations)
    assert launch.kv_cache is None  # the engine's default KV cache: a quantized checkpoint does not set it
    assert any("the format its name states" in n for n in launch.notes)


def test_an_eagle_heads_generation_and_sglangs_nextn_recipe_are_kept():
    """vLLM's "method": "eagle" and "eagle3" load different heads: a local head named neither way
    keeps the method the command gave (it had come back as eagle3). SGLang's DeepSeek recipe runs
    --speculative-algorithm EAGLE with the NextN weights: the model's own MTP module."""
    plain = parse_engine_args("vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config "
                              "'{\"method\": \"eagle\", \"model\": \"/models/draft-head\", \"num_speculative_tokens\": 3}'")
    assert '"method": "eagle"' in launch_command(plain, "vllm").script
    sglang = launch_command(plain, "sglang").script
    assert "--speculative-algorithm EAGLE " in sglang and "EAGLE3" not in sglang
    three = parse_engine_args("python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                              "--speculative-algorithm EAGLE3 --speculative-draft-model-path /models/head "
                              "--speculative-num-steps 3 --speculative-num-draft-tokens 4")
    assert '"method": "eagle3"' in launch_command(three, "vllm").script
    nextn = parse_engine_args("python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 "
                              "--speculative-algorithm EAGLE --speculative-draft-model-path "
                              "lmsys/DeepSeek-V3-0324-NextN --speculative-num-steps 1 --speculative-num-draft-tokens 2")
    assert nextn.speculation.method == "mtp"


def test_an_e5m2_kv_cache_is_read_as_fp8_and_said_so():
    """FP8 E5M2 and E4M3 hold a KV element in one byte each (same speed); inferlab keeps one FP8
    KV format, so the E5M2 spelling is noted, not silently turned into E4M3 on the way back."""
    for command in ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                    "--kv-cache-dtype fp8_e5m2", "vllm serve meta-llama/Llama-3.1-8B-Instruct --kv-cache-dtype fp8_e5m2"):
        launch = parse_engine_args(command)
        assert launch.kv_cache == "fp8" and any("fp8_e5m2 read as fp8" in n for n in launch.notes)
        assert any("fp8_e5m2" in line for line in launch.report())
    assert not parse_engine_args("vllm serve meta-llama/Llama-3.1-8B-Instruct --kv-cache-dtype fp8").notes


@pytest.mark.parametrize("size", [7, 24, 256])
def test_vllm_refuses_a_block_size_its_parser_refuses(size):
    """vLLM's ``--block-size`` has argparse choices 1, 8, 16, 32, 64, 128: a 7 never starts a server."""
    with pytest.raises(SpecError, match=f"--block-size {size}: vLLM takes 1, 8, 16, 32, 64 or 128"):
        parse_engine_args(f"vllm serve meta-llama/Llama-3.1-8B-Instruct --block-size {size}")


def test_vllm_reads_each_block_size_it_takes():
    for size in (1, 8, 16, 32, 64, 128):
        assert parse_engine_args(f"vllm serve meta-llama/Llama-3.1-8B-Instruct --block-size {size}").kv_block_size == size


def test_a_block_size_vllm_refuses_is_not_written_into_its_command():
    """SGLang takes any page size; a 7 carried over to vLLM would be a command that fails to start."""
    sglang = parse_engine_args("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                               "--page-size 7")
    rendered = str(launch_command(sglang, "vllm"))
    assert "--block-size" not in rendered and "cannot express kv_block_size: 7 tokens per KV block" in rendered
    assert "--block-size 32" in str(launch_command(parse_engine_args(
        "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --page-size 32"), "vllm"))


def test_trtllm_eagle3_as_its_docs_write_it():
    """TensorRT-LLM's speculative-decoding docs write ``decoding_type: Eagle3`` with the drafter as
    ``speculative_model`` (a Hub id); 1.0-1.1 wrote ``Eagle`` and ``speculative_model_dir``. Both
    read as EAGLE with 3 draft tokens and nothing unknown (``speculative_model`` had been an
    unknown key)."""
    for kind, key in (("Eagle3", "speculative_model"), ("Eagle", "speculative_model_dir")):
        launch = parse_engine_args(f"""cat > opts.yml <<'EOF'
speculative_config:
  decoding_type: {kind}
  max_draft_len: 3
  {key}: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B
EOF
trtllm-serve meta-llama/Llama-3.1-8B-Instruct --backend pytorch --extra_llm_api_options opts.yml""")
        assert launch.speculation.method == "eagle" and launch.speculation.k == 3
        assert launch.unknown == ()


def test_sglang_router_launch_is_its_dp_workers():
    """SGLang's docs launch data parallelism through its router: ``python -m
    sglang_router.launch_server --model-path ... --dp-size 4`` starts four workers behind one
    router (docs.sglang.io, "DP, DPA and sgl-router"). It read as an unknown engine; it is SGLang with four
    data-parallel replicas, the router's own ``--router-*`` flags no-effect."""
    launch = parse_engine_args("python -m sglang_router.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                               "--dp-size 4 --tp 2 --router-policy cache_aware --router-balance-abs-threshold=32")
    assert (launch.engine, launch.model, launch.tp, launch.dp) == ("sglang", "llama-3.1-8b", 2, 4)
    assert launch.unknown == ()
    assert launch.no_effect == ("--router-policy", "--router-balance-abs-threshold")
