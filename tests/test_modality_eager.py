"""Eager execution: the host issues a pass's ops in order, the GPU waits on it or runs ahead."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.errors import SpecError
from inferlab.modalities.catalog import load_modality
from inferlab.modalities.eager import eager_end, eager_pass_s, layer_program
from inferlab.modalities.passes import DATASHEET
from inferlab.modalities.vision import vlm_ttft


def test_three_ops_by_hand():
    # GPU 2, 10, 1 us; host 5, 1, 4 us.
    # op 1 enqueued at 5, runs 5-7; op 2 enqueued at 6, waits for op 1, runs 7-17;
    # op 3 enqueued at 10, waits for op 2, runs 17-18. The pass ends at 18 (GPU alone: 13, host: 10).
    assert eager_end([2e-6, 10e-6, 1e-6], [5e-6, 1e-6, 4e-6]) == pytest.approx(18e-6)
    # op 2 read on the host (.item()): the host waits until 17, enqueues op 3 at 21, which runs 21-22.
    assert eager_end([2e-6, 10e-6, 1e-6], [5e-6, 1e-6, 4e-6], [False, True, False]) == pytest.approx(22e-6)
    # short kernels: the host's 5 + 1 + 4 = 10 us, then the last kernel's 1 us
    assert eager_end([1e-6, 1e-6, 1e-6], [5e-6, 1e-6, 4e-6]) == pytest.approx(11e-6)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.floats(0, 1e-3), st.floats(0, 1e-4), st.booleans()), min_size=1, max_size=60))
def test_eager_is_never_below_the_gpu_or_the_host(ops):
    gpu, host, sync = ([op[i] for op in ops] for i in range(3))
    end = eager_end(gpu, host, sync)
    assert end >= sum(gpu) * (1 - 1e-12) and end >= sum(host) * (1 - 1e-12)
    assert end <= (sum(gpu) + sum(host)) * (1 + 1e-12)  # at worst nothing overlaps
    assert eager_end(gpu, [0.0] * len(gpu)) == pytest.approx(sum(gpu))  # no host time: the GPU's


def test_calls_per_layer_as_counted():
    # module notes: 26 calls per SigLIP layer in SGLang, 7 more with vLLM's rotary; 71 per
    # Qwen2.5-VL layer under transformers (two float32 RMSNorms of 8, rotary of 22, ...)
    siglip, qwen = (load_modality(m).field("vision_config") for m in ("paligemma-3b-224", "qwen2.5-vl-7b"))
    assert sum(s.calls for s in layer_program(siglip, "sglang")) == 26
    assert sum(s.calls for s in layer_program(siglip, "fused")) == 26
    assert sum(s.calls for s in layer_program(qwen, "fused")) == 33
    assert sum(s.calls for s in layer_program(qwen, "transformers")) == 71
    assert sum(s.sync for s in layer_program(qwen, "transformers")) == 1  # the .item() of the flash path
    # kernels: SGLang's layer launches three q/k/v copies that vLLM's (fused) and the transformers modules do not:
    # two norms, qkv, the copies, attention, o_proj, two residual adds, mlp up, activation, down
    assert sum(s.kernels for s in layer_program(siglip, "sglang")) == 13
    assert sum(s.kernels for s in layer_program(siglip, "fused")) == 10
    # vLLM's Qwen2.5-VL layer: the same ten and rotary's 6 (its cat of q and k the one packed copy)
    assert sum(s.kernels for s in layer_program(qwen, "fused")) == 16
    # transformers' Qwen2.5-VL layer: two RMSNorms of 6, qkv, rotary 6, attention, o_proj, two adds, gate and
    # up (one GEMM), SiLU and the product, down: no copies
    assert sum(s.kernels for s in layer_program(qwen, "transformers")) == 12 + 1 + 6 + 1 + 1 + 2 + 1 + 2 + 1


def test_host_time_per_call_and_per_launch_by_hand():
    # Two kernels of 1 us after a step of 3 calls without a kernel: the host spends 3 x 3.6 us,
    # then 3.6 + 5 us per launching call (host_op_s 1 / 280,000 s, launch_s 5 us): the first
    # kernel is enqueued at 10.71 + 8.57 = 19.29 us, the second at 27.86 us, which ends at 28.86 us.
    import numpy as np

    per_call, launch = 1 / 280e3, 5e-6
    host = np.array([3, 1, 1]) * per_call + np.array([0, 1, 1]) * launch
    assert eager_end([0.0, 1e-6, 1e-6], host) == pytest.approx(3 * per_call + 2 * (per_call + launch) + 1e-6)
    assert eager_end([0.0, 1e-6, 1e-6], host) == pytest.approx(28.857e-6, rel=1e-4)
    assert DATASHEET.launch_s == 5e-6 and DATASHEET.host_op_s == per_call


@pytest.mark.parametrize("model, implementation, height", [("paligemma-3b-224", "sglang", 224),
                                                           ("paligemma-3b-224", "fused", 224),
                                                           ("qwen2.5-vl-7b", "fused", 1080),
                                                           ("qwen2.5-vl-7b", "transformers", 1080),
                                                           ("gemma-3-27b", "transformers", 896)])
def test_every_kernel_issued_once(model, implementation, height):
    # Without host time the eager pass is the GPU time of the graph: each kernel scheduled once.
    r = vlm_ttft(model, "h100-sxm", height=height, width=height, text_tokens=0, processor="none",
                 implementation=implementation, execution="graph")
    vc = load_modality(model).field("vision_config")
    no_host = eager_pass_s(r.encoder, vc, implementation, host_op_s=0.0, launch_s=0.0, op_floor_s=DATASHEET.op_floor_s)
    assert no_host == pytest.approx(float(r.encoder.time_s), rel=1e-12)


def test_small_image_waits_on_the_host_large_one_on_the_gpu():
    # Pi0.5's SigLIP at 224: 4 + 27 x 26 + 3 = 709 calls of 1 / 280,000 s = 2.532 ms, and
    # 1 + 27 x 13 + 1 = 353 kernel launches of 5 us = 1.765 ms (per layer: two norms, qkv, three
    # q/k/v copies, attention, o_proj, two residual adds, mlp up, activation, down): 4.297 ms on
    # the host, above the GPU's 2.3 ms: the pass takes the host's time plus the last kernel.
    small = vlm_ttft("paligemma-3b-224", "h100-sxm", height=224, width=224, text_tokens=0, processor="none",
                     implementation="sglang")
    host = 709 / 280e3 + 353 * 5e-6
    assert host == pytest.approx(4.2972e-3, rel=1e-4)
    assert float(small.encoder.time_s) < host < small.encoder_s < host + 50e-6
    # Gemma 3's at 896 (4,096 patches): the same calls hide behind 11 ms of kernels.
    large = vlm_ttft("gemma-3-27b", "h100-sxm", text_tokens=0, processor="none", implementation="sglang")
    assert large.encoder_s == pytest.approx(float(large.encoder.time_s), rel=0.01)
    graph = vlm_ttft("paligemma-3b-224", "h100-sxm", height=224, width=224, text_tokens=0, processor="none",
                     implementation="sglang", execution="graph")
    assert graph.encoder_s == float(graph.encoder.time_s)
    with pytest.raises(SpecError, match="execution must be 'eager' or 'graph'"):
        vlm_ttft("paligemma-3b-224", "h100-sxm", execution="compiled")
