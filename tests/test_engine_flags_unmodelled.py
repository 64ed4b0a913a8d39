"""Speed flags inferlab reads but does not model: each is either no effect on what inferlab models
(the engine's default, or an equivalent of it) or stays unknown with a note of what it would change.
Expectations from the engines' own docs: vLLM's engine arguments (``--compilation-config, -O``: a
number is the compilation level, "level 3 is ... also default in V1"; ``CUDAGraphMode``), SGLang's
server arguments and ``schedule_policy.py`` (default fcfs; lpm and dfs-weight run as fcfs without
the radix cache), TensorRT-LLM's ``TorchLlmArgs`` (``stream_interval`` 1, ``attn_backend`` TRTLLM,
``moe_config.backend`` CUTLASS by default)."""

from __future__ import annotations

import pytest

from inferlab.engines import launch_command, parse_engine_args
from inferlab.errors import SpecError

VLLM = "vllm serve meta-llama/Llama-3.1-8B-Instruct"
SGLANG = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct"


def _trtllm(options: str) -> str:
    return (f"cat > o.yml <<'EOF'\n{options}\nEOF\n"
            "trtllm-serve Qwen/Qwen3-30B-A3B --tp_size 4 --ep_size 4 --extra_llm_api_options o.yml")


def _same_as_plain(launch, plain: str) -> bool:
    return launch.modelled() == parse_engine_args(plain).modelled()


@pytest.mark.parametrize("extra, no_effect", [
    ("-O3", "-O3"), ("-O 3", "-O 3"), ("-O=3", "-O 3"), ("--compilation-config 3", "--compilation-config 3"),
    ("--compilation_config 3", "--compilation-config 3"),
    ("--compilation-config '{\"level\": 3}'", "--compilation-config.level 3"),
    ("-O.cudagraph_mode=FULL_AND_PIECEWISE", "-O.cudagraph_mode FULL_AND_PIECEWISE"),
    ("--compilation-config '{\"cudagraph_mode\": \"PIECEWISE\"}'", "--compilation-config.cudagraph_mode PIECEWISE"),
])
def test_vllms_default_compilation_and_graphed_modes_change_nothing_modelled(extra, no_effect):
    launch = parse_engine_args(f"{VLLM} {extra} --max-num-seqs 64")
    assert launch.no_effect == (no_effect,) and launch.unknown == () and launch.notes == ()
    assert launch.max_num_seqs == 64 and _same_as_plain(launch, f"{VLLM} --max-num-seqs 64")


def test_vllm_without_cuda_graphs_is_read_as_enforce_eager():
    eager = parse_engine_args(f"{VLLM} --enforce-eager").notes[0].split(": ", 1)[1]
    for extra in ("--compilation-config '{\"cudagraph_mode\": \"NONE\"}'", "-cc.cudagraph_mode NONE",
                  "-O.cudagraph_mode=NONE"):
        launch = parse_engine_args(f"{VLLM} {extra}")
        assert launch.unknown == () and launch.no_effect == ()
        assert len(launch.notes) == 1 and launch.notes[0].endswith(f"as --enforce-eager: {eager}")


def test_other_vllm_compilation_stays_unknown_with_what_it_changes():
    low = parse_engine_args(f"{VLLM} -O0")
    assert low.unknown == ("-O0",) and "compilation other than vLLM's default (level 3" in low.notes[0]
    decode_only = parse_engine_args(f"{VLLM} --compilation-config.cudagraph_mode FULL_DECODE_ONLY")
    assert decode_only.unknown == ("--compilation-config.cudagraph_mode FULL_DECODE_ONLY",)
    assert "prefill and mixed iterations run without CUDA graphs" in decode_only.notes[0]
    sizes = parse_engine_args(f"{VLLM} -O '{{\"level\": 3, \"cudagraph_capture_sizes\": [1, 2, 4]}}'")
    assert sizes.no_effect == ("-O.level 3",) and sizes.unknown == ("-O.cudagraph_capture_sizes [1, 2, 4]",)
    for bad, said in (("-O x", "neither a compilation level"), ("-O.cudagraph_mode=ALL", "cudagraph_mode is one of"),
                      ("-O", "needs a value")):
        with pytest.raises(SpecError, match=said):
            parse_engine_args(f"{VLLM} {bad}")


