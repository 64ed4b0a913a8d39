"""A GPU without op-level fits of its own runs its family's, fitted on another GPU (an H20 or
H200 the H100's, an RTX 4090 or 5090 the L40S's). A GEMM curve's ``m_half`` is the standalone
kernel's fixed time per launch written in rows at the fitted GPU's rate; carried over as rows,
it made the small GEMMs of a GPU with less compute per byte of bandwidth compute-bound where
they stream their weights: TensorRT-LLM's fits (L40S, ``m_half`` 236 rows) put Llama-3.1-8B's
BF16 decode at batch 1 on an RTX 4090 at 37 ms a token, 2.3x its 16 GB of weights at 1.008 TB/s.
So ``m_half`` scales with the ridge point (peak over bandwidth) of the GPU modelled over the
fitted one's (:func:`inferlab.core.timing.m_half_scale`).
"""

from __future__ import annotations

import pytest

from inferlab import estimate
from inferlab.calibration.profile import hardware_family, load_profile
from inferlab.core.timing import m_half_scale
from inferlab.fitting.bench import calibrated_mapping, start_mapping, start_terms
from inferlab.specs.catalog import load_hardware


@pytest.mark.parametrize("engine, gpu, fitted_on", [
    ("trtllm", "rtx-4090", "l40s"), ("trtllm", "rtx-5090", "l40s"), ("vllm", "h20", "h100-sxm"),
    ("vllm", "h200-sxm", "h100-sxm"), ("trtllm", "b300", "b200"),
    ("vllm", "h100-sxm", ""), ("trtllm", "l40s", ""),   # their own fits
    ("vllm", "mi300x", ""),                              # no family fits: GPU-independent medians
])
def test_a_gpu_without_fits_of_its_own_names_the_gpu_its_family_fits_came_from(engine, gpu, fitted_on):
    family = hardware_family(load_hardware(gpu).architecture)
    assert load_profile("default", engine, gpu, family).gemm_fitted_on == fitted_on


def test_m_half_scales_with_the_ridge_point():
    """H20: 148 dense BF16 TFLOPS at 4.0 TB/s, a ridge of 37 FLOP/B; H100 SXM: 989 at 3.35,
    295 FLOP/B (datasheets): the H100's m_half is 37 / 295 = 0.125 of its rows on the H20."""
    h20 = load_hardware("h20")
    assert m_half_scale("h100-sxm", h20, "bf16", 148e12) == pytest.approx((148 / 4.0) / (989 / 3.35), rel=1e-3)
    assert m_half_scale("h20", h20, "bf16", 148e12) == 1.0 and m_half_scale("", h20, "bf16", 148e12) == 1.0


def test_rtx_4090_batch_one_decode_streams_its_weights():
    """16.06 GB of BF16 weights at 1.008 TB/s is 15.9 ms: a batch-1 step is that, plus its
    bandwidth share and per-step overheads, not 2.3x it."""
    tpot = float(estimate("llama-3.1-8b", "rtx-4090", engine="trtllm", batch_size=1, isl=512, osl=64).tpot_s)
    assert 15.9e-3 < tpot < 1.3 * 15.9e-3


def test_a_bench_calibration_keeps_the_family_gpu_its_curves_came_from():
    """A profile fitted from benchmark runs on an H20 writes the H20's scaled shares under
    overrides; its GEMM curves are still the H100's, carried over as in the fit."""
    start = start_mapping("default")
    fitted = calibrated_mapping(start, [("vllm", "h20")], start_terms(start, [("vllm", "h20")]))
    assert fitted["overrides"]["vllm"]["h20"]["gemm_fitted_on"] == "h100-sxm"
    assert load_profile(fitted, "vllm", "h20", "hopper").gemm_fitted_on == "h100-sxm"
