"""SGLang sizes its prefill chunk from the GPU's memory (sgl-project/sglang, server_args.py,
``_handle_gpu_memory_settings``): 2,048 tokens under 35 GiB, 4,096 under 60 GiB, 8,192 under
160 GiB, 16,384 above. The GPUs' visible memory is their nvidia-smi total (reference NOTES,
trap 2): H100 SXM 81,559 MiB, H200 143,771 MiB, B200 183,359 MiB, L40S 46,068 MiB."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataclasses import replace

from inferlab.engines.scheduler import ENGINE_SCHEDULERS, SchedulerConfig, for_hardware, token_budget
from inferlab.engines.sglang_sizing import memory_budget, running_requests
from inferlab.inputs.resolve import deployment
from inferlab.serving.replica import engine_scheduler, kv_capacity_tokens, scheduler_for

MIB = 2**20


def _serving_iteration(dep) -> float:
    """A serving iteration's own work [s]: the engine's per-iteration term plus its per-kernel
    term for each kernel of a one-sequence decode step (the forward pass; one stage here)."""
    from inferlab.core.graph import Step
    from inferlab.techniques.step import run_step

    prof = dep.profile
    kernels = run_step(dep, Step.decode(np.ones(1), np.full(1, 16.0))).kernels
    return prof.serving_step_overhead_s + prof.serving_kernel_overhead_s * kernels


@pytest.mark.parametrize("mib, tokens", [
    (24_564, 2048),    # RTX 4090: under 35 GiB (35,840 MiB)
    (46_068, 4096),    # L40S: under 60 GiB (61,440 MiB)
    (81_559, 8192),    # H100 SXM
    (143_771, 8192),   # H200: under 160 GiB (163,840 MiB)
    (183_359, 16384),  # B200
    (35 * 1024 - 1, 2048), (35 * 1024, 4096),     # the thresholds: below is the smaller chunk
    (60 * 1024 - 1, 4096), (60 * 1024, 8192),
    (160 * 1024 - 1, 8192), (160 * 1024, 16384),
])
def test_sglang_chunk_follows_the_gpu_memory(mib, tokens):
    assert memory_budget(mib * MIB) == tokens


@pytest.mark.parametrize("gpu, mib, tokens", [("h100-sxm", 81_559, 8192), ("h200-sxm", 143_771, 8192),
                                             ("b200", 183_359, 16384), ("l40s", 46_068, 4096)])
def test_an_sglang_deployment_gets_its_gpus_chunk(gpu, mib, tokens):
    dep = deployment("llama-3.1-8b", gpu, engine="sglang")
    assert dep.hardware.usable_memory_capacity.si == mib * MIB  # the nvidia-smi totals above
    assert scheduler_for(dep, engine_scheduler("sglang")).max_num_batched_tokens == tokens


def test_a_budget_set_by_the_user_wins_and_other_engines_keep_theirs():
    dep = deployment("llama-3.1-8b", "b200", engine="sglang")
    assert scheduler_for(dep, engine_scheduler("sglang", max_num_batched_tokens=4096)).max_num_batched_tokens == 4096
    # however the budget is set: a scheduler built with replace() keeps it too
    mine = replace(ENGINE_SCHEDULERS["sglang"], max_num_batched_tokens=4096)
    assert scheduler_for(dep, mine).max_num_batched_tokens == 4096
    assert scheduler_for(dep, engine_scheduler("vllm")).max_num_batched_tokens == 8192
    assert for_hardware(SchedulerConfig(max_num_batched_tokens=2048), dep.hardware).max_num_batched_tokens == 2048
    # without chunked prefill SGLang's budget is max_prefill_tokens (16,384), not sized by memory
    # (with a memory share given: SGLang's own sizing reserves 1.5 MiB per token of that 16,384-token
    # batch, more than a 24 GB card has, and it would not start)
    whole = engine_scheduler("sglang", chunked_prefill=False, gpu_memory_utilization=0.9)
    assert scheduler_for(deployment("llama-3.1-8b", "rtx-4090", engine="sglang"), whole).max_num_batched_tokens == 16384


def test_the_kv_pool_is_sized_with_the_chunk_the_engine_runs():
    # the activation workspace grows with the iteration's tokens: B200's 16,384-token chunk leaves
    # a smaller KV pool than the same engine told to run 8,192
    dep = deployment("llama-3.1-8b", "b200", engine="sglang")
    sized = kv_capacity_tokens(dep, engine_scheduler("sglang"))
    eight = kv_capacity_tokens(dep, engine_scheduler("sglang", max_num_batched_tokens=8192))
    sixteen = kv_capacity_tokens(dep, engine_scheduler("sglang", max_num_batched_tokens=16384))
    assert sized == sixteen < eight


def test_plan_launch_writes_the_budget_its_simulation_ran():
    from inferlab.planning.launch import winner_launch
    from types import SimpleNamespace

    from inferlab.planning.candidate import Candidate

    best = Candidate(model="llama-3.1-8b", hardware="b200", precision="bf16", tp=1, ep=1, speculative=None,
                     feasible=True, replicas=1)
    traffic, search = SimpleNamespace(prefix=None, prefix_hit=0.0), SimpleNamespace(max_num_seqs=None)
    launch = winner_launch(SimpleNamespace(best=best, scenario=SimpleNamespace(engine="sglang", traffic=traffic, search=search)))
    assert launch.max_num_batched_tokens == 16384
    h100 = winner_launch(SimpleNamespace(best=replace(best, hardware="h100-sxm"),
                                         scenario=SimpleNamespace(engine="sglang", traffic=traffic, search=search)))
    assert h100.max_num_batched_tokens == 8192
    vllm = winner_launch(SimpleNamespace(best=best, scenario=SimpleNamespace(engine="vllm", traffic=traffic, search=search)))
    assert vllm.max_num_batched_tokens == 8192  # vLLM's own default, written as before


def test_sglang_limits_are_the_replicas_under_attention_dp_and_tensorrt_llms_each_ranks():
    # SGLang with --enable-dp-attention divides chunked_prefill_size and max_running_requests by
    # dp_size: 8 ranks of a B200 replica share 16,384 tokens and 256 sequences
    sglang = deployment("deepseek-v3", "b200", tp=8, ep=8, attention_dp=True, precision="nvfp4", engine="sglang")
    sched = scheduler_for(sglang, engine_scheduler("sglang", max_num_seqs=256))
    assert (sched.max_num_batched_tokens, sched.max_num_seqs) == (16384, 256)
    # TensorRT-LLM's max_num_tokens and max_batch_size are each rank's: 8 x 8,192 and 8 x 2,048
    trtllm = deployment("deepseek-v3", "b200", tp=8, ep=8, attention_dp=True, precision="nvfp4", engine="trtllm")
    sched = scheduler_for(trtllm, engine_scheduler("trtllm"))
    assert (sched.max_num_batched_tokens, sched.max_num_seqs) == (65536, 16384)


def test_prompt_limits_are_each_ranks_and_the_kv_workspace_each_ranks_budget():
    # SGLang's ranks read max_prefill_tokens undivided: 8 ranks of 2,524 take 8 x 2,524 prompt tokens
    sglang = deployment("deepseek-v3", "b200", tp=8, ep=8, attention_dp=True, precision="nvfp4", engine="sglang")
    sched = scheduler_for(sglang, engine_scheduler("sglang", max_prefill_tokens=2524))
    assert sched.max_prefill_tokens == 8 * 2524
    # TensorRT-LLM's max_num_tokens is each rank's: 1,024 per rank is the workspace of 8 x 1,024
    # tokens shared over 8 ranks, so the KV pool is what a replica-wide budget of 8,192 leaves
    trtllm = deployment("deepseek-v3", "b200", tp=8, ep=8, attention_dp=True, precision="nvfp4", engine="trtllm")
    per_rank = kv_capacity_tokens(trtllm, engine_scheduler("trtllm", max_num_batched_tokens=1024))
    shared = kv_capacity_tokens(trtllm, engine_scheduler("trtllm", max_num_batched_tokens=8192, limits_per_rank=False))
    assert per_rank == pytest.approx(shared, rel=1e-12)
    assert per_rank > kv_capacity_tokens(trtllm, engine_scheduler("trtllm", max_num_batched_tokens=8192))


# --- SGLang's running requests, sized from its KV pool -------------------------------------
# sgl-project/sglang model_runner: a request-to-token pool of KV tokens / context length x 512
# requests, clamped to 2,048..4,096, per data-parallel worker; the scheduler runs at most that
# many and half the KV tokens when --max-running-requests is not given.


@pytest.mark.parametrize("kv_tokens, context_len, slots", [
    (450_000, 131_072, 2048),     # 450,000 / 131,072 x 512 = 1,757: the floor
    (900_000, 131_072, 3515),     # 900,000 / 131,072 x 512 = 3,515.6
    (2_000_000, 131_072, 4096),   # 7,812: the ceiling
    (3_000, 4_096, 1500),         # a pool of 3,000 tokens runs at most 1,500 requests
])
def test_sglang_running_requests_follow_its_kv_pool(kv_tokens, context_len, slots):
    assert running_requests(kv_tokens, context_len) == slots


def test_sglang_runs_the_requests_its_pool_holds_not_256():
    # Llama-3.1-8B (131,072-token context) on one H200: a KV pool of several hundred thousand
    # tokens, so 2,048 or more requests run at once (vLLM keeps its 1,024 on a GPU of >= 70 GiB)
    dep = deployment("llama-3.1-8b", "h200-sxm", precision="fp8", engine="sglang")
    sched = scheduler_for(dep, engine_scheduler("sglang"))
    kv = kv_capacity_tokens(dep, engine_scheduler("sglang"))
    assert 2048 <= sched.max_num_seqs <= 4096
    assert sched.max_num_seqs == max(2048, min(4096, int(kv / 131_072 * 512)))
    assert scheduler_for(dep, engine_scheduler("vllm")).max_num_seqs == 1024
    # set by the user: the user's
    assert scheduler_for(dep, engine_scheduler("sglang", max_num_seqs=128)).max_num_seqs == 128
    # with attention DP each rank sizes its own pool: the replica holds every rank's
    ds = deployment("deepseek-v3", "b200", tp=8, ep=8, attention_dp=True, precision="nvfp4", engine="sglang")
    per_rank = kv_capacity_tokens(ds, engine_scheduler("sglang")) / 8
    assert scheduler_for(ds, engine_scheduler("sglang")).max_num_seqs == 8 * running_requests(per_rank, 163_840)


def test_static_estimate_and_planner_take_the_engines_budget_on_the_gpu():
    # estimate() chunks a prompt by the engine's budget on that GPU: SGLang's 16,384 on a B200
    # prefills a 16,000-token prompt in one chunk where vLLM's 8,192 takes two
    from inferlab import estimate
    from inferlab.specs.catalog import load_hardware

    assert token_budget("sglang", load_hardware("b200")) == 16384
    assert token_budget("sglang", load_hardware("h100-sxm")) == 8192
    assert token_budget("vllm", load_hardware("b200")) == 8192
    sg = estimate("llama-3.1-8b", "b200", engine="sglang", isl=16000, osl=2)
    given = estimate("llama-3.1-8b", "b200", engine="sglang", isl=16000, osl=2, max_num_tokens=8192)
    same = estimate("llama-3.1-8b", "b200", engine="sglang", isl=16000, osl=2, max_num_tokens=16384)
    assert float(sg.ttft_s) == float(same.ttft_s)
    assert float(given.ttft_s) > float(sg.ttft_s)  # a second chunk re-reads the weights and pays a step


# --- SGLang's CUDA-graph batch limit: decode batches beyond it run eagerly ------------------
# sgl-project/sglang server_args.py _handle_gpu_memory_settings: cuda_graph_max_bs 8 under 20 GiB;
# 24 (tp < 4) or 80 under 35 GiB; 32 or 160 under 60 GiB; 256 or 512 under 160 GiB; 512 above.


@pytest.mark.parametrize("mib, tp, batch", [
    (15_360, 1, 8), (15_360, 8, 8),          # T4: 8 at any TP
    (24_564, 1, 24), (24_564, 4, 80),        # RTX 4090
    (46_068, 2, 32), (46_068, 4, 160),       # L40S
    (81_559, 1, 256), (81_559, 4, 512),      # H100 SXM
    (143_771, 2, 256), (143_771, 8, 512),    # H200
    (183_359, 1, 512), (183_359, 8, 512),    # B200
])
def test_sglang_graph_batch_follows_the_gpu_memory_and_tp(mib, tp, batch):
    from inferlab.engines.sglang_sizing import graph_batch_limit

    assert graph_batch_limit(mib * MIB, tp) == batch


def test_a_decode_batch_beyond_sglangs_graphs_runs_eagerly():
    import numpy as np

    from inferlab.core.graph import Step
    from inferlab.serving.stepmodel import StepModel
    from inferlab.techniques.step import run_step

    assert scheduler_for(deployment("llama-3.1-8b", "h100-sxm", engine="sglang"),
                         engine_scheduler("sglang")).graph_max_batch == 256  # H100, TP1
    assert scheduler_for(deployment("llama-3.1-8b", "h100-sxm", tp=4, engine="sglang"),
                         engine_scheduler("sglang")).graph_max_batch == 512
    dep = deployment("llasa-1b", "h100-sxm", engine="sglang")  # a small model: the host issues slower than it runs
    assert scheduler_for(dep, engine_scheduler("vllm")).graph_max_batch >= 10**6  # vLLM: every batch graphed
    # the host issues every kernel of the decode graph at the engine's eager decode rate: 25.5 us,
    # an eager Llama-3-8B decode of 8.23 ms over inferlab's 323 kernels of it (sglang PR #1401)
    llama = deployment("llama-3.1-8b", "h100-sxm", engine="sglang")
    assert run_step(llama, Step.decode(np.ones(1), np.full(1, 16.0))).kernels == 323
    assert llama.profile.eager_decode_host_per_kernel_s == pytest.approx(8.23e-3 / 323, rel=1e-3)
    floor = run_step(dep, Step.decode(np.ones(1), np.full(1, 16.0))).kernels * dep.profile.eager_decode_host_per_kernel_s
    graphed = StepModel(dep, 1024, graph_max_batch=None)
    limited = StepModel(dep, 1024, graph_max_batch=256)
    none = np.zeros(0)
    short = np.full(257, 64.0)
    gpu = graphed.time(decode_context=short, prefill_context=none, prefill_tokens=none, logits=257.0)
    eager = limited.time(decode_context=short, prefill_context=none, prefill_tokens=none, logits=257.0)
    # without overlap the host's per-iteration work follows the GPU's: the eager iteration is the
    # issue time plus that work, the graphed one the GPU's work plus it
    host = dep.profile.step_overhead_s + _serving_iteration(dep)
    assert gpu - host < floor
    assert eager == pytest.approx(floor + host, rel=1e-12)
    assert limited.time_decode(short)[0] == pytest.approx(eager, rel=1e-12)
    # at the graphs' largest batch it replays one: the same as without a limit
    at = np.full(256, 64.0)
    assert limited.time_decode(at) == graphed.time_decode(at)


def test_a_static_batch_beyond_sglangs_graphs_decodes_eagerly():
    # 257 short sequences of a 1B model on one H100 under SGLang: past its 256-sequence graphs every
    # decode step lasts at least the host's issue time of the decode graph's kernels; vLLM graphs it
    import numpy as np

    from inferlab import estimate
    from inferlab.core.graph import Step
    from inferlab.techniques.step import run_step

    kw = dict(isl=64, osl=16)
    at, past = (estimate("llasa-1b", "h100-sxm", engine="sglang", batch_size=b, **kw) for b in (256, 257))
    dep = past.deployment
    floor = run_step(dep, Step.decode(np.ones(1), np.full(1, 16.0))).kernels * dep.profile.eager_decode_host_per_kernel_s
    assert float(at.tpot_s) < floor <= float(past.tpot_s)
    vllm = estimate("llasa-1b", "h100-sxm", engine="vllm", batch_size=257, **kw)
    assert float(vllm.tpot_s) < floor
    # explain's levers name the graphs' size, and no longer offer a larger batch, which stays eager
    levers = past.explain().split("what would move the numbers:")[1]
    assert "its batch of 257 beyond the engine's largest CUDA graph (256)" in levers
    assert "a larger batch does not" in levers and "a larger batch help" not in levers
    assert "reuses each weight read" not in levers
    assert "beyond the engine's largest CUDA graph" not in at.explain()


def test_graph_max_batch_is_a_limit_users_set(capsys, tmp_path):
    # graph_max_batch=0 is SGLang with --disable-cuda-graph: every decode step eager, slower for a
    # 1B model whose decode the host outlasts; serve(), estimate(), a Deployment, a deployment file,
    # engine args and the CLI take it alike; an engine whose eager rate is unknown refuses it
    import json

    from inferlab import Deployment, SpecError, estimate, serve
    from inferlab.cli.main import main

    kw = dict(engine="sglang", isl=64, osl=32, concurrency=4, num_requests=16)
    graphed = serve("llasa-1b", "h100-sxm", **kw)
    eager = serve("llasa-1b", "h100-sxm", graph_max_batch=0, **kw)
    assert eager.tpot_s.mean() > graphed.tpot_s.mean()
    dep = Deployment.from_dict({"model": "llasa-1b", "hardware": "h100-sxm",
                                "engine": {"name": "sglang", "graph_max_batch": 0}})
    assert dep.engine.limits() == {"graph_max_batch": 0}
    flags = ["--isl", "64", "--osl", "32", "--concurrency", "4", "--num-requests", "16", "--json"]
    assert main(["serve", "llasa-1b", "h100-sxm", "--engine", "sglang", "--graph-max-batch", "0", *flags]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert main(["serve", "llasa-1b", "h100-sxm", "--engine", "sglang", *flags]) == 0
    assert json.dumps(cli) != capsys.readouterr().out  # the flag moved the figures
    # the static estimate: the deployment file's limit and the engine flag give the same step
    path = tmp_path / "d.yaml"
    path.write_text("model: llasa-1b\nhardware: h100-sxm\nengine: {name: sglang, graph_max_batch: 0}\n")
    assert main(["estimate", "--file", str(path), "--batch", "8", "--json"]) == 0
    filed = capsys.readouterr()
    assert main(["estimate", "h100-sxm", "--engine-args", "python -m sglang.launch_server --model-path "
                 "HKUSTAudio/Llasa-1B --disable-cuda-graph", "--batch", "8", "--json"]) == 0
    flagged = capsys.readouterr()
    assert json.loads(filed.out)["tpot_s"] == json.loads(flagged.out)["tpot_s"]
    assert "not used here" not in filed.err + flagged.err
    static = estimate("llasa-1b", "h100-sxm", engine="sglang", batch_size=8, graph_max_batch=0)
    assert float(static.tpot_s) > float(estimate("llasa-1b", "h100-sxm", engine="sglang", batch_size=8).tpot_s)
    # 300 sequences past SGLang's 256 run eagerly unless the graphs reach them
    short = dict(batch_size=300, isl=64, osl=16)
    big = estimate("llasa-1b", "h100-sxm", engine="sglang", graph_max_batch=4096, **short)
    assert float(big.tpot_s) < float(estimate("llasa-1b", "h100-sxm", engine="sglang", **short).tpot_s)
    with pytest.raises(SpecError, match="graph_max_batch"):
        Deployment.from_dict({"model": "llasa-1b", "hardware": "h100-sxm",
                              "engine": {"name": "sglang", "graph_max_batch": -1}})
    for call in (lambda: serve("llasa-1b", "h100-sxm", engine="vllm", graph_max_batch=0, isl=64, osl=8,
                               concurrency=1, num_requests=2),
                 lambda: estimate("llasa-1b", "h100-sxm", engine="lmdeploy", graph_max_batch=64)):
        with pytest.raises(SpecError, match="no measured host rate"):
            call()


def test_graphs_hold_a_pipeline_micro_batch_and_every_path_applies_the_limit():
    # with two pipeline stages each of the two micro-batches in flight is one graph: 400 sequences
    # are two graphs of 200, under SGLang's 256 on an H100; the planner's curve and the
    # disaggregated estimate run a 300-sequence decode eagerly as estimate() does
    from inferlab import estimate
    from inferlab.phases.disaggregated import estimate_disaggregated
    from inferlab.planning.curve import _curve

    pp = estimate("llasa-1b", "h100-sxm", engine="sglang", pp=2, batch_size=400, isl=128, osl=256)
    pp_graphed = estimate("llasa-1b", "h100-sxm", engine="sglang", pp=2, batch_size=400, isl=128, osl=256,
                          graph_max_batch=4096)
    assert float(pp.tpot_s) == float(pp_graphed.tpot_s)
    eager = float(estimate("llasa-1b", "h100-sxm", engine="sglang", batch_size=300, isl=128, osl=256).tpot_s)
    from inferlab.planning.curve import _BATCHES

    curve = _curve("llasa-1b", "h100-sxm", 1, 1, 1, "bf16", None, "sglang", "default", 0.0, 128, 256)
    j = int(np.flatnonzero(_BATCHES > 256)[0])  # the curve's first batch past the graphs
    at = estimate("llasa-1b", "h100-sxm", engine="sglang", batch_size=int(_BATCHES[j]), isl=128, osl=256)
    graphed = estimate("llasa-1b", "h100-sxm", engine="sglang", batch_size=int(_BATCHES[j]), isl=128, osl=256,
                       graph_max_batch=4096)
    # the planner's step also costs SGLang's host work per serving iteration (serve() charges it),
    # and its overlap scheduler runs the step's own host work beside the GPU's (max(gpu, host))
    prof = curve.deployment.profile
    serving, host = _serving_iteration(curve.deployment), prof.step_overhead_s
    expected = max(float(at.tpot_s) - host, host) + serving
    assert float(graphed.tpot_s) - host + serving < float(curve.tpot_s[j]) == pytest.approx(expected, rel=1e-9)
    disagg = estimate_disaggregated("llasa-1b", "prefill=h100-sxmx1,decode=h100-sxmx1", isl=128, osl=256,
                                    decode_batch=300, engine="sglang")
    assert float(disagg.tpot_s) == pytest.approx(eager, rel=1e-9)


def test_sglang_speculation_runs_48_requests_without_overlap():
    # sglang server_args _handle_speculative_decoding: EAGLE, EAGLE3, NEXTN and a standalone draft
    # model reset an unset --max-running-requests to 48 and turn the overlap scheduler off
    from inferlab.engines.speculation_limits import for_speculation

    sg = engine_scheduler("sglang")
    for method in ("eagle", "mtp", "draft"):
        spec = for_speculation("sglang", sg, method)
        assert (spec.max_num_seqs, spec.overlap_host) == (48, False)
    assert for_speculation("sglang", engine_scheduler("sglang", max_num_seqs=128), "eagle").max_num_seqs == 128
    assert for_speculation("sglang", sg, "ngram") == sg
    assert for_speculation("vllm", engine_scheduler("vllm"), "eagle") == engine_scheduler("vllm")
    from inferlab import serve

    kw = dict(engine="sglang", isl=256, osl=64, concurrency=100, num_requests=200, speculative="eagle:k=4,accept=0.7")
    default = serve("llama-3.1-8b", "h100-sxm", **kw)
    capped = serve("llama-3.1-8b", "h100-sxm", max_num_seqs=48, **kw)
    assert default.summary()["ttft"]["mean"] == capped.summary()["ttft"]["mean"]  # 52 of 100 clients wait


def test_the_planner_prefills_with_the_engines_budget_on_the_gpu():
    # a 16,000-token prompt: one chunk under SGLang's 16,384 on a B200, two under vLLM's 8,192; the
    # planner's prefill of one prompt pays a step overhead per chunk beyond the first (none under
    # an overlap scheduler: the host plans the next chunk while the GPU runs this one)
    from inferlab.planning.curve import _prefill_and_memory

    args = ("llama-3.1-8b", "b200", 1, 1, 1, "bf16")
    sg = _prefill_and_memory(*args, "sglang", "default", 0.0, 16000, 64)
    vl = _prefill_and_memory(*args, "vllm", "default", 0.0, 16000, 64)
    from inferlab.techniques.step import run_step
    from inferlab.core.graph import Step

    one = float(run_step(sg[0], Step.prefill(np.ones(()), np.asarray(16000.0))).time_s)
    # and each chunk is a serving iteration: its host work per in-flight-batching iteration too;
    # both engines overlap the step's own host work (run_step charges one) with the GPU's
    prof = sg[0].profile
    assert sg[3] == 1 and sg[2] == pytest.approx(one - prof.step_overhead_s + _serving_iteration(sg[0]), rel=1e-12)
    vone = float(run_step(vl[0], Step.prefill(np.ones(()), np.asarray(16000.0))).time_s)
    prof = vl[0].profile
    assert vl[3] == 2 and vl[2] == pytest.approx(vone - prof.step_overhead_s + 2 * _serving_iteration(vl[0]),
                                                 rel=1e-12)


_STEPS: dict = {}


def _step_models(model: str):
    """One graphed and one 64-sequence-limited step model per model (built once: they tabulate)."""
    from inferlab.serving.stepmodel import StepModel

    if model not in _STEPS:
        dep = deployment(model, "h100-sxm", engine="sglang")
        _STEPS[model] = (StepModel(dep, 4096, graph_max_batch=None), StepModel(dep, 4096, graph_max_batch=64))
    return _STEPS[model]


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(["llasa-1b", "llama-3.1-8b", "qwen3-30b-a3b"]), batch=st.integers(1, 512),
       context=st.floats(1.0, 8192.0))
def test_a_graph_limit_never_speeds_a_decode_and_changes_none_within_it(model, batch, context):
    graphed, limited = _step_models(model)
    ctx = np.full(batch, context)
    free, capped = graphed.time_decode(ctx)[0], limited.time_decode(ctx)[0]
    if batch <= 64:
        assert capped == free
    else:
        assert capped >= free


def test_max_model_len_sizes_sglangs_pool_and_refuses_longer_requests(capsys):
    # SGLang's request pool is KV tokens / context length x 512: a context of 8,192 instead of the
    # model's 131,072 gives 16 x the slots, up to the 4,096 ceiling; a request longer than the
    # engine's limit is refused in one line, by serve() and by the CLI
    from inferlab import SpecError, serve
    from inferlab.cli.main import main
    from inferlab.engines import parse_engine_args

    dep = deployment("llama-3.1-8b", "h100-sxm", engine="sglang")
    kv = kv_capacity_tokens(dep, engine_scheduler("sglang"))
    short = scheduler_for(dep, engine_scheduler("sglang", max_model_len=8192)).max_num_seqs
    assert short == min(4096, int(kv) // 2, max(2048, int(kv / 8192 * 512)))
    assert short > scheduler_for(dep, engine_scheduler("sglang")).max_num_seqs
    launch = parse_engine_args("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                               "--context-length 8192")
    assert launch.to_kwargs("serve")["max_model_len"] == 8192
    with pytest.raises(SpecError, match="longer than max_model_len=1,000"):
        serve("llama-3.1-8b", "h100-sxm", engine="vllm", max_model_len=1000, isl=900, osl=200, concurrency=2,
              num_requests=4)
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--max-model-len", "1000", "--isl", "900", "--osl", "200",
                 "--concurrency", "2", "--num-requests", "4"]) == 2
    err = capsys.readouterr().err
    assert "max_model_len=1,000" in err and len(err.strip().splitlines()) == 1


def test_a_max_model_len_beyond_the_models_positions_is_refused_unless_allowed():
    # llama-3.1-8b was trained for 131,072 positions; vLLM and SGLang refuse a longer
    # --max-model-len / --context-length unless told, and so does serve, pooled or not; a prompt
    # beyond the positions is refused by the disaggregated serve as by the aggregated one
    from inferlab import SpecError, serve
    from inferlab.cli.main import main

    pools = "prefill=h200x1,decode=h200x1"
    for where in ({"hardware": "h200-sxm"}, {"disaggregation": pools}):
        with pytest.raises(SpecError, match="max_model_len=200,000 exceeds the 131,072 positions"):
            serve("llama-3.1-8b", **where, max_model_len=200_000, isl=1000, osl=100, rate=0.5, num_requests=4)
        assert serve("llama-3.1-8b", **where, max_model_len=200_000, isl=1000, osl=100, rate=0.5, num_requests=4,
                     allow_long_context=True).ttft_s.mean() > 0
        assert serve("llama-3.1-8b", **where, max_model_len=131_072, isl=1000, osl=100, rate=0.5,
                     num_requests=4).ttft_s.mean() > 0
    with pytest.raises(SpecError, match="isl \\+ osl = 140,100 tokens exceeds the 131,072 positions"):
        serve("llama-3.1-8b", disaggregation=pools, isl=140_000, osl=100, rate=0.1, num_requests=2)
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--max-model-len", "200000", "--rate", "1",
                 "--num-requests", "4"]) == 2


def test_a_fleet_refuses_a_graph_limit_it_cannot_price():
    from inferlab import SpecError
    from inferlab.fleet.api import fleet

    with pytest.raises(SpecError, match="no measured host rate"):
        fleet("llama-3.1-8b", "h100-sxm", engine="vllm", graph_max_batch=64, traffic={"rate": 1.0},
              horizon_s=10.0)


def test_explain_says_a_decode_past_the_graphs_is_host_bound():
    from inferlab import estimate

    past = estimate("llasa-1b", "h100-sxm", engine="sglang", batch_size=300, isl=64, osl=16).explain()
    line = next(x for x in past.splitlines() if x.startswith("decode:"))
    assert "host-bound" in line and "largest CUDA graph" in line
    within = estimate("llasa-1b", "h100-sxm", engine="sglang", batch_size=200, isl=64, osl=16).explain()
    assert "host-bound" not in next(x for x in within.splitlines() if x.startswith("decode:"))


def test_limits_reach_the_speculative_disaggregated_and_fleet_paths():
    # a user's graph limit slows a speculative static decode and a disaggregated decode pool as it
    # does a plain one; max_model_len is refused by the disaggregated pools and the fleet too; the
    # planner sizes an SGLang speculative candidate at 48 sequences
    from types import SimpleNamespace

    from inferlab import SpecError, estimate, serve
    from inferlab.fleet.api import fleet
    from inferlab.planning.search import sequence_limit

    spec = dict(engine="sglang", speculative="eagle3-llama-3.1-8b")
    assert float(estimate("llama-3.1-8b", "h100-sxm", graph_max_batch=0, **spec).tpot_s) > \
        float(estimate("llama-3.1-8b", "h100-sxm", **spec).tpot_s)
    pools = dict(disaggregation="prefill=h100-sxm,decode=h100-sxm", engine="sglang")
    assert float(estimate("llama-3.1-8b", None, graph_max_batch=0, **pools).tpot_s) > \
        float(estimate("llama-3.1-8b", None, **pools).tpot_s)
    with pytest.raises(SpecError, match="max_model_len=100"):
        serve("llama-3.1-8b", max_model_len=100, isl=1024, osl=128, rate=1.0, num_requests=4, **pools)
    with pytest.raises(SpecError, match="max_model_len=100"):
        fleet("llama-3.1-8b", "h100-sxm", engine="sglang", max_model_len=100, horizon_s=30.0,
              traffic={"shape": "constant", "rate": 1, "isl": 1024, "osl": 128})
    scenario = SimpleNamespace(engine="sglang", search=SimpleNamespace(max_num_seqs=None))
    dep = deployment("llama-3.1-8b", "h100-sxm", engine="sglang")
    assert sequence_limit(scenario, dep, "eagle3-llama-3.1-8b") == 48 < sequence_limit(scenario, dep)


def test_a_static_batch_runs_in_waves_of_the_engines_sequence_limit():
    # 512 requests on vLLM with --max-num-seqs 256: two waves of 256, each decoding as a batch of
    # 256 does; the mean TTFT is the first wave's plus half a wave (the second waits one wave:
    # its prefill and 127 decode steps); tokens per second are a batch of 256's
    from inferlab import estimate

    kw = dict(engine="vllm", isl=128, osl=128)
    half = estimate("llama-3.1-8b", "h100-sxm", batch_size=256, **kw)
    waves = estimate("llama-3.1-8b", "h100-sxm", batch_size=512, max_num_seqs=256, **kw)
    together = estimate("llama-3.1-8b", "h100-sxm", batch_size=512, **kw)
    assert float(waves.waves) == 2 and float(together.waves) == 1
    assert float(waves.tpot_s) == float(half.tpot_s) < float(together.tpot_s)
    wave = float(half.ttft_s) + 127 * float(half.tpot_s)
    assert float(waves.ttft_s) == pytest.approx(float(half.ttft_s) + wave / 2, rel=1e-9)
    assert float(waves.output_tokens_per_s) == pytest.approx(float(half.output_tokens_per_s), rel=1e-9)
    # the limit per rank of an engine whose limits are a rank's: TensorRT-LLM with attention DP
    ds = dict(tp=8, ep=8, attention_dp=True, precision="nvfp4", engine="trtllm", isl=1024, osl=64)
    ranked = estimate("deepseek-v3", "b200", batch_size=64, max_num_seqs=8, **ds)
    assert float(ranked.waves) == 1  # 8 ranks x 8
    assert float(estimate("deepseek-v3", "b200", batch_size=64, max_num_seqs=4, **ds).waves) == 2


def test_the_static_estimate_and_the_simulation_hold_the_same_kv_pool_at_every_batch():
    # engines reserve activation memory for their whole token budget at start-up (vLLM's profile run
    # of max_num_batched_tokens), so the sequences that fit do not depend on the batch asked about:
    # Llama-3.1-70B on two H100s with 2,304-token requests held 13 at batch 1 and 10 at batch 10.
    # By hand: 0.92 (vLLM's share) x 85.52 GB = 78.68 GB, less 70.55 GB of weights, 1.07 GB of
    # reserve and 1.24 GB of workspace for the 8,192-token budget leaves 5.81 GB: 15 sequences of
    # 2,304 tokens x 160 KiB (80 layers x 8 KV heads x 128 x 2 x 2 B / tp 2) = 0.377 GB
    import inferlab
    from inferlab.serving.replica import engine_scheduler, kv_capacity_tokens

    est = inferlab.estimate("llama-3.1-70b", "h100-sxm", tp=2, engine="vllm", isl=2048, osl=256, batch_size=[1, 4, 10])
    assert list(est.memory.max_sequences) == [15.0, 15.0, 15.0]
    pool = kv_capacity_tokens(est.deployment, engine_scheduler("vllm")) * est.memory.kv_per_token
    assert pool == pytest.approx(float(est.memory.kv_budget), rel=1e-9)


def test_vllm_without_chunked_prefill_reserves_its_whole_context_in_the_estimate_too():
    # vLLM without chunked prefill prefills a prompt in one iteration, so its budget (and the
    # activation memory it profiles at start-up) is max(max_model_len, 2048): 32,768 tokens here,
    # four times the 8,192 of chunked prefill; the estimate holds the pool the simulation holds
    import inferlab
    from inferlab.engines import parse_engine_args
    from inferlab.serving.replica import engine_scheduler, kv_capacity_tokens, unchunked_budget

    args = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768"
    chunked = inferlab.estimate(hardware="h100-sxm", **parse_engine_args(args).to_kwargs())
    whole = inferlab.estimate(hardware="h100-sxm", **parse_engine_args(args + " --no-enable-chunked-prefill").to_kwargs())
    assert float(whole.memory.workspace) == pytest.approx(4 * float(chunked.memory.workspace), rel=0.05)
    sched = unchunked_budget(whole.deployment, engine_scheduler("vllm", None, chunked_prefill=False,
                                                                        max_model_len=32768))
    assert sched.max_num_batched_tokens == 32768
    pool = kv_capacity_tokens(whole.deployment, sched) * whole.memory.kv_per_token
    assert pool == pytest.approx(float(whole.memory.kv_budget), rel=1e-9)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm-pytorch", "generic"])
@pytest.mark.parametrize("layout", [dict(model="llama-3.1-70b", tp=2),
                                    dict(model="deepseek-v3", tp=8, ep=8, precision="fp8"),
                                    dict(model="deepseek-v3", tp=8, ep=8, attention_dp=True, precision="fp8")])
def test_the_estimate_holds_each_engines_kv_pool_as_the_simulation_does(engine, layout):
    # TensorRT-LLM's KV pool is free_gpu_memory_fraction (0.9) of what weights and activations
    # leave of all memory, vLLM's and SGLang's what they leave of 0.9 of it; with attention DP
    # each vLLM or TensorRT-LLM rank runs its own 8,192-token budget, SGLang's ranks share one
    # (chunked_prefill_size // dp). Per GPU, the pool times the attention-DP ranks is the replica's.
    import inferlab
    from inferlab.serving.replica import engine_scheduler, kv_capacity_tokens

    layout = dict(layout)
    est = inferlab.estimate(layout.pop("model"), "h200-sxm", engine=engine, isl=1024, osl=1024, batch_size=8, **layout)
    pool = kv_capacity_tokens(est.deployment, engine_scheduler(engine)) * est.memory.kv_per_token
    ranks = est.deployment.parallel.attention_groups
    assert pool == pytest.approx(float(est.memory.kv_budget) * ranks, rel=1e-9)


def test_tensorrt_llm_takes_its_share_of_the_free_memory():
    # 0.9 x (capacity - weights - workspace - reserve) against vLLM's 0.92 x capacity - the same: on
    # a 141 GB H200 (150.75 GB visible) holding Llama-3.1-70B BF16 over two GPUs (72.87 GB of
    # weights, workspace and reserve) the difference is 0.1 x 72.87 - 0.02 x 150.75 ~ 4.27 GB per
    # GPU more for TensorRT-LLM
    import inferlab

    vllm = inferlab.estimate("llama-3.1-70b", "h200-sxm", tp=2, engine="vllm")
    trt = inferlab.estimate("llama-3.1-70b", "h200-sxm", tp=2, engine="trtllm-pytorch")
    m = vllm.memory
    left = m.capacity - m.weights - float(m.workspace) - m.reserve
    assert float(trt.memory.kv_budget) == pytest.approx(0.9 * left, rel=1e-9)
    assert float(vllm.memory.kv_budget) == pytest.approx(0.92 * m.capacity - (m.weights + float(m.workspace) + m.reserve),
                                                        rel=1e-9)
    assert float(trt.memory.kv_budget) - float(vllm.memory.kv_budget) == pytest.approx(4.27e9, rel=0.02)


@pytest.mark.parametrize("model, hardware, isl", [
    ("llama-3.1-70b", "h100-sxm", 32000),  # tp=2 had been named: it needs 78.1 GB of 77.0
    ("deepseek-v3", "l40s", 8192),          # tp8 x pp2 had been named: 44.0 GB of 43.5
    ("llama-3.1-405b", "h20", 1024),        # pipeline stages across nodes had been named on a part with no NIC
    ("llama-3.1-405b", "h100-sxm", 32000),
    ("gemma-3-27b", "l4", 32000),
])
def test_the_layout_a_refusal_names_runs(model, hardware, isl):
    # the hint checks each layout as the estimate will: the workspace counted, a sequence's KV over
    # the KV heads the TP splits (replicated past them), stages on separate nodes only with a NIC
    import inferlab
    from inferlab import InfeasibleError

    with pytest.raises(InfeasibleError) as info:
        inferlab.estimate(model, hardware, isl=isl)
    suggestion = info.value.suggestion
    if suggestion:
        inferlab.estimate(model, hardware, isl=isl, **suggestion)  # runs
        smaller = dict(suggestion, tp=suggestion["tp"] // 2) if suggestion["tp"] > 1 and suggestion.get("pp", 1) == 1 else None
        if smaller:  # and it is the smallest: half the TP does not fit
            with pytest.raises(InfeasibleError):
                inferlab.estimate(model, hardware, isl=isl, **smaller)
    else:
        assert "narrower weight format" in str(info.value) or "larger slice" in str(info.value)


@pytest.mark.parametrize("gpu, seqs, tokens", [
    ("h100-sxm", 1024, 8192),       # 80 GB (~79 GiB visible) >= 70 GiB
    ("b200", 1024, 8192),
    ("h20", 1024, 8192),            # 96 GB
    ("a100-sxm-80gb", 256, 2048),   # 80 GB, but an A100: vLLM keeps the small defaults there
    ("l40s", 256, 2048),            # 48 GB
    ("h100-sxm:3g.40gb", 256, 2048),  # a slice sees its own 40 GB
    # vLLM's CPU backend: 128 and 2,048 per CPU (its memory, 6 TB here, does not enter), not the
    # >= 70 GiB row's 1,024 and 8,192; a TPU: 256 sequences (the small row's) and its chip's
    # budget, v5e 512 and v6e 1,024 (OPENAI_API_SERVER), not 2,048
    ("epyc-9554", 128, 2048),
    ("ryzen-9-7950x", 128, 2048),
    ("tpu-v5e", 256, 512),
    ("tpu-v6e", 256, 1024),
])
def test_vllm_sizes_its_unset_limits_by_the_gpu(gpu, seqs, tokens):
    """vllm serve without --max-num-seqs/--max-num-batched-tokens: 1,024 sequences and 8,192
    tokens on a GPU of at least 70 GiB that is not an A100, else 256 and 2,048
    (EngineArgs.get_batch_defaults, OPENAI_API_SERVER); it had been 256 and 8,192 on every GPU."""
    from inferlab.engines.scheduler import default_scheduler, for_hardware
    from inferlab.specs.catalog import load_hardware

    s = for_hardware(default_scheduler("vllm"), load_hardware(gpu))
    assert (s.max_num_seqs, s.max_num_batched_tokens) == (seqs, tokens)
    given = for_hardware(replace(default_scheduler("vllm"), max_num_seqs=64), load_hardware(gpu))
    assert (given.max_num_seqs, given.max_num_batched_tokens) == (64, tokens)  # what is set stays


def test_vllm_chunks_a_long_prompt_by_its_budget_on_a_smaller_gpu():
    """One 6,000-token prompt alone, vLLM on an L40S: its first token comes after 2,048-token
    chunks, as with --max-num-batched-tokens 2048 given, and later than in one 8,192 budget."""
    from inferlab import serve

    kw = dict(engine="vllm", isl=6000, osl=2, trace=[0.0])
    default = serve("llama-3.1-8b", "l40s", **kw).trace.first_token
    chunked = serve("llama-3.1-8b", "l40s", max_num_batched_tokens=2048, **kw).trace.first_token
    whole = serve("llama-3.1-8b", "l40s", max_num_batched_tokens=8192, **kw).trace.first_token
    assert default == pytest.approx(chunked, rel=1e-12) and default > whole


def test_attention_dp_memory_is_the_busiest_ranks():
    """DeepSeek-V3 over eight attention-DP ranks: one sequence lives whole on one rank, so the
    GPU holding it carries its KV at batch 1 (it had been averaged to an eighth), eight
    sequences one per rank, and nine put two on one rank: twice one sequence's KV."""
    import inferlab

    e = inferlab.estimate("deepseek-v3", "b200", tp=8, ep=8, attention_dp=True, precision="nvfp4",
                          engine="trtllm-pytorch", isl=2048, osl=256, batch_size=[1, 8, 9])
    one = float(np.ravel(e.memory.kv_per_sequence)[0])
    assert np.ravel(e.memory.kv_batch).tolist() == pytest.approx([one, one, 2 * one])


