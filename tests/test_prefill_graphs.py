"""Piecewise CUDA graphs of prefill and mixed iterations (``prefill_graph_tokens``): an engine that
graphs decode only runs an iteration with prompt tokens eagerly, at least the host's issue time of
its kernels; piecewise graphs remove that floor for iterations of at most N tokens, in serve and in
the static estimate alike, and the engines' flags carry N both ways."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import Deployment, SpecError, estimate, serve
from inferlab.cli.main import main
from inferlab.engines import launch_command, parse_engine_args
from inferlab.engines.launch import EngineLaunch
from inferlab.engines.scheduler import ENGINE_SCHEDULERS, SchedulerConfig
from inferlab.inputs.resolve import deployment
from inferlab.serving.stepmodel import StepModel

LLAMA = dict(engine="sglang", isl=512, osl=2)
#: SGLang's eager host time per kernel of the prefill graph: an eager DeepSeek-V3 forward of one
#: new token took 82.6 ms over the 1,389 kernels of its graph (sglang PR #12160): 59.47 us, as the
#: profile stores it.
RATE = 59.47e-6
#: Llama-3.1-8B's prefill graph on one GPU: 32 layers of 10 kernels (norm, QKV, RoPE, attention,
#: O, residual, norm, gate-up, activation, down) plus embedding and final norm and LM head: 323.
KERNELS = 323
#: The eager floor of its prefill: 323 x 59.47 us = 19.21 ms.
FLOOR = KERNELS * RATE
#: The same prefill's FLOPs by hand: 2 x 6.98e9 linear weights (32 layers of q, o 4096^2; k, v
#: 4096 x 1024; gate, up, down 4096 x 14336) x 512 tokens = 7.15e12, attention's 512 x 513 / 2 pairs
#: x 32 heads x 128 x 4 x 32 layers = 6.9e10 and one LM-head row, 1.05e9: 7.22e12 FLOP, 7.3 ms at
#: the H100 SXM's dense BF16 989 TFLOP/s: the GPU's work takes no less.
GPU_AT_PEAK = 7.22e12 / 989e12
SGLANG = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct"
TRTLLM = "cat > o.yml <<'EOF'\n{}\nEOF\ntrtllm-serve meta-llama/Llama-3.1-8B-Instruct --extra_llm_api_options o.yml"


def test_no_engine_graphs_prefill_piecewise_by_default():
    # which SGLang release turned them on by default is not established: every engine stays eager
    assert all(s.prefill_graph_tokens is None for s in ENGINE_SCHEDULERS.values())


def test_piecewise_graphs_take_the_eager_floor_off_a_512_token_prefill():
    eager = estimate("llama-3.1-8b", "h100-sxm", **LLAMA)
    graphed = estimate("llama-3.1-8b", "h100-sxm", prefill_graph_tokens=512, **LLAMA)
    dep = eager.deployment
    assert eager.prefill_step.kernels == KERNELS and dep.profile.eager_host_per_kernel_s == pytest.approx(RATE, rel=1e-9)
    overhead = dep.profile.step_overhead_s
    # eagerly the prefill lasts the host's issue time (the GPU's work is shorter), plus the step overhead
    assert float(eager.ttft_s) == pytest.approx(FLOOR + overhead, rel=1e-6)
    # in piecewise graphs it lasts the GPU's work: more than at peak, less than the floor
    gpu = float(graphed.ttft_s) - overhead
    assert GPU_AT_PEAK < gpu < FLOOR
    assert gpu == pytest.approx(sum(r["time_s"] for r in graphed.op_table("prefill")), rel=1e-9)
    drop = float(eager.ttft_s - graphed.ttft_s)
    assert drop == pytest.approx(FLOOR - gpu, rel=1e-9) and 0.0 < drop < FLOOR - GPU_AT_PEAK
    # the idle TTFT served drops by as much (the simulation's GPU time within 2% of the estimate's)
    kw = dict(concurrency=1, num_requests=4, **LLAMA)
    served = serve("llama-3.1-8b", "h100-sxm", **kw).ttft_s
    pieced = serve("llama-3.1-8b", "h100-sxm", prefill_graph_tokens=512, **kw).ttft_s
    assert np.all(pieced < served)
    assert float(np.mean(served - pieced)) == pytest.approx(drop, rel=0.03)


def test_explain_says_when_piecewise_graphs_hold_the_prefill():
    text = estimate("llama-3.1-8b", "h100-sxm", prefill_graph_tokens=512, **LLAMA).explain()
    assert "runs in piecewise CUDA graphs (iterations of up to 512 tokens" in text and "19.21 ms" in text
    assert "host-bound (run eagerly" not in text
    short = estimate("llama-3.1-8b", "h100-sxm", prefill_graph_tokens=256, **LLAMA).explain()
    assert "longer than its piecewise CUDA graphs' 256 tokens" in short and "a larger prefill_graph_tokens" in short
    plain = estimate("llama-3.1-8b", "h100-sxm", **LLAMA).explain()
    assert "--prefill-graph-tokens" in plain and "--enable-piecewise-cuda-graph" in plain
    # a 256-token prompt within graphs of 512 tokens, with CUDA graphs off: eager because of that,
    # not because the prompt is longer than the graphs, and a larger limit would not help
    off = estimate("llama-3.1-8b", "h100-sxm", engine="sglang", isl=256, osl=2, cuda_graphs=False,
                   prefill_graph_tokens=512).explain()
    assert "longer than its piecewise" not in off and "a larger prefill_graph_tokens" not in off
    assert "host-bound (run eagerly, CUDA graphs off" in off and "CUDA graphs on (prefill_graph_tokens 512" in off
    # with them on, the same prompt fits the graphs: graphed, nothing said about a longer prompt
    fits = estimate("llama-3.1-8b", "h100-sxm", engine="sglang", isl=256, osl=2, prefill_graph_tokens=512).explain()
    assert "runs in piecewise CUDA graphs" in fits and "longer than its piecewise" not in fits


def test_a_prompt_longer_than_the_graphs_still_pays_the_floor():
    eager = estimate("llama-3.1-8b", "h100-sxm", **LLAMA)
    short = estimate("llama-3.1-8b", "h100-sxm", prefill_graph_tokens=511, **LLAMA)
    assert float(short.ttft_s) == float(eager.ttft_s) and not bool(short.prefill_graphed)
    kw = dict(concurrency=1, num_requests=3, **LLAMA)
    assert np.array_equal(serve("llama-3.1-8b", "h100-sxm", prefill_graph_tokens=511, **kw).ttft_s,
                          serve("llama-3.1-8b", "h100-sxm", **kw).ttft_s)
    # a mixed iteration counts its decodes: one decode beside 500 prompt tokens is 501 tokens
    dep = deployment("llama-3.1-8b", "h100-sxm", engine="sglang")
    one = dict(decode_context=np.array([600.0]), prefill_context=np.zeros(1), prefill_tokens=np.array([500.0]),
               logits=2.0)
    at, below, none = (StepModel(dep, 8192, prefill_graph_tokens=n).time(**one) for n in (501, 500, None))
    assert at < below == none


def test_serve_and_estimate_agree_on_the_prefill_with_the_setting():
    # the same 512-token prompt: the eager iteration is the floor in both, the graphed one each
    # model's GPU work, within 2% of each other
    dep = deployment("llama-3.1-8b", "h100-sxm", engine="sglang")
    alone = dict(decode_context=np.zeros(0), prefill_context=np.zeros(1), prefill_tokens=np.array([512.0]),
                 logits=1.0)
    eager, graphed = (StepModel(dep, 8192, prefill_graph_tokens=n).time(**alone) for n in (None, 512))
    served_gpu = graphed - (eager - FLOOR)  # the host's terms around the iteration are the same
    static = estimate("llama-3.1-8b", "h100-sxm", prefill_graph_tokens=512, **LLAMA)
    static_gpu = float(static.prefill_step.time_s) - dep.profile.step_overhead_s
    assert served_gpu == pytest.approx(static_gpu, rel=0.02)
    assert eager - FLOOR == pytest.approx(StepModel(dep, 8192).step_overhead_s, rel=1e-9)


def test_chunks_within_the_graphs_are_graphed_and_the_disaggregated_prefill_pool_too():
    from inferlab.phases.disaggregated import estimate_disaggregated

    # a 2,048-token prompt in four chunks of 512: eagerly the host issues the 323 kernels four times,
    # 4 x 19.21 = 76.8 ms, longer than the GPU's work; in graphs the GPU's work alone (its FLOPs by
    # hand: 2 x 6.98e9 x 2048 + 2048 x 2049 / 2 x 32 x 128 x 4 x 32 = 2.97e13, 30 ms at peak)
    kw = dict(engine="sglang", isl=2048, osl=2, max_num_tokens=512)
    eager = estimate("llama-3.1-8b", "h100-sxm", **kw)
    graphed = estimate("llama-3.1-8b", "h100-sxm", prefill_graph_tokens=512, **kw)
    overhead = eager.deployment.profile.step_overhead_s
    assert float(eager.ttft_s) == pytest.approx(4 * FLOOR + 4 * overhead, rel=1e-6)
    gpu = float(graphed.ttft_s) - 4 * overhead
    assert 2.97e13 / 989e12 < gpu < 4 * FLOOR
    assert gpu == pytest.approx(sum(r["time_s"] for r in graphed.op_table("prefill")), rel=1e-9)
    # chunks of 512 beyond graphs of 256 tokens: eager still
    assert float(estimate("llama-3.1-8b", "h100-sxm", prefill_graph_tokens=256, **kw).ttft_s) == float(eager.ttft_s)
    # the disaggregated estimate's prefill pool gains as the aggregated prefill does
    pools = dict(isl=512, osl=2, engine="sglang")
    split = estimate_disaggregated("llama-3.1-8b", "prefill=h100-sxmx1,decode=h100-sxmx1", **pools)
    pieced = estimate_disaggregated("llama-3.1-8b", "prefill=h100-sxmx1,decode=h100-sxmx1",
                                    prefill_graph_tokens=512, **pools)
    alone = [float(estimate("llama-3.1-8b", "h100-sxm", prefill_graph_tokens=n, **LLAMA).ttft_s) for n in (None, 512)]
    assert float(split.prefill_s - pieced.prefill_s) == pytest.approx(alone[0] - alone[1], rel=1e-9)
    with pytest.raises(SpecError, match="runs no prefill eagerly"):
        estimate_disaggregated("llama-3.1-8b", "prefill=h100-sxmx1,decode=h100-sxmx1", isl=512, osl=2,
                               engine="vllm", prefill_graph_tokens=512)


def test_the_setting_is_refused_where_prefill_is_not_eager():
    # vLLM graphs prefill already; the TensorRT engine and LMDeploy run compiled engines
    for call in (lambda: estimate("llama-3.1-8b", "h100-sxm", engine="vllm", prefill_graph_tokens=512),
                 lambda: estimate("llama-3.1-8b", "h100-sxm", engine="lmdeploy", prefill_graph_tokens=512),
                 lambda: serve("llama-3.1-8b", "h100-sxm", engine="vllm", prefill_graph_tokens=512, isl=64, osl=4,
                               concurrency=1, num_requests=2),
                 lambda: serve("llama-3.1-8b", "h100-sxm", engine="trtllm", prefill_graph_tokens=512, isl=64,
                               osl=4, concurrency=1, num_requests=2)):
        with pytest.raises(SpecError, match="prefill_graph_tokens: .* runs no prefill eagerly"):
            call()
    assert estimate("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", prefill_graph_tokens=512, isl=512,
                    osl=2).ttft_s < estimate("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", isl=512, osl=2).ttft_s


@pytest.mark.parametrize("bad", [0, -4, 1.5, True, "512"])
def test_a_bad_value_is_one_clear_line(bad):
    with pytest.raises(SpecError, match="prefill_graph_tokens"):
        SchedulerConfig(prefill_graph_tokens=bad)
    with pytest.raises(SpecError, match="prefill_graph_tokens"):
        Deployment.from_dict({"model": "llama-3.1-8b", "hardware": "h100-sxm",
                              "engine": {"name": "sglang", "prefill_graph_tokens": bad}})


def test_the_cli_takes_the_flag_and_refuses_a_bad_value(capsys):
    flags = ["llama-3.1-8b", "h100-sxm", "--engine", "sglang", "--isl", "512", "--osl", "2", "--json"]
    assert main(["estimate", *flags, "--prefill-graph-tokens", "512"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ttft_s"] == pytest.approx(float(estimate("llama-3.1-8b", "h100-sxm", prefill_graph_tokens=512,
                                                         **LLAMA).ttft_s))
    for command in ("estimate", "serve"):
        extra = ["--concurrency", "1", "--num-requests", "2"] if command == "serve" else []
        assert main([command, *flags, *extra, "--prefill-graph-tokens", "0"]) != 0
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "prefill" in err and "between 1 and" in err
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--engine", "vllm", "--concurrency", "1", "--num-requests", "2",
                 "--prefill-graph-tokens", "512"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.count("--prefill-graph-tokens") == 1


def test_a_deployment_carries_the_setting_to_serve_and_estimate():
    dep = Deployment.from_dict({"model": "llama-3.1-8b", "hardware": "h100-sxm",
                                "engine": {"name": "sglang", "prefill_graph_tokens": 512}})
    assert dep.estimate_kwargs()["prefill_graph_tokens"] == 512 and dep.serve_kwargs()["prefill_graph_tokens"] == 512


@pytest.mark.parametrize("flags, tokens, source", [
    ("--enable-piecewise-cuda-graph --chunked-prefill-size 4096", 4096, "--enable-piecewise-cuda-graph"),
    ("--enable-piecewise-cuda-graph", 8192, "--enable-piecewise-cuda-graph"),  # SGLang's chunk on an H100
    ("--enforce-piecewise-cuda-graph --piecewise-cuda-graph-max-tokens 1024", 1024,
     "--enforce-piecewise-cuda-graph"),  # kept as enforce, so that it is written back as such
    ("--disable-piecewise-cuda-graph", None, "--disable-piecewise-cuda-graph"),
    ("--piecewise-cuda-graph-max-tokens 1024", None, "prefill_graph_tokens"),  # on nowhere: eager, a note
])
def test_sglang_flags_read_and_written_back(flags, tokens, source):
    launch = parse_engine_args(f"{SGLANG} {flags}")
    assert launch.prefill_graph_tokens == tokens and launch.unknown == ()
    assert launch.flag_of("prefill_graph_tokens") == source
    if tokens is not None:
        assert launch.to_kwargs("serve")["prefill_graph_tokens"] == tokens
        assert launch.to_kwargs("estimate")["prefill_graph_tokens"] == tokens  # the static estimate uses it
        assert not any("piecewise" in line for line in launch.report("estimate") if "not a static batch" in line)
    script = launch_command(launch).script
    back = parse_engine_args(script)
    assert back.modelled() == launch.modelled()
    if "disable" in flags:
        assert "--disable-piecewise-cuda-graph" in script and "turns them off" in launch.notes[0]
    if "enforce" in flags:
        assert "--enforce-piecewise-cuda-graph" in script and "--enable-piecewise-cuda-graph" not in script
    if flags.startswith("--piecewise"):
        assert "takes effect where piecewise CUDA graphs are on" in launch.notes[0]


def test_sglang_mla_models_capture_2048_tokens_by_default():
    launch = parse_engine_args("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 "
                               "--chunked-prefill-size 8192 --enable-piecewise-cuda-graph")
    assert launch.prefill_graph_tokens == 2048


#: SGLang's auto-disable rules (server_args.py _handle_piecewise_cuda_graph): without
#: --enforce-piecewise-cuda-graph these configurations run prefill eagerly, whatever else is given.
SGLANG_V3 = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8"


@pytest.mark.parametrize("command, rule", [
    (f"{SGLANG_V3} --ep 8 --moe-a2a-backend deepep", "all-to-all backend deepep"),  # moe_a2a_backend != "none"
    (f"{SGLANG_V3} --enable-deepep-moe", "all-to-all backend deepep"),  # 0.4.x's alias of the same
    (f"{SGLANG_V3} --dp 8 --enable-dp-attention", "DP attention"),
    (f"{SGLANG} --tp 2 --pp 2", "pipeline parallelism"),
    (f"{SGLANG} --enable-lora --lora-paths a=/adapters/a", "LoRA"),
    (f"{SGLANG} --disaggregation-mode prefill", "PD disaggregation"),
    ("python -m sglang.launch_server --model-path google/gemma-3-27b-it", "multimodal"),  # Gemma3ForConditionalGeneration
    ("python -m sglang.launch_server --model-path Qwen/Qwen2.5-VL-7B-Instruct", "multimodal"),
    ("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct", "never graphs piecewise"),
])
def test_sglang_turns_piecewise_graphs_off_where_its_rules_say(command, rule):
    launch = parse_engine_args(f"{command} --enable-piecewise-cuda-graph --piecewise-cuda-graph-max-tokens 1024")
    assert launch.prefill_graph_tokens is None
    note = next(n for n in launch.notes if "turns piecewise CUDA graphs off" in n)
    assert rule in note and "--enforce-piecewise-cuda-graph skips" in note
    assert not any("piecewise" in w for w in launch.unknown)  # read, not left unknown (LoRA's flags are)
    # enforce skips the rules: the graphs stay on, and enforce is written back so that they do
    forced = parse_engine_args(f"{command} --enforce-piecewise-cuda-graph --piecewise-cuda-graph-max-tokens 1024")
    assert forced.prefill_graph_tokens == 1024 and any("skips the rules" in n for n in forced.notes)
    script = launch_command(forced).script
    assert "--enforce-piecewise-cuda-graph --piecewise-cuda-graph-max-tokens 1024" in " ".join(
        script.replace("\\\n", " ").split())
    assert parse_engine_args(script).modelled() == forced.modelled()


def test_sglang_rules_that_do_not_apply_leave_the_graphs_on():
    # expert parallelism without an all-to-all backend is no rule (sglang PR #14164): MLA's 2,048 tokens
    assert parse_engine_args(f"{SGLANG_V3} --ep 8 --enable-piecewise-cuda-graph").prefill_graph_tokens == 2048
    for extra in ("--disaggregation-mode null", "--moe-a2a-backend none"):
        assert parse_engine_args(f"{SGLANG} {extra} --enable-piecewise-cuda-graph --chunked-prefill-size 4096"
                                 ).prefill_graph_tokens == 4096
    # speculative decoding turned them off before sglang PR #22128, not since: on, with a note
    spec = parse_engine_args(f"{SGLANG} --speculative-algorithm NGRAM --speculative-num-draft-tokens 4 "
                             "--enable-piecewise-cuda-graph --chunked-prefill-size 4096")
    assert spec.prefill_graph_tokens == 4096 and any("#22128" in n for n in spec.notes)


def test_graphs_asked_for_under_a_rule_are_written_enforced():
    # a launch with graphs and attention DP (or pipeline stages) needs enforce for SGLang to keep them
    for layout in (dict(tp=8, attention_dp=True, attention_tp=1, ep=8), dict(tp=2, pp=2)):
        model = "deepseek-v3" if layout.get("attention_dp") else "llama-3.1-8b"
        launch = EngineLaunch(engine="sglang", model=model, prefill_graph_tokens=512, **layout)
        script = launch_command(launch).script
        assert "--enforce-piecewise-cuda-graph" in script
        assert parse_engine_args(script).prefill_graph_tokens == 512
    plain = launch_command(EngineLaunch(engine="sglang", model="llama-3.1-8b", prefill_graph_tokens=512)).script
    assert "--enable-piecewise-cuda-graph" in plain and "enforce" not in plain


@pytest.mark.parametrize("options, tokens", [
    ("torch_compile_config: {enable_piecewise_cuda_graph: true, capture_num_tokens: [1, 64, 2048, 512]}", 2048),
    # no list: TensorRT-LLM captures its decode graphs' batch sizes (model_engine.py), 128 by default
    ("torch_compile_config: {enable_piecewise_cuda_graph: true}", 128),
    ("torch_compile_config: {enable_piecewise_cuda_graph: true}\ncuda_graph_config: {max_batch_size: 64}", 64),
    ("torch_compile_config: {enable_piecewise_cuda_graph: true}\ncuda_graph_config: {batch_sizes: [1, 8, 256]}", 256),
    ("torch_compile_config: {enable_piecewise_cuda_graph: true}\ncuda_graph_config: null", None),  # no decode graphs
    ("prefill_cuda_graph_backend: piecewise", 128),
    ("prefill_cuda_graph_backend: piecewise\nprefill_capture_num_tokens: [256, 1024]", 1024),
    ("torch_compile_config: {enable_piecewise_cuda_graph: false, capture_num_tokens: [64]}", None),
])
def test_trtllm_options_read_and_written_back(options, tokens):
    launch = parse_engine_args(TRTLLM.format(options))
    assert launch.engine == "trtllm-pytorch" and launch.prefill_graph_tokens == tokens and launch.unknown == ()
    script = launch_command(launch).script
    assert parse_engine_args(script).modelled() == launch.modelled()
    if tokens is not None:
        assert "enable_piecewise_cuda_graph: true" in script
    legacy = parse_engine_args(TRTLLM.format(options) + " --backend tensorrt")
    assert legacy.prefill_graph_tokens is None and bool(legacy.unknown) == ("enable_piecewise_cuda_graph: true" in
                                                                           options or "backend: piecewise" in options)


def test_the_setting_crosses_engines_where_they_can_express_it():
    launch = parse_engine_args(f"{SGLANG} --enable-piecewise-cuda-graph --piecewise-cuda-graph-max-tokens 1024")
    assert parse_engine_args(launch_command(launch, "trtllm-pytorch").script).prefill_graph_tokens == 1024
    assert "cannot express prefill_graph_tokens" in launch_command(launch, "vllm").script
    assert "cannot express prefill_graph_tokens" in launch_command(launch, "trtllm").script


@settings(max_examples=40, deadline=None)
@given(prompt=st.integers(1, 8192), decodes=st.integers(0, 64), small=st.integers(1, 8192), more=st.integers(0, 8192))
def test_a_larger_limit_never_makes_a_prefill_slower(prompt, decodes, small, more):
    # no limit (eager), a limit, a larger one: each iteration and each static prefill no slower
    dep = deployment("llama-3.1-8b", "h100-sxm", engine="sglang")
    mix = dict(decode_context=np.full(decodes, 700.0), prefill_context=np.zeros(1),
               prefill_tokens=np.array([float(prompt)]), logits=float(decodes + 1))
    limits = (None, small, small + more)
    served = [StepModel(dep, 8192, True, None, n).time(**mix) for n in limits]
    static = [float(estimate("llama-3.1-8b", "h100-sxm", engine="sglang", isl=prompt, osl=2,
                             prefill_graph_tokens=n).ttft_s) for n in limits]
    assert served[2] <= served[1] <= served[0] and static[2] <= static[1] <= static[0]


def test_disaggregated_serving_graphs_the_prefill_pool():
    kw = dict(disaggregation="prefill=h100-sxmx1,decode=h100-sxmx1", engine="sglang", isl=512, osl=4, concurrency=1,
              num_requests=4)
    eager, graphed = (serve("llama-3.1-8b", prefill_graph_tokens=n, **kw).ttft_s for n in (None, 512))
    assert float(np.mean(eager - graphed)) == pytest.approx(float(eager_ttft_drop()), rel=0.03)


def eager_ttft_drop() -> float:
    """The idle TTFT the simulation takes off one 512-token prompt with piecewise graphs [s]."""
    kw = dict(concurrency=1, num_requests=4, **LLAMA)
    return float(np.mean(serve("llama-3.1-8b", "h100-sxm", **kw).ttft_s
                         - serve("llama-3.1-8b", "h100-sxm", prefill_graph_tokens=512, **kw).ttft_s))


def test_a_vllm_decode_pool_takes_no_prefill_graph_limit():
    # the setting is the SGLang prefill pool's; the vLLM decode pool runs no prefill (as estimate() has it)
    from inferlab.phases.disaggregated import estimate_disaggregated
    from inferlab.techniques.disaggregation import Disaggregation, Pool

    split = Disaggregation(prefill=Pool("h100-sxm", 1, engine="sglang"), decode=Pool("h100-sxm", 1, engine="vllm"))
    kw = dict(disaggregation=split, engine="sglang", isl=512, osl=4, concurrency=1, num_requests=4)
    eager, graphed = (serve("llama-3.1-8b", prefill_graph_tokens=n, **kw) for n in (None, 512))
    # the prefill pool's 512-token prompt drops as SGLang's aggregated one does; the decode steps stay
    assert float(np.mean(eager.ttft_s - graphed.ttft_s)) == pytest.approx(eager_ttft_drop(), rel=0.03)
    np.testing.assert_allclose(eager.tpot_s, graphed.tpot_s, rtol=1e-9)  # times differ by the TTFT: rounding
    assert estimate_disaggregated("llama-3.1-8b", split, isl=512, osl=2, engine="sglang",
                                  prefill_graph_tokens=512).prefill_s < \
        estimate_disaggregated("llama-3.1-8b", split, isl=512, osl=2, engine="sglang").prefill_s
    vllm_prefill = Disaggregation(prefill=Pool("h100-sxm", 1, engine="vllm"), decode=Pool("h100-sxm", 1, engine="sglang"))
    with pytest.raises(SpecError, match="vllm runs no prefill eagerly"):  # a vLLM prefill pool still refuses it
        serve("llama-3.1-8b", prefill_graph_tokens=512, **{**kw, "disaggregation": vllm_prefill})


def test_each_chunk_reads_the_weights_again():
    """Llama-3.1-70B in FP8 on 4 H100s holds 70.6e9 / 4 = 17.6 GB of linear weights a GPU (18.2 GB
    with the BF16 embedding and head), read at most at 3.35 TB/s: 5.3 ms a step. An 8,192-token
    prompt in iterations of 32 tokens is 256 steps, so at least 255 x 5.3 ms = 1.34 s; it had been
    timed as one step of the whole prompt plus a step overhead a chunk (0.77 s). A smaller budget
    is never faster."""
    import inferlab

    def ttft(budget):
        return float(inferlab.estimate("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", isl=8192, osl=2,
                                       engine="vllm", max_num_tokens=budget).ttft_s)

    floor = 255 * (70.6e9 / 4) / 3.35e12
    times = [ttft(b) for b in (32, 64, 256, 1024, 8192)]
    assert times[0] >= floor
    assert all(a >= b for a, b in zip(times, times[1:]))


def test_pipeline_stages_overlap_the_chunks():
    # a chunk's step through pp stages takes pp stage-times, but the next chunk enters the first
    # stage as this one leaves it: the chunk floor would charge the stages in series (70B FP8 over
    # four stages, four 8,192-token prompts: 2.08 s had become 3.55 s)
    import inferlab

    def ttft(budget):
        return float(inferlab.estimate("llama-3.1-70b", "h100-sxm", pp=4, precision="fp8", isl=8192, osl=2,
                                       batch_size=4, engine="vllm", max_num_tokens=budget).ttft_s)

    assert ttft(8192) < 1.05 * ttft(32768)
