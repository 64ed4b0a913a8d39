"""Prefill iterations with or without the decodes (``SchedulerConfig.mixed_prefill``).

vLLM and TensorRT-LLM decode the running requests in the iterations that prefill, the decodes
taking their tokens from the iteration's budget; SGLang by default runs a prefill batch alone
(``--enable-mixed-chunk`` off) and the decodes wait for it, the chunk budget being the
prompts' alone. Expected values are worked out by hand from the batch below.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import inferlab
from inferlab.engines import launch_command, parse_engine_args
from inferlab.engines.scheduler import ENGINE_SCHEDULERS, SchedulerConfig
from inferlab.errors import SpecError
from inferlab.inputs.parts import engine_of
from inferlab.serving.batch import SmallBatch
from inferlab.serving.iteration import plan_prefill, plan_prefill_sums
from inferlab.validation.cases import Case, case_limits


class _Clock:
    """A step model that records what it is asked to time and takes 1 s for anything."""

    def __init__(self) -> None:
        self.asked: dict = {}

    def time_sums(self, n_dec, decode_total, p, pairs, reads, n_prefill, logits):
        self.asked = {"n_dec": n_dec, "decode_total": decode_total, "prefill": p, "n_prefill": n_prefill,
                      "logits": logits}
        return 1.0

    def time(self, decode_context, prefill_context, prefill_tokens, logits):
        self.asked = {"n_dec": len(decode_context), "decode_total": float(np.sum(decode_context)),
                      "prefill": float(np.sum(prefill_tokens)), "n_prefill": len(prefill_tokens), "logits": logits}
        return 1.0


def _batch(prompt_left: float) -> SmallBatch:
    """Request 0 decodes (a 100-token prompt done, 5 tokens out, 50 to go); request 1 has
    ``prompt_left`` prompt tokens still to prefill."""
    run = SmallBatch()
    run.k, run.prefilling, run.idx = 2, 1, [0, 1]
    run.done, run.gen, run.base = [100.0, 0.0], [5.0, 0.0], [0.0, 0.0]
    run.prompt, run.osl = [100.0, prompt_left], [50.0, 10.0]
    return run


# budget 8192; chunked: mixed takes 8192 - 1 decode = 8191 prompt tokens and decodes request 0
# (its context 100 + 5 = 105 tokens, one logit row); unmixed takes the whole 8192 and no decode.
# Unchunked, a 5,000-token prompt fits 8191 whole beside the decode; an 8,192-token one does not
# (8192 > 8191 while a decode holds a token), so that iteration only decodes. A logit row for
# each decode and for a prompt finished in the iteration.
@pytest.mark.parametrize("chunked, mixed, left, chunk, n_dec, decode_total, logits", [
    (True, True, 10000.0, 8191.0, 1, 105.0, 1),
    (True, False, 10000.0, 8192.0, 0, 0.0, 0),
    (False, True, 5000.0, 5000.0, 1, 105.0, 2),
    (False, True, 8192.0, 0.0, 1, 105.0, 1),
    (False, False, 8192.0, 8192.0, 0, 0.0, 1),
])
def test_prefill_iteration_with_and_without_the_decodes(chunked, mixed, left, chunk, n_dec, decode_total, logits):
    sched = SchedulerConfig(max_num_batched_tokens=8192, chunked_prefill=chunked, mixed_prefill=mixed)
    for plan, run in ((plan_prefill_sums, _batch(left)), (plan_prefill, _batch(left).arrays())):
        clock = _Clock()
        out = plan(run, sched, clock)
        assert list(out[1])[:2] == [0.0, chunk]
        assert out[3] == n_dec
        assert clock.asked["n_dec"] == n_dec and clock.asked["decode_total"] == decode_total
        assert clock.asked["prefill"] == chunk
        assert clock.asked["logits"] == logits


def test_sglang_runs_prefill_batches_alone_by_default():
    assert ENGINE_SCHEDULERS["sglang"].mixed_prefill is False
    assert all(ENGINE_SCHEDULERS[e].mixed_prefill for e in ("vllm", "trtllm", "trtllm-pytorch", "generic"))


def test_one_request_alone_is_the_same_either_way():
    """Nothing decodes while a lone request prefills: mixing changes nothing."""
    runs = [inferlab.serve("llama-3.1-8b", "h100-sxm", engine="sglang", isl=12000, osl=20, trace=[0.0],
                           num_requests=1, mixed_prefill=m).trace for m in (True, False)]
    assert runs[0].first_token[0] == runs[1].first_token[0] and runs[0].finish[0] == runs[1].finish[0]


def test_unmixed_prefills_stall_the_decodes_and_speed_the_prompts():
    """Long prompts arriving while others decode: without mixing the decodes wait for every
    prefill iteration (TPOT up) and the prompts get the whole budget (TTFT not up)."""
    kw = dict(engine="sglang", isl=6000, osl=200, rate=4.0, num_requests=120, seed=3)
    mixed = inferlab.serve("llama-3.1-8b", "h100-sxm", mixed_prefill=True, **kw)
    alone = inferlab.serve("llama-3.1-8b", "h100-sxm", mixed_prefill=False, **kw)
    assert np.nanmean(alone.tpot_s) > np.nanmean(mixed.tpot_s)
    assert np.median(alone.ttft_s) <= np.median(mixed.ttft_s) * 1.001
    # without mixing, one gap in twenty spans a whole prefill iteration: the P95 gap holds a
    # prompt's prefill (most of the quickest TTFT); with mixing the tail is a mixed iteration's,
    # whose rank against it turns on which prompts share an iteration (not asserted)
    assert alone.itl_percentile(95) > 0.8 * np.min(alone.ttft_s) > 5 * alone.itl_percentile(50)


@pytest.mark.parametrize("engine, limits", [
    ("sglang", {}), ("sglang", {"mixed_prefill": True}), ("vllm", {}), ("vllm", {"chunked_prefill": False}),
    ("vllm", {"chunked_prefill": False, "mixed_prefill": False}), ("trtllm", {}),
    ("vllm", {"gpu_memory_utilization": 0.3}), ("sglang", {"gpu_memory_utilization": 0.3}),
])
def test_token_gaps_add_up_to_the_decode_time(engine, limits):
    """The inter-token gaps, weighted by how many tokens each stands for, average to every
    request's decode time over its gaps: a gap that spans prefill iterations the request sat
    out carries them (before, a prefill-only iteration's time was in no gap), and a preempted
    request's token sampled as its recompute ends is one gap after its last token (before, in
    none: a small KV pool makes the engines preempt here)."""
    small = "gpu_memory_utilization" in limits
    load = dict(isl=2000, osl=200, rate=30.0, num_requests=300) if small else \
        dict(isl=3000, osl=150, rate=8.0, num_requests=150)
    r = inferlab.serve("llama-3.1-8b", "h100-sxm", engine=engine, seed=2, **load, **limits)
    t = r.trace
    assert (t.preemptions > 0) == small
    gaps_mean = float(np.sum(t.itl_values * t.itl_weights) / np.sum(t.itl_weights))
    assert np.sum(t.itl_weights) == pytest.approx(np.sum(t.osl - 1.0), rel=1e-12)
    assert gaps_mean == pytest.approx(float(np.sum(t.finish - t.first_token) / np.sum(t.osl - 1.0)), rel=1e-9)


def test_sglang_flag_reads_and_writes():
    launch = parse_engine_args("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                               "--enable-mixed-chunk")
    assert launch.mixed_prefill is True
    assert launch.to_kwargs("serve")["mixed_prefill"] is True
    assert "--enable-mixed-chunk" in launch_command(launch, "sglang").script
    assert parse_engine_args("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct"
                             ).mixed_prefill is None  # the engine's default (off)
    unmixed = replace(launch, mixed_prefill=False)
    for engine in ("vllm", "trtllm-pytorch"):
        assert "mixed_prefill" in dict(launch_command(unmixed, engine).unexpressed)
    assert "--enable-mixed-chunk" not in launch_command(unmixed, "sglang").script


def test_engine_limit_is_checked():
    assert engine_of({"name": "sglang", "mixed_prefill": True}).mixed_prefill is True
    with pytest.raises(SpecError, match="mixed_prefill"):
        engine_of({"name": "sglang", "mixed_prefill": "true"})  # a string is not a boolean


def _case(**changes) -> Case:
    base = {"id": "t", "regime": "closed_loop", "model": "llama-3.1-8b", "hardware": "h100-sxm", "num_gpus": 1,
            "precision": {"weights": "bf16"}, "engine": "sglang", "isl": 1024, "osl": 256,
            "load": {"concurrency": 4}, "metric": "tpot_ms", "measured": 5.0, "unit": "ms",
            "source": "aiconfigurator-silicon-sample", "source_id": "t"}
    return Case(**{**base, **changes})


def test_a_source_familys_scheduler_settings_apply_where_the_case_states_none():
    # aiconfigurator deploys SGLang with mixed chunks, max_prefill_tokens = isl + 1500 and CUDA
    # graphs for every decode batch up to the clients (4 here)
    assert case_limits(_case()) == {"mixed_prefill": True, "max_prefill_tokens": 2524, "graph_max_batch": 4}
    ours = {"mixed_prefill": False, "max_prefill_tokens": 4096}
    assert case_limits(_case(scheduler=ours)) == {**ours, "graph_max_batch": 4}  # the case wins where it says
    assert case_limits(_case(source="sglang-blog")) == {}
    # TensorRT-LLM: max_num_tokens = max_batch_size + isl + 1500, max_batch_size the clients of
    # a replica: 4 + 1,024 + 1,500 = 2,528; 64 clients over dp=2: 32 + 2,048 + 1,500 = 3,580
    # vLLM: no family settings, but the sample's runs predate vLLM 0.14's async scheduling and 0.22's
    # 0.92 memory share
    early = {"gpu_memory_utilization": 0.9, "overlap_host": False}
    assert case_limits(_case(engine="vllm")) == early
    assert case_limits(_case(engine="vllm", engine_version="0.22.0")) == {}
    assert case_limits(_case(engine="vllm", engine_version="0.16.1")) == {"gpu_memory_utilization": 0.9}
    assert case_limits(_case(engine="vllm", engine_version="0.12.0", source="elsewhere")) == early
    assert case_limits(_case(engine="vllm", source="elsewhere")) == {}
    # and a CUDA graph for every decode batch up to them (cuda_graph_batch_sizes = range(1, max_batch_size + 1))
    assert case_limits(_case(engine="trtllm")) == {"max_num_batched_tokens": 2528, "chunked_prefill": False,
                                                   "graph_max_batch": 4}
    two = _case(engine="trtllm", num_gpus=2, parallelism={"dp": 2}, isl=2048, load={"concurrency": 64})
    assert case_limits(two)["max_num_batched_tokens"] == 3580
    # the performance overview's offline pages ran trtllm-bench, which never refuses a prompt for
    # its budget (it chunks, or by release raises max_num_tokens to the longest prompt)
    assert case_limits(_case(engine="trtllm", source="trtllm-perf-overview-v1.0-offline")) == {"chunked_prefill": True}


class _Flat:
    """Every iteration takes 10 ms: a prefill, a mixed one, or a decode step (no growth)."""

    request_overhead_s = 0.0

    def time(self, decode_context, prefill_context, prefill_tokens, logits):
        return 0.010

    def time_decode(self, cached):
        return 0.010, 0.010  # this step, and the next one (one token longer each)


@pytest.mark.parametrize("overlap, first_token_b", [(False, 0.050), (True, 0.060)])
def test_an_overlap_scheduler_takes_a_request_in_one_iteration_later(overlap, first_token_b):
    """A decodes in 10 ms steps from 10 ms on ([10, 20], [20, 30], [30, 40] ms...); B arrives at
    35 ms. Without overlap the scheduler plans the step from 40 ms at 40 ms and takes B in: its
    prefill runs [40, 50] ms. With overlap (SGLang, TensorRT-LLM 1.x) the step from 40 ms was
    planned as the one before it began, at 30 ms, before B came: B's prefill runs [50, 60] ms."""
    from inferlab.serving.simulator import simulate

    sched = SchedulerConfig(overlap_host=overlap)
    trace = simulate(_Flat(), sched, np.array([0.0, 0.035]), np.array([100.0, 100.0]), np.array([50.0, 5.0]),
                     kv_capacity_tokens=1e6)
    assert trace.first_token[0] == pytest.approx(0.010)
    assert trace.first_token[1] == pytest.approx(first_token_b)