def test_the_gpt_oss_recipes_config_leaves_only_its_capture_sizes_unknown():
    """The recipe's YAML: PIECEWISE graphs (graphed, as simulated) and async scheduling (read);
    ``cuda-graph-sizes`` (the largest graphed batch) is not modelled for vLLM, whose eager rate
    is not measured."""
    launch = parse_engine_args(
        "cat > c.yaml <<'EOF'\ncompilation-config: '{\"cudagraph_mode\":\"PIECEWISE\"}'\nasync-scheduling: true\n"
        "cuda-graph-sizes: 2048\nEOF\nvllm serve openai/gpt-oss-120b --config c.yaml")
    assert launch.unknown == ("--cuda-graph-sizes 2048",) and launch.overlap_host is True
    assert launch.no_effect == ("--compilation-config.cudagraph_mode PIECEWISE",)


@pytest.mark.parametrize("extra, unknown, no_effect, note", [
    ("--schedule-policy fcfs", (), ("--schedule-policy fcfs",), None),
    ("--schedule-policy lpm --disable-radix-cache", (), ("--schedule-policy lpm",), None),  # run as fcfs
    ("--schedule-policy lpm", ("--schedule-policy lpm",), (), "longest prefix already in the radix cache"),
    ("--schedule-policy lof", ("--schedule-policy lof",), (), "with the longest output first"),
    ("--attention-backend fa3", ("--attention-backend fa3",), (), "not per backend"),
    ("--decode-attention-backend flashinfer", ("--decode-attention-backend flashinfer",), (), "decode attention"),
    ("--enable-torch-compile", ("--enable-torch-compile",), (), "--torch-compile-max-bs (32 by default)"),
])
def test_sglangs_policy_backends_and_torch_compile(extra, unknown, no_effect, note):
    launch = parse_engine_args(f"{SGLANG} {extra}")
    assert launch.unknown == unknown and launch.no_effect == no_effect
    notes = [n for n in launch.notes if n.startswith(unknown[0])] if unknown else []
    assert (note is None and not notes) or (len(notes) == 1 and note in notes[0])
    if note is not None:  # the report says both what is not modelled and what it would change
        report = "\n".join(launch.report("serve"))
        assert f"not modelled: {unknown[0]}" in report and note in report


@pytest.mark.parametrize("options, unknown, no_effect, note", [
    ("stream_interval: 1", (), ("--extra_llm_api_options: stream_interval",), None),
    ("stream_interval: 10", ("stream_interval: 10",), (), "a streamed response every so many iterations"),
    ("attn_backend: TRTLLM", (), ("--extra_llm_api_options: attn_backend",), None),
    ("attn_backend: FLASHINFER", ("attn_backend: FLASHINFER",), (), "the attention kernels"),
    ("moe_config:\n  backend: CUTLASS", (), ("--extra_llm_api_options: moe_config.backend",), None),
    ("moe_config:\n  backend: WIDEEP\n  max_num_tokens: 8192",
     ("moe_config.backend: WIDEEP", "moe_config.max_num_tokens: 8192"), (), "WIDEEP's all-to-all"),
])
def test_trtllm_streaming_and_kernel_backends(options, unknown, no_effect, note):
    launch = parse_engine_args(_trtllm(options))
    assert launch.unknown == unknown and launch.no_effect == no_effect
    assert (note is None and launch.notes == ()) or (len(launch.notes) == 1 and note in launch.notes[0])
    assert _same_as_plain(launch, "trtllm-serve Qwen/Qwen3-30B-A3B --tp_size 4 --ep_size 4")


