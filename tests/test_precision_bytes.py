"""Low-precision formats obey the bytes: on a GPU that computes in the format, a memory-bound
decode step with narrower weights is never slower (issue 10, deliverable 2).

Pairs: NVFP4 and MXFP4 against FP8 on Blackwell (B200, B300, GB200), FP8 against BF16 there and
on Hopper (H100, H200). Each format keeps its own activations rule (FP4 activations with FP4
weights, FP8 with FP8, BF16 with BF16); the KV cache is BF16 for both sides. A step of batch
1-64 at 1,024 tokens of context is memory-bound on all of these GPUs, for dense and MoE models
from the catalog at TP 1-8.

Where the shipped calibration breaks the relation, the parametrization is marked
``xfail(strict=True)`` with the worst violation found on a grid (batches 1-64, TP 1/2/4/8, ten
catalog models); the fitted small-shape terms of the narrow-format GEMM curves (``n_half`` and
``m_half`` for TP-sharded projections at a few rows) make those GEMMs slower than the wider
format's. The examples below pin the worst points so that each xfail keeps failing until the
curves change.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from inferlab.core.graph import Step
from inferlab.core.phases import run_step
from inferlab.errors import InferlabError
from inferlab.estimate import deployment

MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "mixtral-8x7b", "qwen3-30b-a3b", "gpt-oss-20b",
          "gpt-oss-120b", "llama-4-scout", "deepseek-v3")
BLACKWELL = ("b200", "b300", "gb200")
HOPPER = ("h100-sxm", "h200-sxm")
PAIRS = [(hw, narrow, wide) for hw in BLACKWELL for narrow, wide in (("nvfp4", "fp8"), ("mxfp4", "fp8"),
                                                                     ("fp8", "bf16"))]
PAIRS += [(hw, "fp8", "bf16") for hw in HOPPER]
ENGINES = ("generic", "trtllm", "vllm", "sglang")

#: (engine, hw, narrow, wide) -> the worst violation measured on the grid, and the op that causes it.
VIOLATIONS = {
    ("generic", "b200", "nvfp4", "fp8"): "llama-3.1-8b tp8 batch 1: 3.198 vs 3.128 ms (+2.3%), mlp_up and qkv_proj "
                                         "(nvfp4 curve); all 10 grid models violate at tp4 or tp8, up to +4.4% (deepseek-v3)",
    ("generic", "gb200", "nvfp4", "fp8"): "deepseek-v3 tp8 batch 1: 7.150 vs 6.932 ms (+3.1%); llama-3.1-8b tp8 b1 "
                                          "+1.6%, mlp_up and qkv_proj (nvfp4 curve, B200 fit)",
    ("sglang", "b200", "nvfp4", "fp8"): "as generic (the same numbers: generic B200 curves): llama-3.1-8b tp8 b1 +2.3%, "
                                        "deepseek-v3 tp8 b1 +4.4%",
    ("sglang", "gb200", "nvfp4", "fp8"): "as generic: deepseek-v3 tp8 b1 +3.1%, llama-4-scout tp8 b1 +2.9% "
                                         "(shared_expert_up, experts_up, qkv_proj)",
    ("trtllm", "b200", "nvfp4", "fp8"): "deepseek-v3 tp8 batch 1: 9.301 vs 7.849 ms (+18.5%: experts_up, q_a_proj, "
                                        "kv_a_proj); llama-3.1-8b tp1 b1 4.877 vs 4.345 ms (+12.2%: mlp_down "
                                        "758 vs 408 us over 32 layers); qwen3-32b tp1 b32 +16.2%",
    ("trtllm", "b300", "nvfp4", "fp8"): "deepseek-v3 tp8 batch 1: 8.432 vs 7.849 ms (+7.4%); llama-3.1-70b tp8 b1 "
                                        "+2.1% (qkv_proj 652 vs 421 us over 80 layers)",
    ("trtllm", "gb200", "nvfp4", "fp8"): "deepseek-v3 tp8 batch 1: 9.049 vs 7.800 ms (+16.0%); llama-3.1-70b tp8 b1 "
                                         "+10.9%; llama-3.1-8b tp1 b32 +8.3%",
    ("vllm", "b200", "fp8", "bf16"): "qwen3-30b-a3b tp8 batch 1: 4.032 vs 4.014 ms (+0.4%: qkv_proj 177 vs 156 us "
                                     "over 48 layers, fp8 curve)",
    ("vllm", "b300", "fp8", "bf16"): "qwen3-30b-a3b tp8 batch 1: +0.4% (qkv_proj, fp8 curve, B200 fit)",
    ("vllm", "gb200", "fp8", "bf16"): "qwen3-30b-a3b tp8 batch 1: 4.018 vs 4.007 ms (+0.3%, qkv_proj)",
    ("vllm", "h200-sxm", "fp8", "bf16"): "llama-3.1-8b tp8 batch 64: 4.272 vs 4.224 ms (+1.1%: qkv_proj 223 vs "
                                         "155 us over 32 layers, fp8 curve); qwen3-30b-a3b tp8 b1 +0.3%",
}


def _params():
    for engine in ENGINES:
        for hw, narrow, wide in PAIRS:
            reason = VIOLATIONS.get((engine, hw, narrow, wide))
            marks = [pytest.mark.xfail(strict=True, reason=f"shipped profile: {reason}")] if reason else []
            yield pytest.param(engine, hw, narrow, wide, marks=marks, id=f"{engine}-{hw}-{narrow}-vs-{wide}")


def _decode_s(engine: str, hw: str, model: str, tp: int, batch: int, precision: str) -> float:
    dep = deployment(model, hw, tp=tp, precision=f"{precision} kv:bf16", engine=engine)
    return float(run_step(dep, Step.decode(np.array(float(batch)), np.array(1024.0))).time_s)


@pytest.mark.parametrize("engine, hw, narrow, wide", list(_params()))
@settings(max_examples=15, deadline=None, derandomize=True)
@given(model=st.sampled_from(MODELS), tp=st.sampled_from([1, 2, 4, 8]), batch=st.integers(1, 64))
@example(model="llama-3.1-8b", tp=8, batch=1)
@example(model="llama-3.1-8b", tp=1, batch=1)
@example(model="deepseek-v3", tp=8, batch=1)
@example(model="qwen3-30b-a3b", tp=8, batch=1)
@example(model="llama-3.1-8b", tp=8, batch=64)
def test_narrower_weights_are_never_slower_in_memory_bound_decode(engine, hw, narrow, wide, model, tp, batch):
    try:
        fast = _decode_s(engine, hw, model, tp, batch, narrow)
        slow = _decode_s(engine, hw, model, tp, batch, wide)
    except InferlabError:  # a TP the model's heads do not divide
        return
    assert fast <= slow * (1 + 1e-9), (f"{model} tp{tp} batch {batch}: {narrow} {fast * 1e3:.3f} ms > "
                                       f"{wide} {slow * 1e3:.3f} ms")
