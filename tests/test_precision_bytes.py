"""Low-precision formats obey the bytes: on a GPU that computes in the format, a memory-bound
decode step with narrower weights is never slower (issue 10, deliverable 2).

Pairs: NVFP4 and MXFP4 against FP8 on Blackwell (B200, B300, GB200), FP8 against BF16 there and
on Hopper (H100, H200). Each format keeps its own activations rule (FP4 activations with FP4
weights, FP8 with FP8, BF16 with BF16); the KV cache is BF16 for both sides. A step of batch
1-64 at 1,024 tokens of context is memory-bound on all of these GPUs, for dense and MoE models
from the catalog at TP 1-8 (a hybrid with linear attention among them: its states stay BF16/FP32).

Inside a step a scaled or weight-only GEMM at a few rows runs the engine's small-M tactic: the
shape padded to 8 rows at the format's own peak share, its weights streamed at the better of its
own and the 16-bit kernel's bandwidth share (:func:`inferlab.core.timing.in_step_terms`). Before
that rule the standalone op-level fits of NVFP4 (``m_half`` 635, ``n_half`` 6366 and 45% of DRAM
bandwidth on the B200 for TensorRT-LLM) made NVFP4 decode up to 18.5% slower than FP8
(DeepSeek-V3 tp8 batch 1) and FP8 up to 1.1% slower than BF16 (vLLM, H200); a first rule that
only tied the occupancy terms left INT4 weight-only slower than INT8 on the H20 and gpt-oss's
MXFP4 experts slower than FP8 on the B200. The examples pin those worst points.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from inferlab.core.graph import Step
from inferlab.techniques.step import run_step
from inferlab.errors import InferlabError
from inferlab.inputs.resolve import deployment

MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "mixtral-8x7b", "qwen3-30b-a3b", "gpt-oss-20b",
          "gpt-oss-120b", "llama-4-scout", "deepseek-v3", "qwen3-next-80b-a3b")
BLACKWELL = ("b200", "b300", "gb200")
HOPPER = ("h100-sxm", "h200-sxm")
PAIRS = [(hw, narrow, wide) for hw in BLACKWELL for narrow, wide in (("nvfp4", "fp8"), ("mxfp4", "fp8"),
                                                                     ("fp8", "bf16"))]
PAIRS += [(hw, "fp8", "bf16") for hw in HOPPER]
# weight-only INT4 against INT8 and INT8 against BF16 where INT8 runs on tensor cores
PAIRS += [(hw, narrow, wide) for hw in ("h20", "l40s", "h100-sxm") for narrow, wide in (("int4", "int8"),
                                                                                      ("int8", "bf16"))]
#: The most sequences a step of the pair keeps memory-bound. INT4 weight-only GEMMs compute at the
#: BF16 rate: on the H20 (148 dense BF16 TFLOPS next to 4.0 TB/s) a tp8 slice of Llama-3.1-8B at 64
#: rows needs 2 x 64 FLOP per weight against 0.5 B per weight, 256 FLOP/B over a BF16 ridge of
#: 148 / 4.0 = 37 FLOP/B: compute-bound, where INT8 at twice the rate may win. At 8 rows (the
#: small-M padding) it is 32 FLOP/B: memory-bound.
MEMORY_BOUND_BATCH = {("h20", "int4", "int8"): 8}
ENGINES = ("generic", "trtllm", "vllm", "sglang")

def _params():
    for engine in ENGINES:
        for hw, narrow, wide in PAIRS:
            yield pytest.param(engine, hw, narrow, wide, id=f"{engine}-{hw}-{narrow}-vs-{wide}")


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
@example(model="qwen3-next-80b-a3b", tp=4, batch=64)
def test_narrower_weights_are_never_slower_in_memory_bound_decode(engine, hw, narrow, wide, model, tp, batch):
    batch = min(batch, MEMORY_BOUND_BATCH.get((hw, narrow, wide), batch))
    try:
        fast = _decode_s(engine, hw, model, tp, batch, narrow)
        slow = _decode_s(engine, hw, model, tp, batch, wide)
    except InferlabError:  # a TP the model's heads do not divide
        return
    assert fast <= slow * (1 + 1e-9), (f"{model} tp{tp} batch {batch}: {narrow} {fast * 1e3:.3f} ms > "
                                       f"{wide} {slow * 1e3:.3f} ms")


#: GPUs with FP8 tensor cores and no FP4 ones: NVFP4, MXFP4 and INT4 weights run weight-only there,
#: their GEMMs and context attention at BF16 (16-bit activations), where FP8 weights run FP8.
FP8_ONLY = ("h100-sxm", "h200-sxm", "l40s", "rtx-4090")


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=25, deadline=None, derandomize=True)
@given(hw=st.sampled_from(FP8_ONLY), narrow=st.sampled_from(["nvfp4", "mxfp4", "int4"]),
       model=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "mistral-7b", "qwen3-30b-a3b"]),
       tp=st.sampled_from([1, 2, 4]), batch=st.integers(1, 32), context=st.integers(1024, 32768))
@example(hw="h200-sxm", narrow="nvfp4", model="llama-3.1-70b", tp=2, batch=32, context=16384)
@example(hw="rtx-4090", narrow="nvfp4", model="llama-3.1-8b", tp=1, batch=32, context=1024)
def test_weight_only_formats_over_an_fp8_cache_never_decode_slower_than_fp8(engine, hw, narrow, model, tp, batch,
                                                                            context):
    """Over the same FP8 KV cache, a weight-only format narrower than FP8 moves fewer bytes per
    decode step, and decode attention reads the cache as FP8 weights' does (its math follows the
    KV cache, not the 16-bit activations): at 32 rows or fewer, memory-bound, it is never slower.
    It had been: the attention of the 16-bit side computed at the BF16 rate, at the fitted 3.8%
    of peak (TensorRT-LLM on the H200), 30.3 ms a step against 26.8 for FP8 at 16,384 tokens."""
    def step(precision: str) -> float:
        dep = deployment(model, hw, tp=tp, precision=f"{precision} kv:fp8", engine=engine)
        return float(run_step(dep, Step.decode(np.array(float(batch)), np.array(float(context)))).time_s)

    try:
        fast, slow = step(narrow), step("fp8")
    except InferlabError:  # a TP the model's heads do not divide; a model that does not fit
        return
    assert fast <= slow * (1 + 1e-9), f"{narrow} {fast * 1e3:.3f} ms > fp8 {slow * 1e3:.3f} ms"


@pytest.mark.parametrize("model, tp", [("llama-3.1-8b", 1), ("llama-3.1-70b", 8), ("deepseek-v3", 8),
                                       ("qwen3-30b-a3b", 2), ("qwen3-235b-a22b", 8), ("gpt-oss-120b", 2),
                                       ("qwen3.5-397b-a17b", 8)])
@pytest.mark.parametrize("engine", ["generic", "vllm", "sglang", "trtllm-pytorch"])
def test_a_b200_is_never_slower_than_an_h200(model, tp, engine):
    """The B200 has more of every resource a step uses: 8 TB/s of HBM3e against 4.8 TB/s, and
    2.25 / 4.5 PFLOPS dense BF16 / FP8 against 0.99 / 1.98 (NVIDIA datasheets). So a batch of
    2,048-token prompts (compute-bound prefill) and its decode are never slower on it, in any
    format the checkpoint ships or is quantized to. vLLM's block-scaled FP8 (DeepSeek-V3's
    checkpoint) had been 15% slower on the B200 at batch 8: its fitted standalone-kernel bandwidth
    share (11%) was charged to the large-M GEMMs of the prefill.

    One resource is not larger: NCCL's latency for a small all-reduce over 8 GPUs, measured at
    25 us on B200s against 16 us on H100s (ops-public.csv, 512 B). The generic engine all-reduces
    with NCCL (the others with their own kernels, alike on both), so its TP8 decode step of a few
    tokens, 160 all-reduces on Llama-3.1-70B, may be up to 5% slower on the B200."""
    from inferlab import estimate
    from inferlab.errors import InferlabError

    for precision in (None, "fp8", "bf16"):
        try:
            h200, b200 = (estimate(model, gpu, tp=tp, engine=engine, precision=precision, isl=2048, osl=64,
                                   batch_size=[8, 64]) for gpu in ("h200-sxm", "b200"))
        except InferlabError:
            continue  # a format this model or engine does not run
        assert np.all(np.asarray(b200.ttft_s) <= np.asarray(h200.ttft_s) * 1.0001), precision
        nccl_latency = 1.05 if engine == "generic" and tp >= 8 else 1.0001
        assert np.all(np.asarray(b200.tpot_s) <= np.asarray(h200.tpot_s) * nccl_latency), precision


@pytest.mark.parametrize("hw", ["l40s", "rtx-4090", "h100-sxm", "b200", "a100-sxm-80gb"])
@pytest.mark.parametrize("engine", ["generic", "vllm", "sglang", "trtllm"])
def test_a_weight_only_prefill_is_never_faster_than_its_activations_format(hw, engine):
    """A W4A16 or W8A16 GEMM widens its weights and runs BF16 tensor-core math: once compute binds
    (an 8,192-token prompt) it is no faster than BF16. The weight-only curves are fitted on A100
    rows alone (W8A16 at 0.99 of the BF16 peak there); carried to an L40S, whose BF16 kernels reach
    0.62 of peak, INT4 and INT8 weight-only prefills had been 21% and 22% faster than BF16 (720 ms
    against 570 and 560). They are bounded by the BF16 kernel's share at many rows, so only the
    BF16 curve's own m_half (125 rows of 8,192: 1.5%) and the other ops leave a few percent."""
    import inferlab

    def ttft(precision):
        return inferlab.estimate("llama-3.1-8b", hw, precision=precision, isl=8192, osl=2, batch_size=1,
                                 engine=engine).ttft.to("ms").magnitude

    bf16 = ttft("bf16 kv:bf16")
    for weight_only in ("int4 kv:bf16", "w:int8 a:bf16 kv:bf16"):
        assert ttft(weight_only) >= 0.97 * bf16, weight_only