@pytest.mark.parametrize("command", [
    f"{VLLM} -O3 --compilation-config.cudagraph_mode FULL_AND_PIECEWISE --max-num-seqs 64",
    f"{SGLANG} --schedule-policy fcfs --attention-backend fa3 --enable-torch-compile --max-running-requests 64",
    _trtllm("stream_interval: 10\nattn_backend: FLASHINFER\nmax_batch_size: 64"),
])
def test_what_is_not_modelled_is_not_written_and_the_rest_round_trips(command):
    first = parse_engine_args(command)
    rendered = launch_command(first)
    back = parse_engine_args(rendered.script)
    assert back.modelled() == first.modelled() and back.unknown == () and back.no_effect == ()


M = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize("command, message", [
    # another engine's spelling of a setting this engine has: the engine refuses it, and read past
    # it had run the default (one GPU for a tp of 2)
    (f"trtllm-serve {M} --tensor-parallel-size 2", "--tensor-parallel-size is vllm serve's flag; trtllm-serve spells it --tp_size"),
    (f"vllm serve {M} --tp-size 2", "--tp-size is sglang.launch_server's flag; vllm serve spells it --tensor-parallel-size"),
    (f"{SGLANG} --max-num-seqs 4", "--max-num-seqs is vllm serve's flag; sglang.launch_server spells it --max-running-requests"),
    (f"vllm serve {M} --mem-fraction-static 0.8", "vllm serve spells it --gpu-memory-utilization"),
    # a switch is matched to the one doing the same, not the first of its setting
    (f"vllm serve {M} --disable-radix-cache", "vllm serve spells it --no-enable-prefix-caching"),
    (f"vllm serve {M} --disable-overlap-schedule", "vllm serve spells it --no-async-scheduling"),
    (f"{SGLANG} --enable-prefix-caching", "sglang.launch_server does that by default (it has a flag for the other "
                                          "way only): drop it"),
    # another engine's flag for a setting this engine sets another way (its YAML, its checkpoint): read
    # past, the setting had stayed at its default (a BF16 KV cache for --kv-cache-dtype fp8)
    (f"trtllm-serve {M} --kv-cache-dtype fp8", "--kv-cache-dtype is vllm serve's flag, which trtllm-serve would "
                                               "refuse; trtllm-serve sets the KV cache's format in the "
                                               "--extra_llm_api_options YAML (kv_cache_config: {dtype: fp8})"),
    (f"trtllm-serve {M} --dp 2", "trtllm-serve has no data-parallel flag"),
    (f"vllm serve {M} --chunked-prefill-size 2048", "vllm serve spells the iteration's token budget "
                                                    "--max-num-batched-tokens"),
    (f"{SGLANG} --max-num-batched-tokens 2048", "sglang.launch_server spells the iteration's token budget "
                                                "--chunked-prefill-size"),
    # two models: the engine serves one and refuses or ignores the other; inferlab picks neither
    (f"vllm serve {M} --model Qwen/Qwen3-8B", f"names two models, {M} and Qwen/Qwen3-8B (--model); give one"),
    (f"{SGLANG} Qwen/Qwen3-8B", f"names two models, Qwen/Qwen3-8B and {M} (--model-path); give one"),
    (f"vllm serve {M} Qwen/Qwen3-8B", f"names two models, Qwen/Qwen3-8B and {M}; give one"),
    (f"trtllm-serve {M} Qwen/Qwen3-8B", f"names two models, Qwen/Qwen3-8B and {M}; give one"),
    # a policy SGLang's parser does not offer (it had been listed as unknown, and run)
    (f"{SGLANG} --schedule-policy bogus", "--schedule-policy 'bogus' is not one of SGLang's: fcfs, lpm"),
    (f"{SGLANG} --schedule-policy FCFS", "--schedule-policy 'FCFS' is not one of SGLang's: fcfs, lpm"),  # case as argparse
])
def test_another_engines_flag_or_a_second_model_is_refused(command, message):
    with pytest.raises(SpecError) as info:
        parse_engine_args(command)
    assert message in str(info.value)


