"""trtllm-serve's own spellings, as TensorRT-LLM's ``tensorrt_llm/commands/serve.py`` declares its
click options: each long name is an alias of the short one (``--tensor_parallel_size``/``--tp_size``,
``--pipeline_parallel_size``/``--pp_size``, ``--moe_expert_parallel_size``/``--ep_size``,
``--free_gpu_memory_fraction``/``--kv_cache_free_gpu_memory_fraction``), ``--enable_chunked_prefill``
is a switch (``is_flag``, default off), ``--backend trt`` an alias of ``tensorrt``; ``--cp_size``
(context parallelism) and ``--max_beam_width`` are real flags inferlab does not model."""

from __future__ import annotations

import pytest

from inferlab.engines import parse_engine_args
from inferlab.errors import SpecError

M70 = "meta-llama/Llama-3.1-70B-Instruct"


@pytest.mark.parametrize("long, short", [
    ("--tensor_parallel_size 4", "--tp_size 4"),
    ("--pipeline_parallel_size 2", "--pp_size 2"),
    ("--free_gpu_memory_fraction 0.8", "--kv_cache_free_gpu_memory_fraction 0.8"),
    ("--tp_size 8 --moe_expert_parallel_size 8", "--tp_size 8 --ep_size 8"),
    ("--backend trt", "--backend tensorrt"),
])
def test_a_long_alias_reads_as_its_short_flag(long, short):
    model = "deepseek-ai/DeepSeek-V3" if "ep" in short else M70
    aliased = parse_engine_args(f"trtllm-serve {model} {long}")
    plain = parse_engine_args(f"trtllm-serve {model} {short}")
    assert aliased.unknown == () and aliased.modelled() == plain.modelled()


def test_the_long_tp_alias_sets_the_tensor_parallel_size():
    # it had been an unknown flag: the server ran on one GPU in inferlab's reading
    launch = parse_engine_args(f"trtllm-serve {M70} --tensor_parallel_size 4 --free_gpu_memory_fraction 0.8")
    assert (launch.tp, launch.gpu_memory_utilization) == (4, 0.8)
    assert "tp 4 (--tensor_parallel_size)" in launch.read_lines()[0]


def test_enable_chunked_prefill_is_a_switch_that_turns_chunking_on():
    on = parse_engine_args(f"trtllm-serve {M70} --tp_size 4 --enable_chunked_prefill")
    assert on.chunked_prefill is True and on.unknown == ()
    assert parse_engine_args(f"trtllm-serve {M70} --tp_size 4").chunked_prefill is None  # the engine's default (off)
    with pytest.raises(SpecError, match="--enable_chunked_prefill is a switch and takes no value"):
        parse_engine_args(f"trtllm-serve {M70} --enable_chunked_prefill=true")


def test_the_options_file_wins_over_the_chunked_prefill_switch(tmp_path):
    command = (f"cat > o.yml <<'EOF'\nenable_chunked_prefill: false\nEOF\n"
               f"trtllm-serve {M70} --tp_size 4 --enable_chunked_prefill --extra_llm_api_options o.yml")
    launch = parse_engine_args(command)
    assert launch.chunked_prefill is False
    assert any("wins over the command line's True" in n for n in launch.notes)


def test_vllms_chunked_prefill_flag_is_named_with_trtllms_switch():
    with pytest.raises(SpecError, match="trtllm-serve spells it --enable_chunked_prefill"):
        parse_engine_args(f"trtllm-serve {M70} --enable-chunked-prefill")


@pytest.mark.parametrize("flag, value", [("--cp_size", "2"), ("--context_parallel_size", "2"),
                                         ("--max_beam_width", "4")])
def test_a_real_unmodelled_flag_stays_unknown_with_what_it_would_change(flag, value):
    launch = parse_engine_args(f"trtllm-serve {M70} --tp_size 4 {flag} {value}")
    assert launch.unknown == (f"{flag} {value}",)  # no "did you mean '--tp_size'?": it is no typo
    assert any(n.startswith(f"{flag} {value}: ") and "not modelled" in n for n in launch.notes)


@pytest.mark.parametrize("flag", ["--cp_size 1", "--max_beam_width 1", "--context_parallel_size=1"])
def test_an_unmodelled_flag_at_its_default_has_no_effect(flag):
    launch = parse_engine_args(f"trtllm-serve {M70} --tp_size 4 {flag}")
    assert launch.unknown == () and launch.no_effect == (flag.replace("=", " "),)


@pytest.mark.parametrize("flag", ["--revision main", "--custom_tokenizer deepseek_v32",
                                  "--fail_fast_on_attention_window_too_large", "--otlp_traces_endpoint http://x:4317"])
def test_serving_only_flags_have_no_effect(flag):
    launch = parse_engine_args(f"trtllm-serve {M70} --tp_size 4 {flag}")
    assert launch.unknown == () and launch.no_effect == (flag.split()[0],)
