"""Eager prefill: an engine that graphs decode batches only issues a prefill's kernels from Python,
so an iteration with prompt tokens lasts at least the host's issue time."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.calibration.profile import Profile
from inferlab.core.graph import Step
from inferlab.core.timing import eager_floor, step_total
from inferlab.fitting.fit import EAGER_HOST_PER_KERNEL_S
from inferlab.inputs.resolve import deployment
from inferlab.serving.stepmodel import StepModel
from inferlab.techniques.step import run_step


def test_a_prefill_step_lasts_the_longer_of_gpu_and_host():
    # 120 kernels at 50 us each: the host issues the last one after 6 ms
    prof = Profile(eager_host_per_kernel_s=50e-6, step_overhead_s=1e-3)
    assert eager_floor(120, prof) == pytest.approx(6e-3)
    # 2 + 3 = 5 ms of GPU work: host-bound, 6 ms + 1 ms of step overhead
    assert float(step_total([2e-3, 3e-3], 120, prof, phase="prefill")) == pytest.approx(7e-3)
    # 4 + 5 = 9 ms of GPU work: the GPU is the longer, 9 + 1 ms
    assert float(step_total([4e-3, 5e-3], 120, prof, phase="prefill")) == pytest.approx(10e-3)
    # decode steps run in CUDA graphs: no floor, 5 + 1 ms
    assert float(step_total([2e-3, 3e-3], 120, prof, phase="decode")) == pytest.approx(6e-3)


def _kernels(dep, prompt: int) -> float:
    step = run_step(dep, Step.prefill(np.array([1.0]), np.array([float(prompt)])))
    return float(sum(t.op.count for t in step.times))


def test_sglang_eager_forward_matches_its_measurement():
    """The figure the prior comes from: an eager DeepSeek-V3 forward of one new token took 82.6 ms
    in SGLang (sglang PR #12160), against 23.1 ms captured in a CUDA graph."""
    dep = deployment("deepseek-v3", "h200-sxm", precision="fp8", engine="sglang", tp=8)
    assert dep.profile.eager_host_per_kernel_s == pytest.approx(EAGER_HOST_PER_KERNEL_S["sglang"], rel=1e-3)
    step = run_step(dep, Step.prefill(np.array([1.0]), np.array([1.0])))
    host_bound = float(np.ravel(step.time_s)[0]) - dep.profile.step_overhead_s
    assert host_bound == pytest.approx(82.6e-3, rel=0.05)


def test_sglang_eager_prefill_costs_what_piecewise_graphs_took_off():
    """A check the prior was not fitted on: SGLang's piecewise prefill CUDA graphs took Llama-3.1-8B
    FP8 over eight GPUs from 29.97 to 19.66 ms TTFT for a 1,024-token prompt at concurrency 1
    (sglang PR #13094; the GPU is not stated, an H100 is assumed: the GPU's share is small). The
    eager prefill step here exceeds the same step without the host floor by that 10.3 ms within a
    factor of 1.5 (9.5 ms when written)."""
    dep = deployment("llama-3.1-8b", "h100-sxm", precision="fp8", engine="sglang", tp=8)
    graphed = replace(dep, profile=dep.profile.model_copy(update={"eager_host_per_kernel_s": 0.0}))
    step = Step.prefill(np.array([1.0]), np.array([1024.0]))
    extra = float(np.ravel(run_step(dep, step).time_s)[0] - np.ravel(run_step(graphed, step).time_s)[0])
    assert 10.3e-3 / 1.5 <= extra <= 10.3e-3 * 1.5


def test_only_engines_that_run_prefill_eagerly_from_python_pay_the_floor():
    """vLLM runs prefill in piecewise CUDA graphs; TensorRT-LLM's legacy runtime runs a compiled
    engine and LMDeploy's TurboMind is C++: none is charged. SGLang and TensorRT-LLM's PyTorch
    runtime issue a prefill's kernels from Python, at SGLang's measured rate (82.6 ms over the
    1,389 kernels of an eager DeepSeek-V3 forward: 59.5 us; 8.23 ms over an eager Llama-3-8B
    decode's 323: 25.5 us)."""
    for engine in ("vllm", "trtllm", "lmdeploy", "generic"):
        prof = deployment("llama-3.1-8b", "h100-sxm", engine=engine).profile
        assert prof.eager_host_per_kernel_s == 0.0 and prof.eager_decode_host_per_kernel_s == 0.0
    for engine in ("sglang", "trtllm-pytorch"):
        prof = deployment("llama-3.1-8b", "h100-sxm", engine=engine).profile
        assert prof.eager_host_per_kernel_s == pytest.approx(59.5e-6, rel=1e-3)
        assert prof.eager_decode_host_per_kernel_s == pytest.approx(25.5e-6, rel=1e-3)


def _sglang_models():
    dep = deployment("llama-3.1-8b", "h100-sxm", precision="fp8", engine="sglang")
    graphed = replace(dep, profile=dep.profile.model_copy(update={"eager_host_per_kernel_s": 0.0}))
    return StepModel(dep, 8192 + 256), StepModel(graphed, 8192 + 256), dep


@settings(max_examples=30, deadline=None)
@given(decoding=st.integers(0, 64), context=st.integers(16, 4096), prompt=st.integers(1, 4096))
def test_serving_iterations_with_prompt_tokens_pay_the_host_floor(decoding, context, prompt):
    """An iteration with prompt tokens lasts at least the host floor and never less than without
    it; a decode-only iteration (CUDA graphs) is the same with or without it."""
    eager, graphed, dep = _sglang_models()
    floor = eager.eager_s
    assert floor == pytest.approx(_kernels(dep, 16) * dep.profile.eager_host_per_kernel_s)
    ctx = np.full(decoding, float(context))
    kw = {"decode_context": ctx, "prefill_context": np.zeros(1), "prefill_tokens": np.array([float(prompt)]),
          "logits": float(decoding + 1)}
    t_eager, t_graphed = eager.time(**kw), graphed.time(**kw)
    assert t_eager >= floor and t_eager >= t_graphed
    assert t_eager == pytest.approx(max(t_graphed - eager.step_overhead_s, floor) + eager.step_overhead_s, rel=1e-9)
    if decoding:
        assert eager.time_decode(ctx) == graphed.time_decode(ctx)


def test_explain_says_when_the_host_bounds_an_eager_prefill():
    from inferlab import estimate

    kw = dict(precision="fp8", tp=8, isl=1024, osl=16, batch_size=1)
    text = estimate("deepseek-v3", "h200-sxm", engine="sglang", **kw).explain()
    assert "prefill: " in text and "host-bound (run eagerly" in text and "--enable-piecewise-cuda-graph" in text
    assert "host-bound" not in estimate("deepseek-v3", "h200-sxm", engine="vllm", **kw).explain()


def test_a_chunked_static_prefill_issues_every_chunk_eagerly():
    """DeepSeek-V3 over eight H200s, a 4,096-token prompt in 512-token chunks: 8 eager iterations,
    each at least the 82.6 ms the host takes to issue one forward (sglang PR #12160), so TTFT is
    at least 8 x 82.6 = 661 ms; in one 8,192-token iteration the host's part is paid once."""
    from inferlab import estimate

    kw = dict(engine="sglang", precision="fp8", tp=8, isl=4096, osl=16, batch_size=1)
    chunked = float(estimate("deepseek-v3", "h200-sxm", max_num_tokens=512, **kw).ttft_s)
    whole = float(estimate("deepseek-v3", "h200-sxm", max_num_tokens=8192, **kw).ttft_s)
    assert chunked >= 8 * 82.6e-3 * 0.95
    assert whole < 3 * 82.6e-3 < chunked


def test_without_cuda_graphs_the_floor_replaces_the_launch_charge():
    """A step without CUDA graphs of an engine whose eager rate is known lasts the longer of its ops
    and the host's issue time; the per-kernel launch charge is not added on top."""
    prof = Profile(eager_host_per_kernel_s=50e-6, launch_overhead_s=5e-6)
    # 120 kernels: 6 ms of issue time against 5 ms of ops, in either phase
    for phase in ("prefill", "decode"):
        assert float(step_total([2e-3, 3e-3], 120, prof, cuda_graphs=False, phase=phase)) == pytest.approx(6e-3)
    # no eager rate known: the launch charge, 5 ms + 120 x 5 us
    plain = Profile(launch_overhead_s=5e-6)
    assert float(step_total([2e-3, 3e-3], 120, plain, cuda_graphs=False)) == pytest.approx(5.6e-3)


def test_summed_iterations_pay_the_floor_too():
    """time_sums (the closed loop's fast path) charges a prompt's iteration as time() does."""
    eager, graphed, _ = _sglang_models()
    kw = dict(n_decode=8, decode_total=8 * 1000.0, prefill_tokens=512.0, prefill_pairs=512 * 513 / 2,
              prefill_reads=512.0, n_prefill=1, logits=9.0)
    t_eager, t_graphed = eager.time_sums(**kw), graphed.time_sums(**kw)
    assert t_eager == pytest.approx(max(t_graphed - eager.step_overhead_s, eager.eager_s) + eager.step_overhead_s)
    assert t_eager == pytest.approx(eager.time(decode_context=np.full(8, 1000.0), prefill_context=np.zeros(1),
                                               prefill_tokens=np.array([512.0]), logits=9.0))


def test_attention_dp_iterations_with_a_prompt_pay_the_floor():
    """With attention data parallelism the iteration lasts its busiest rank's time, and no less
    than the host's issue time of the prefill's kernels."""
    dep = deployment("deepseek-v3", "h200-sxm", precision="fp8", engine="sglang", tp=8, ep=8, attention_dp=True)
    model = StepModel(dep, 8192 + 256)
    assert model.groups == 8 and model.eager_s > 0.05
    t = model.time(decode_context=np.full(16, 1000.0), prefill_context=np.zeros(1), prefill_tokens=np.array([64.0]),
                   logits=17.0)
    assert t >= model.eager_s
    assert model.time_decode(np.full(16, 1000.0))[0] < model.eager_s