@pytest.mark.parametrize("hw", ["h100-sxm", "h200-sxm", "l40s", "b200"])
@pytest.mark.parametrize("engine", ["generic", "vllm", "sglang", "trtllm"])
def test_int8_runs_as_fp8_where_a_gpu_runs_both_at_one_rate(hw, engine):
    """INT8 W8A8 and per-tensor FP8 share the 8-bit tensor-core path of Hopper, Ada and the B200 at
    one dense rate (1,979, 733 and 4,500 TFLOPS dense). No INT8 op row exists there: the A100's INT8
    curve (0.87 of its peak) carried over had made Llama-3.1-70B's 8,192-token prefill on four H100s
    17-21% faster in INT8 than in FP8 (vLLM 381 against 480 ms). INT8 takes the GPU's own FP8 curve."""
    import inferlab

    def ttft(precision):
        return inferlab.estimate("llama-3.1-70b", hw, tp=4, precision=precision, isl=8192, osl=2, batch_size=1,
                                 engine=engine).ttft.to("ms").magnitude

    assert ttft("int8 kv:bf16") == pytest.approx(ttft("fp8 kv:bf16"), rel=0.01)


def test_int8_keeps_its_own_curve_where_it_was_measured_or_runs_at_another_rate():
    """The FP8 stand-in is added after the medians over GPUs: the A100's INT8 runs its own rows'
    curve (a first version let the H100's, L40S's and B200's FP8 copies into the medians, and an
    A100's INT8 prefill slowed 23%, from 376 to 464 ms), and a B300, whose INT8 runs at 150 TOPS
    against 4,500 for FP8, is not given FP8's curve through its family."""
    import inferlab

    def ttft(hw, precision):
        return inferlab.estimate("llama-3.1-8b", hw, precision=precision, isl=8192, osl=2, batch_size=1,
                                 engine="vllm").ttft.to("ms").magnitude

    # INT8 at 624 TOPS against BF16's 312 on the A100: the GEMMs (most of the prefill) near twice as fast
    assert ttft("a100-sxm-80gb", "int8 kv:bf16") < 0.75 * ttft("a100-sxm-80gb", "bf16 kv:bf16")
    assert ttft("b300", "int8 kv:bf16") > 5 * ttft("b300", "fp8 kv:bf16")