def test_plan_launch_writes_the_attention_dp_balancing_its_simulation_ran():
    """An attention-DP winner planned on SGLang ran without TensorRT-LLM's balancing: its TensorRT-LLM
    command writes none (it had written NVIDIA's recipe, a 60-iteration hold the plan never
    simulated); planned on TensorRT-LLM's PyTorch runtime it writes the recipe's, as simulated."""
    from types import SimpleNamespace

    from inferlab.engines import launch_command
    from inferlab.planning.candidate import Candidate
    from inferlab.planning.launch import winner_launch
    from inferlab.planning.scenario import load_scenario

    best = Candidate(model="deepseek-v3", hardware="h200-sxm", precision="fp8", tp=8, ep=8, attention_dp=True,
                     speculative=None, feasible=True, replicas=1)

    def scenario(engine):
        return load_scenario({"name": "b", "models": ["deepseek-v3"], "hardware": ["h200-sxm"], "engine": engine,
                              "traffic": {"rate": 1, "isl": 1000, "osl": 200}, "slo": {"tpot_ms": 60}})

    scripts = {}
    for engine in ("sglang", "trtllm-pytorch"):
        launch = winner_launch(SimpleNamespace(best=best, scenario=scenario(engine)))
        assert launch.balance_timeout_iters == (0 if engine == "sglang" else 60)
        scripts[engine] = launch_command(launch, "trtllm-pytorch").script
    assert "enable_attention_dp: true" in scripts["sglang"] and "attention_dp_config" not in scripts["sglang"]
    assert "timeout_iters: 60" in scripts["trtllm-pytorch"]
    dense = winner_launch(SimpleNamespace(best=replace(best, model="llama-3.1-70b", ep=1, attention_dp=False),
                                          scenario=scenario("trtllm-pytorch")))
    assert dense.balance_timeout_iters is None