def test_an_idle_overlap_scheduler_takes_a_request_at_once():
    from inferlab.serving.simulator import simulate

    trace = simulate(_Flat(), SchedulerConfig(overlap_host=True), np.array([0.0, 1.0]), np.array([100.0, 100.0]),
                     np.array([5.0, 5.0]), kv_capacity_tokens=1e6)
    assert trace.first_token[1] == pytest.approx(1.010)  # A finished at 0.050: nothing runs when B comes


class _Growing(_Flat):
    """A prefill takes 10 ms; a decode step 10 ms, 2 ms longer for each token the context grew."""

    def time_decode(self, cached):
        t0 = 0.010 + 0.002 * (float(np.sum(cached)) - 101.0)
        return t0, t0 + 0.002


@pytest.mark.parametrize("overlap, first_token_b", [(False, 0.072), (True, 0.090)])
def test_an_overlap_scheduler_reads_the_cutoff_at_the_start_of_a_stretchs_last_step(overlap, first_token_b):
    """A decodes from 10 ms in steps of 10, 12, 14, 16 ms ([46, 62] ms the fourth); B arrives at
    48 ms, after the fourth began (the stretch's mean step, 13 ms, would put that at 49 ms). With
    overlap the step from 62 ms was planned at 46 ms, without B: it runs [62, 80] ms and B's prefill
    [80, 90] ms; without overlap B's prefill runs [62, 72] ms."""
    from inferlab.serving.simulator import simulate

    trace = simulate(_Growing(), SchedulerConfig(overlap_host=overlap), np.array([0.0, 0.048]),
                     np.array([100.0, 100.0]), np.array([50.0, 5.0]), kv_capacity_tokens=1e6)
    assert trace.first_token[1] == pytest.approx(first_token_b)