@pytest.mark.parametrize("command", [
    f"vllm serve {M} --model {M}",  # one model written both ways
    # flags of several values inferlab does not know: their first value stays with the flag, the
    # others are listed as unknown too, as before; none names a model, so none is a second one
    f"{VLLM} --cuda-graph-sizes 1 2 4 8",
    f"{VLLM} --served-model-name llama llama8b",
    f"{VLLM} --enable-lora --lora-modules a=/x b=/y",
    f"{SGLANG} --cuda-graph-bs 1 2 4 8",
    f"python -m sglang_router.launch_server --model-path {M} --dp-size 2 --router-worker-urls http://a http://b",
])
def test_one_model_and_flags_of_several_values_read(command):
    launch = parse_engine_args(command)
    assert launch.model == "llama-3.1-8b"
    assert "--no-such-flag 3" in parse_engine_args(f"{VLLM} --no-such-flag 3").unknown


@pytest.mark.parametrize("command, message", [
    # vLLM's and SGLang's model config raise where --quantization names another method than the
    # checkpoint's (gpt-oss stores MXFP4 experts, DeepSeek-V3 block-scaled FP8)
    ("vllm serve openai/gpt-oss-20b --quantization fp8", "asks for fp8 weights, but openai/gpt-oss-20b stores mxfp4"),
    ("vllm serve deepseek-ai/DeepSeek-V3 --quantization awq -tp 8", "asks for int4 weights, but deepseek-ai/DeepSeek-V3 "
                                                                    "stores fp8_block"),
    ("python -m sglang.launch_server --model-path openai/gpt-oss-20b --quantization fp8", "sglang refuses a method other"),
])
def test_a_quantization_other_than_the_checkpoints_is_refused(command, message):
    with pytest.raises(SpecError) as info:
        parse_engine_args(command)
    assert message in str(info.value)


def test_the_checkpoints_own_quantization_reads_its_formats():
    # naming the checkpoint's own method reads its formats, as without the flag: gpt-oss's attention
    # in BF16 beside its MXFP4 experts, DeepSeek-V3's block scales (they had been mxfp4 / fp8 throughout)
    gpt = parse_engine_args("vllm serve openai/gpt-oss-20b --quantization mxfp4")
    assert (gpt.weights, gpt.activations) == (None, None)
    assert gpt.modelled() == parse_engine_args("vllm serve openai/gpt-oss-20b").modelled()
    ds = parse_engine_args("vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --quantization fp8")
    assert ds.modelled() == parse_engine_args("vllm serve deepseek-ai/DeepSeek-V3 -tp 8").modelled()
    # a method that loads pre-quantized weights beside a 16-bit checkpoint is said, and read as such
    gptq = parse_engine_args(f"vllm serve {M} --quantization gptq")
    assert gptq.weights == "int4" and any("(16-bit) is not" in n for n in gptq.notes)


def test_a_written_command_says_which_checkpoint_its_quantization_loads():
    from inferlab.engines.render import launch_from_deployment

    awq = launch_command(launch_from_deployment("llama-3.1-8b", precision="int4", engine="vllm")).script
    assert "# inferlab: --quantization awq loads a checkpoint stored quantized that way: replace " \
           "meta-llama/Llama-3.1-8B (16-bit) with one" in awq
    fp4 = launch_command(launch_from_deployment("deepseek-v3", precision="nvfp4", tp=8, engine="sglang")).script
    assert "replace deepseek-ai/DeepSeek-V3 (stored in fp8_block) with a checkpoint stored in nvfp4" in fp4
    fp8 = launch_command(launch_from_deployment("llama-3.1-8b", precision="fp8", engine="vllm")).script
    assert "# inferlab" not in fp8  # quantized at load from 16 bits: nothing to replace


def test_a_flag_that_sets_the_static_batch_token_budget_is_not_called_serving_only():
    """SGLang's --chunked-prefill-size is the token budget a static batch prefills in chunks of
    (it moves estimate's TTFT), and its serving-only settings too: no warning that estimate
    leaves it unused (it had warned and used it)."""
    launch = parse_engine_args(f"{SGLANG} --chunked-prefill-size 512")
    assert launch.max_num_batched_tokens == 512
    assert not any("not a static batch" in line for line in launch.report("estimate"))