@pytest.mark.parametrize("hw", ["b200", "gb200", "b300"])
@pytest.mark.parametrize("engine", ["generic", "vllm", "sglang", "trtllm"])
def test_mxfp4_and_nvfp4_prefill_on_one_tensor_core_path(hw, engine):
    """Both are block-scaled FP4 MMAs on Blackwell (32-element blocks with E8M0 scales against 16
    with E4M3): once compute binds (an 8,192-token prompt) they prefill alike. No MXFP4 op row
    exists: MXFP4 had taken the BF16 curve's higher efficiency and prefilled Llama-3.1-8B 28%
    faster than NVFP4 on a B200 (vLLM, 846 against 1,179 ms at 128 x 2,048 tokens)."""
    import inferlab

    def ttft(precision):
        return inferlab.estimate("llama-3.1-8b", hw, precision=precision, isl=8192, osl=2, batch_size=1,
                                 engine=engine).ttft.to("ms").magnitude

    assert ttft("mxfp4 kv:bf16") == pytest.approx(ttft("nvfp4 kv:bf16"), rel=0.02)


@pytest.mark.parametrize("hw", ["h100-sxm", "l40s", "b200"])
def test_int4_weights_over_fp8_activations_compute_in_fp8(hw):
    """W4A8 (TensorRT-LLM's W4A8-AWQ): INT4 weights widened to FP8 inside the GEMM, FP8 tensor-core
    math. A compute-bound prefill runs as FP8's does, a memory-bound decode reads INT4's bytes; it
    had run as W4A16 (BF16 math: Llama-3.1-70B's 8,192-token prefill on 4 H100s in 563 ms, not 434)."""
    import inferlab

    def run(precision, isl, osl):
        e = inferlab.estimate("llama-3.1-70b", hw, tp=4, precision=precision, isl=isl, osl=osl, batch_size=1)
        return float(e.ttft_s), float(e.tpot_s)

    w4a8, fp8, w4a16 = (run(p, 8192, 64) for p in ("w:int4 a:fp8 kv:bf16", "fp8 kv:bf16", "w:int4 a:bf16 kv:bf16"))
    assert 0.9 * fp8[0] <= w4a8[0] <= 1.02 * fp8[0] and w4a8[0] < w4a16[0]  # FP8's math, fewer weight bytes
    assert w4a8[1] < fp8[1]  # half the weight bytes of FP8 in decode


def test_an_int4_kv_cache_leaves_fp8_attention_as_it_was():
    # the W4A8 rule is the weights': an INT4 KV cache under FP8 activations had turned prefill
    # attention to FP8 math (8B on one H100, 8,192 tokens: 163 -> 143 ms)
    import inferlab

    def ttft(precision):
        return float(inferlab.estimate("llama-3.1-8b", "h100-sxm", precision=precision, isl=8192, osl=2).ttft_s)

    assert ttft("fp8 kv:int4") == pytest.approx(ttft("fp8 kv:bf16"), rel=0.02)
