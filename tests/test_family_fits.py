"""A GPU without op-level fits of its own runs its family's (an H20 or H200 the H100's, an RTX
4090 or 5090 the L40S's), an engine's curves fitted elsewhere (TensorRT-LLM's weight-only INT4,
measured on the A100 only), or GPU-independent medians. A GEMM curve's ``m_half`` is the
standalone kernel's fixed time per launch written in rows at the fitted GPU's rate; carried
over as rows, it made the small GEMMs of a GPU with less compute per byte of bandwidth
compute-bound where they stream their weights: TensorRT-LLM's fits (L40S, ``m_half`` 236 rows)
put Llama-3.1-8B's BF16 decode at batch 1 on an RTX 4090 at 37 ms a token, 2.3x its 16 GB of
weights at 1.008 TB/s. So each curve carries the ridge point of the GPUs it was fitted on
(``fitted_ridge``, written by ``inferlab calibrate``) and ``m_half`` scales with the ridge of the
GPU modelled over that one (:func:`inferlab.core.timing.m_half_scale`).
"""

from __future__ import annotations

import copy

import pytest

from inferlab import estimate
from inferlab.calibration.profile import _parse_profile_text, load_profile, profile_file
from inferlab.core.quantization import tensor_flops_per_s
from inferlab.core.timing import m_half_scale
from inferlab.fitting.bench import calibrated_mapping, start_mapping, start_terms
from inferlab.specs.catalog import load_hardware

#: Datasheet ridge points [FLOP/B]: dense BF16 / FP8 TFLOPS over TB/s.
H100_BF16, H100_FP8 = 989 / 3.35, 1979 / 3.35
A100_BF16, L40S_BF16 = 312 / 2.039, 362.05 / 0.864


@pytest.mark.parametrize("engine, gpu, family, kernel, ridge", [
    ("vllm", "h100-sxm", "hopper", "bf16", H100_BF16), ("vllm", "h100-sxm", "hopper", "fp8", H100_FP8),
    ("vllm", "h20", "hopper", "bf16", H100_BF16),          # the family's curves, fitted on the H100
    ("trtllm", "rtx-4090", "ada", "bf16", L40S_BF16),       # sm_120 and Ada run the L40S's
    ("trtllm", "rtx-4090", "ada", "int4_wo", A100_BF16),    # TensorRT-LLM's INT4 weight-only: the A100's
])
def test_each_curve_carries_the_ridge_point_of_the_gpu_it_was_fitted_on(engine, gpu, family, kernel, ridge):
    curve = load_profile("default", engine, gpu, family).gemm.kernels[kernel]
    assert curve.fitted_ridge == pytest.approx(ridge, rel=2e-3)


def test_m_half_scales_with_the_ridge_point():
    """H20: 148 dense BF16 TFLOPS at 4.0 TB/s, a ridge of 37 FLOP/B, against the H100's 295: the
    H100's m_half is 0.125 of its rows on the H20; on the H100 itself it stands."""
    h20, h100 = load_hardware("h20"), load_hardware("h100-sxm")
    assert m_half_scale(H100_BF16, h20, 148e12) == pytest.approx((148 / 4.0) / (989 / 3.35), rel=1e-9)
    assert m_half_scale(H100_BF16, h100, tensor_flops_per_s(h100, "bf16")) == pytest.approx(1.0, rel=1e-9)
    assert m_half_scale(0.0, h20, 148e12) == 1.0  # a curve of unknown origin is used as written


def test_rtx_4090_batch_one_decode_streams_its_weights():
    """16.06 GB of BF16 weights at 1.008 TB/s is 15.9 ms: a batch-1 step is that, plus its
    bandwidth share and per-step overheads, not 2.3x it."""
    tpot = float(estimate("llama-3.1-8b", "rtx-4090", engine="trtllm", batch_size=1, isl=512, osl=64).tpot_s)
    assert 15.9e-3 < tpot < 1.3 * 15.9e-3


def test_host_terms_of_a_gpu_leave_its_carried_curves_scaled():
    """A profile section for the RTX 4090 that sets only a host term is not a GEMM fit of its own."""
    shipped = _parse_profile_text(profile_file("default").read_text(encoding="utf-8"), "default")
    mapping = copy.deepcopy(shipped)
    mapping["overrides"]["trtllm"]["rtx-4090"] = {"request_overhead_s": 0.01}
    kw = dict(engine="trtllm", batch_size=1, isl=512, osl=64)
    assert float(estimate("llama-3.1-8b", "rtx-4090", profile=mapping, **kw).tpot_s) == pytest.approx(
        float(estimate("llama-3.1-8b", "rtx-4090", **kw).tpot_s))


def test_a_bench_calibration_keeps_each_curves_ridge():
    """A profile fitted from benchmark runs on an H20 writes the H20's scaled shares under
    overrides; its GEMM curves keep the H100 ridge they were fitted at."""
    start = start_mapping("default")
    fitted = calibrated_mapping(start, [("vllm", "h20")], start_terms(start, [("vllm", "h20")]))
    curve = load_profile(fitted, "vllm", "h20", "hopper").gemm.kernels["bf16"]
    assert curve.fitted_ridge == pytest.approx(H100_BF16, rel=2e-3)