def test_dp_beside_a_command_that_does_not_set_it_is_copies_of_the_command():
    """A plan says "launch it 4 times behind a load balancer": --dp 4 beside that command is its
    four copies (it had been refused as contradicting the command's default of one); a dp the
    command sets still contradicts another."""
    launch = parse_engine_args(f"vllm serve {M} --max-num-seqs 256")
    assert launch.merged({"dp": 4}, "serve")["dp"] == 4
    with pytest.raises(SpecError, match="contradicts the engine args"):
        parse_engine_args(f"vllm serve {M} --data-parallel-size 2").merged({"dp": 4}, "serve")


def test_a_misspelt_flag_or_option_key_is_named_beside_what_it_likely_meant(tmp_path):
    # kept as unknown (the engine would refuse it; a flag of a newer release may be new), but named
    launch = parse_engine_args(f"vllm serve {M} --tensor-paralel-size 2 --some-new-flag 3")
    assert launch.unknown == ("--tensor-paralel-size 2 (did you mean '--tensor-parallel-size'?)", "--some-new-flag 3")
    options = tmp_path / "o.yaml"
    options.write_text("kv_cache_config:\n  dtyp: fp8\nenable_attention_dpp: true\n")
    launch = parse_engine_args(f"trtllm-serve {M} --extra_llm_api_options {options}")
    assert "kv_cache_config.dtyp: fp8 (did you mean 'dtype'?)" in launch.unknown
    assert "enable_attention_dpp: True (did you mean 'enable_attention_dp'?)" in launch.unknown


def test_what_explain_says_a_flag_set_is_what_it_set():
    # vLLM's -tp 2 -dp 4 on a mixture-of-experts model: one replica of 8 GPUs, attention over 4 ranks; the
    # read-out had said "tp 8 (-tp); dp 1 (-dp)", crediting each flag with the converted value
    lines = parse_engine_args("vllm serve Qwen/Qwen3-30B-A3B -tp 2 -dp 4 --enable-expert-parallel").read_lines()
    assert lines == ["vllm engine args read: tp 8 (-tp x -dp); ep 8 (--enable-expert-parallel); attention DP on (-dp)"]
    auto = parse_engine_args(f"vllm serve {M} --kv-cache-dtype auto").read_lines()
    assert auto == ["vllm engine args read: KV cache auto (the model's format) (--kv-cache-dtype)"]  # not "None"


def test_an_unknown_flag_that_took_the_model_as_its_value_is_named():
    with pytest.raises(SpecError, match=r"names no model: --foo-bar, a flag inferlab does not know, took "
                                        r"meta-llama/Llama-3.1-8B-Instruct as its value; put the model first"):
        parse_engine_args(f"vllm serve --foo-bar {M}")


def test_a_real_flag_inferlab_does_not_list_is_not_called_a_typo_of_a_shorter_one():
    # vLLM's --model-impl begins with --model but is its own flag: no "did you mean '--model'?"
    launch = parse_engine_args(f"vllm serve {M} --model-impl transformers")
    assert launch.unknown == ("--model-impl transformers",)


def test_a_flag_read_by_name_is_never_offered_a_correction():
    # flags inferlab reads by their name and value (SGLang's piecewise-graph rules, vLLM's KV transfer)
    # must reach that reading as written: a "(did you mean ...)" suffix would become part of the value
    from inferlab.engines.command_line import Spec, read_flags

    known = {"--tp-size": Spec("tp", "int")}
    plain = read_flags(["--tp-sise", "2"], known, (), (), "x")
    assert plain.unknown == ["--tp-sise 2 (did you mean '--tp-size'?)"]
    real = read_flags(["--tp-sise", "2"], known, (), (), "x", unmodelled=["--tp-sise"])
    assert real.unknown == ["--tp-sise 2"]
