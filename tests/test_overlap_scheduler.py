"""Overlap scheduling: the host prepares iteration n + 1 while the GPU runs n."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.inputs.resolve import deployment
from inferlab.engines.scheduler import ENGINE_SCHEDULERS
from inferlab.serving.stepmodel import StepModel

HOST_S, EXPOSED_S = 2e-3, 0.3e-3


def _models():
    dep = deployment("llama-3.1-8b", "h100-sxm", precision="fp8", engine="trtllm-pytorch")
    prof = dep.profile.model_copy(update={"step_overhead_s": HOST_S, "serving_step_overhead_s": EXPOSED_S})
    dep = replace(dep, profile=prof)
    return StepModel(dep, 8192 + 256, overlap_host=False), StepModel(dep, 8192 + 256, overlap_host=True)


def test_engines_that_overlap_by_default():
    """SGLang (since v0.4), TensorRT-LLM's PyTorch runtime and vLLM (async scheduling, on by
    default from 0.14) overlap host work; the C++ TensorRT-LLM runtime as modelled does not."""
    assert ENGINE_SCHEDULERS["sglang"].overlap_host and ENGINE_SCHEDULERS["trtllm-pytorch"].overlap_host
    assert ENGINE_SCHEDULERS["vllm"].overlap_host and not ENGINE_SCHEDULERS["trtllm"].overlap_host


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 256), context=st.integers(16, 8192))
def test_overlap_hides_the_shorter_of_gpu_and_host(batch, context):
    """Serial: gpu + host + exposed. Overlapped: max(gpu, host) + exposed. So the overlap
    saves exactly min(gpu, host) and never makes an iteration shorter than the host's part."""
    serial, overlapped = _models()
    ctx = np.full(batch, float(context))
    t_serial, _ = serial.time_decode(ctx)
    t_overlap, _ = overlapped.time_decode(ctx)
    gpu = t_serial - HOST_S - EXPOSED_S
    assert gpu > 0
    assert t_overlap == pytest.approx(max(gpu, HOST_S) + EXPOSED_S, rel=1e-12)
    assert t_serial - t_overlap == pytest.approx(min(gpu, HOST_S), rel=1e-9)