def test_sglang_mixes_only_chunked_prefill():
    """SGLang's scheduler sets ``is_mixed_chunk = chunked_prefill_size is not None and
    enable_mixed_chunk``: with ``--chunked-prefill-size -1`` the flag does nothing, and a whole
    prompt's prefill batch runs without the decodes."""
    launch = parse_engine_args("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                               "--chunked-prefill-size -1 --enable-mixed-chunk")
    assert launch.chunked_prefill is False and launch.mixed_prefill is False
    assert any("--enable-mixed-chunk" in n for n in launch.notes)
    whole = replace(launch, mixed_prefill=True)  # asked of SGLang: it cannot
    assert "mixed_prefill" in dict(launch_command(whole, "sglang").unexpressed)
    assert "  --enable-mixed-chunk" not in launch_command(whole, "sglang").script  # (named in the comments only)


class _Chunks:
    """A step model that records nothing but returns a fixed time (the plan is what is tested)."""

    def time(self, **_):
        return 0.01

    def time_sums(self, *_):
        return 0.01


def _three_prompts_and_three_decodes():
    from inferlab.serving.batch import RunningBatch

    run = RunningBatch(8)
    for i in range(3):  # three requests decoding (prompts done)
        run.add(i, generated=5.0, prompt=100.0, osl=50.0, done=100.0, views=False)
    for i in range(3, 6):  # three 1,024-token prompts waiting for their first chunk
        run.add(i, generated=0.0, prompt=1024.0, osl=50.0, views=False)
    run._views()
    return run


@pytest.mark.parametrize("sums", [False, True])
def test_a_prompt_token_limit_takes_the_prompt_that_spends_it_whole(sums):
    from inferlab.serving.batch import SmallBatch
    from inferlab.serving.iteration import plan_prefill, plan_prefill_sums

    run = _three_prompts_and_three_decodes()
    plan = (lambda r, s: plan_prefill_sums(SmallBatch(r), s, _Chunks())) if sums else \
        (lambda r, s: plan_prefill(r, s, _Chunks()))
    # SGLang's max_prefill_tokens 2,524 less the 3 decodes mixed in: 2,521; the first prompt
    # leaves 1,497, the second whole leaves 473 (still positive), the third is taken whole
    # too (-551), within the 8,192-token chunk: 1,024 each
    soft = SchedulerConfig(max_num_batched_tokens=8192, max_prefill_tokens=2524)
    assert list(plan(run, soft)[1])[3:] == [1024.0, 1024.0, 1024.0]
    # the same 2,524 as a hard budget: 2,521 after the decodes, the third prompt cut to 473
    hard = SchedulerConfig(max_num_batched_tokens=2524)
    assert list(plan(run, hard)[1])[3:] == [1024.0, 1024.0, 473.0]
    # a limit spent by the first prompt stops the second: 1,000 - 3 = 997 < 1,024
    assert list(plan(run, SchedulerConfig(max_prefill_tokens=1000))[1])[3:] == [1024.0, 0.0, 0.0]
