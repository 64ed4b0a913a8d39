"""The roofline core against hand derivations, and its invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import InfeasibleError, Q, load_hardware, load_model
from inferlab.core.graph import Step, build_graph, experts_touched
from inferlab.core.ops import Attention
from inferlab.techniques.step import decode, prefill
from inferlab.core.timing import roofline_seconds
from inferlab.unit_registry import DimensionError
from inferlab import estimate
from inferlab.inputs.resolve import deployment
from inferlab.techniques.tensor_parallel import apply_tensor_parallel

H100_BW = 3.35e12       # B/s, NVIDIA H100 SXM datasheet
H100_BF16 = 989e12      # FLOP/s dense


def _roofline(model="llama-3.1-8b", hw="h100-sxm", tp=1, precision="bf16", **kw):
    return deployment(model, hw, tp=tp, precision=precision, profile="roofline", **kw)


def test_llama_3_1_8b_decode_step_by_hand():
    """Batch 1 at context 1024, BF16, one H100, speed of light: every byte read once.

    Weights per layer: q 4096x4096 + k,v 2x4096x1024 + o 4096x4096 + SwiGLU 3x4096x14336
      = 218,103,808 params x 2 B = 436,207,616 B; x 32 layers = 13,958,643,712 B
    LM head 128,256 x 4,096 x 2 B = 1,050,673,152 B; one embedding row 4,096 x 2 B = 8,192 B
    KV read: 1,025 tokens x (2 x 8 x 128) x 2 B x 32 layers = 134,348,800 B; written 131,072 B
    -> 15,143,804,928 B / 3.35e12 B/s = 4.5205 ms. Activations read and written by the
    GEMMs and norms add ~11 MB (0.07%).
    """
    step = decode(_roofline(), np.array(1.0), np.array(1024.0))
    expected = (13_958_643_712 + 1_050_673_152 + 8_192 + 134_348_800 + 131_072) / H100_BW
    assert float(step.time_s) == pytest.approx(expected, rel=1e-3)
    assert all(str(t.bound) == "memory" for t in step.times)


def test_llama_3_1_8b_prefill_by_hand():
    """One 4096-token prompt, BF16, one H100, speed of light.

    GEMM FLOPs: 2 x 4096 tokens x 6,979,321,856 linear params = 5.7174e13
    attention: 2 x 32 heads x (4096 x 4097 / 2 causal pairs) x (128 + 128) x 32 layers = 4.3990e12
                                                                     -> 6.1573e13 FLOP / 989e12
    Memory-bound passes per layer (T = 4096, H = 4096, I = 14336, 2 B): input norm 2TH, residual
    3TH, post-attention norm 2TH, SwiGLU activation 3TI, residual 3TH = 687,865,856 B; x 32,
    plus the embedding (rows read, written) 2TH = 67,108,864 B, plus the LM head on the last
    token, which reads its 128,256 x 4,096 x 2 B = 1,050,673,152 B of weights -> / 3.35e12
    """
    t, h, i = 4096, 4096, 14336
    gemm = 2 * t * 6_979_321_856
    attention = 2 * 32 * (t * (t + 1) / 2) * 256 * 32
    head_bytes = 128_256 * 4096 * 2
    elementwise = 32 * (2 * t * h + 3 * t * h + 2 * t * h + 3 * t * i + 3 * t * h) * 2 + 2 * t * h * 2
    expected = (gemm + attention) / H100_BF16 + (elementwise + head_bytes) / H100_BW
    step = prefill(_roofline(), np.array(1.0), np.array(4096.0))
    assert float(step.time_s) == pytest.approx(expected, rel=2e-3)


def test_naive_attention_materializes_the_score_matrix():
    # 4096 x 4096 scores at FP16 = 33,554,432 B per head per layer, four passes
    flash = Attention("a", batch=1, new_tokens=4096, heads=1, kv_heads=1, implementation="flash")
    naive = Attention("a", batch=1, new_tokens=4096, heads=1, kv_heads=1, implementation="naive")
    assert naive.bytes - flash.bytes == pytest.approx(4 * 4096 * 4096 * 2)
    est_flash = estimate("llama-3.1-8b", "h100-sxm", isl=4096, osl=2, profile="roofline")
    est_naive = estimate("llama-3.1-8b", "h100-sxm", isl=4096, osl=2, profile="roofline", attention="naive")
    assert est_naive.ttft_s > est_flash.ttft_s


def test_experts_touched():
    # one token touches exactly k experts; many tokens touch all E
    assert experts_touched(1, 256, 8) == pytest.approx(8)
    assert experts_touched(10_000, 256, 8) == pytest.approx(256)
    # 2 tokens, E=8, k=2: 8 * (1 - (6/8)^2) = 3.5
    assert experts_touched(2, 8, 2) == pytest.approx(3.5)


def test_precision_falls_back_where_hardware_lacks_it():
    a100 = _roofline(hw="a100-sxm-80gb", precision="fp8").step_precision
    assert a100.gemm == "bf16"  # FP8 on an A100 is not FP8 compute
    h100 = _roofline(precision="fp8").step_precision
    assert h100.gemm == "fp8"
    assert _roofline(precision="int4").step_precision.gemm == "bf16"  # weight-only
    assert _roofline(precision="int4").step_precision.kernel == "int4_wo"
    assert _roofline(hw="b200", precision="nvfp4").step_precision.gemm == "fp4"
    # no FP4 tensor cores on Hopper: FP4 weights are dequantized to BF16 (weight-only), activations BF16
    hopper = _roofline(precision="nvfp4")
    assert (hopper.step_precision.gemm, hopper.step_precision.kernel) == ("bf16", "nvfp4_wo")
    assert hopper.precision.activations == "bf16" and hopper.precision.weights == "nvfp4"


def test_tensor_parallel_inserts_two_all_reduces_per_layer():
    dep = _roofline(model="llama-3.1-70b", tp=4)
    step = decode(dep, np.array(8.0), np.array(2048.0))
    reduces = [op for op in step.ops if op.kind == "collective" and op.name.startswith("all_reduce")]
    assert sum(op.count for op in reduces) == 2 * 80
    # message: 8 tokens x 8192 hidden x 2 B
    assert all(float(op.message_bytes) == 8 * 8192 * 2 for op in reduces)


def test_moe_and_mla_kernels_of_their_own_by_hand():
    """DeepSeek-V3 decode, batch 4: every MoE layer runs top-k routing over the router's FP32
    logits (4 x 256 x 4 B read, 2 x 4 x 8 x 4 B written) and copies each token once per chosen
    expert (4 x 8 x 7168 x 2 B each way); every layer normalizes the query and KV latents
    (4 x (1536 + 512) elements) and rotates the rope part of 128 query heads and the key
    (4 x 129 x 64). Each is a kernel of its own: on a profile whose fused passes pay no floor,
    it still pays the whole kernel floor."""
    from inferlab.calibration.profile import ROOFLINE
    from inferlab.core.timing import time_op

    dep = _roofline(model="deepseek-v3", hw="b200")
    ops = {op.name: op for op in build_graph(dep.model, Step.decode(np.array(4.0), np.array(1000.0)),
                                              dep.step_precision) if op.group == "full/moe"}
    routing, permute = ops["moe_routing"], ops["moe_permute"]
    assert float(routing.bytes) == 4 * 256 * 4 + 2 * 4 * 8 * 4
    assert float(permute.bytes) == 2 * 4 * 8 * 7168 * 2
    assert float(ops["latent_norms"].bytes) == 2 * 4 * (1536 + 512) * 2
    assert float(ops["rope"].bytes) == 2 * 4 * 129 * 64 * 2
    assert all(ops[n].own_kernel for n in ("moe_routing", "moe_permute", "latent_norms", "rope"))
    assert not ops["input_norm"].own_kernel
    fused = ROOFLINE.model_copy(update={"kernel_floor_s": 3e-6, "elementwise_floor_fraction": 0.0})
    hw = load_hardware("b200")
    assert float(time_op(routing, hw, fused, "decode").time_s) == pytest.approx(3e-6 + float(routing.bytes) / 8e12)
    assert float(time_op(ops["input_norm"], hw, fused, "decode").time_s) == pytest.approx(
        float(ops["input_norm"].bytes) / 8e12)


def test_kv_heads_replicate_when_tp_exceeds_them():
    # Llama-3.1-70B has 8 KV heads: at TP=16 each rank still holds one
    model = load_model("llama-3.1-70b")
    ops = build_graph(model, Step.decode(np.array(1.0), np.array(100.0)), _roofline(model="llama-3.1-70b").step_precision)
    sharded = apply_tensor_parallel(ops, 16)
    att = next(op for op in sharded if op.name == "attention")
    assert att.kv_heads == 1 and att.heads == 4
    assert att.kv_elements == 2 * 1 * 128
    # One fused QKV GEMM: 64 query heads x 128 split 16 ways (512) + one K and one V head (256)
    qkv = next(op for op in sharded if op.name == "qkv_proj")
    assert float(qkv.n) == 64 * 128 / 16 + 2 * 128 and float(qkv.kv_n) == 2 * 128
    # At TP=4 the KV heads split too: 64*128/4 + 2*8*128/4
    qkv4 = next(op for op in apply_tensor_parallel(ops, 4) if op.name == "qkv_proj")
    assert float(qkv4.n) == 2048 + 512


def test_standalone_gemm_pays_its_quantization_a_fused_step_does_not():
    """A per-tensor FP8 GEMM timed alone quantizes its input (``fixed_s``); inside a step the
    engine fused that into the norm before it (``gemm_fixed_fraction``)."""
    from inferlab.calibration.profile import Profile
    from inferlab.core.ops import Gemm
    from inferlab.core.timing import time_op

    hw = load_hardware("h100-sxm")
    curve = {"bandwidth_fraction": 0.8, "fixed_s": 9e-6}
    op = Gemm("g", m=1.0, n=8192.0, k=8192.0, weight_bytes_per_element=1.0, act_bytes_per_element=1.0,
              precision="fp8", kernel="fp8")
    fused = Profile(gemm={"kernels": {"fp8": curve}}, kernel_floor_s=5e-6, gemm_fixed_fraction=0.0)
    alone = time_op(op, hw, fused, "decode", standalone=True).time_s
    in_step = time_op(op, hw, fused, "decode").time_s
    memory = (8192 * 8192 + 8192 + 2 * 8192) / (H100_BW * 0.8)   # weights + fp8 input + bf16 output
    assert float(in_step) == pytest.approx(memory + 5e-6)
    assert float(alone) == pytest.approx(memory + 5e-6 + 9e-6)


def test_in_step_scaled_gemm_runs_the_small_m_tactic():
    """An NVFP4 GEMM at one row: the op-level curve (m_half 600, n_half 6000, 45% of bandwidth,
    a standalone kernel without split-K) makes it compute-starved; inside a step it runs the
    small-M tactic: the shape padded to 8 rows at its own peak share (0.9), its weights at the
    better of its own and the BF16 kernel's bandwidth share (0.8), and is memory-bound."""
    from inferlab.calibration.profile import Profile
    from inferlab.core.ops import Gemm
    from inferlab.core.timing import time_op
    from inferlab.core.quantization import tensor_flops_per_s

    hw = load_hardware("b200")
    bw, peak = hw.memory_bandwidth.si, tensor_flops_per_s(hw, "nvfp4")
    profile = Profile(gemm={"kernels": {
        "bf16": {"peak_fraction": 0.8, "m_half": 100.0, "n_half": 50.0, "bandwidth_fraction": 0.8},
        "nvfp4": {"peak_fraction": 0.9, "m_half": 600.0, "n_half": 6000.0, "bandwidth_fraction": 0.45,
                  "fixed_s": 5e-6}}}, kernel_floor_s=2e-6, gemm_fixed_fraction=0.0)
    n = k = 4096.0
    op = Gemm("g", m=1.0, n=n, k=k, weight_bytes_per_element=0.5625, act_bytes_per_element=0.5625,
              precision="fp4", kernel="nvfp4")
    bytes_moved = n * k * 0.5625 + k * 0.5625 + n * 2.0   # weights with block scales + fp4 input + bf16 output
    flops = 2.0 * n * k
    # standalone: efficiency 0.9 x 1/(1 + 600) x 4096/(4096 + 6000) -> compute-bound, plus the fixed cost
    alone_compute = flops / (peak * 0.9 * (1 / 601) * (n / (n + 6000)))
    assert alone_compute > bytes_moved / (bw * 0.45)
    alone = time_op(op, hw, profile, "decode", standalone=True).time_s
    assert float(alone) == pytest.approx(alone_compute + 2e-6 + 5e-6)
    # in a step: 8 padded rows at 0.9 of the FP4 peak, far below the memory time at 80% of bandwidth
    step = time_op(op, hw, profile, "decode")
    assert float(step.compute_s) == pytest.approx(8 * flops / (peak * 0.9))
    assert float(step.compute_s) < bytes_moved / (bw * 0.8)
    assert float(step.time_s) == pytest.approx(bytes_moved / (bw * 0.8) + 2e-6)
    # above one MMA tile of rows (128) the fitted large-tile kernel takes over as (128 / M)^2:
    # at M = 512 the blend is 15/16 of the fitted compute and 1/16 of the small-M one; its
    # operands stream at the better of the format's and the 16-bit kernel's share at every M
    big = Gemm("g", m=512.0, n=n, k=k, weight_bytes_per_element=0.5625, act_bytes_per_element=0.5625,
               precision="fp4", kernel="nvfp4")
    t_fit = time_op(big, hw, profile, "prefill", standalone=True)
    t_step = time_op(big, hw, profile, "prefill")
    small_compute = 2.0 * 512 * n * k / (peak * 0.9)
    small_memory = float(big.bytes) / (bw * 0.8)
    blend = 15 / 16 * float(t_fit.compute_s) + small_compute / 16
    # ... but the rows are independent: four launches of one tile (128 rows each at the small-M
    # tactic, each reading the weights again) cost less than this curve's m_half of 600 rows
    tile_memory = (n * k * 0.5625 + 128 * (k * 0.5625 + n * 2.0)) / (bw * 0.8)
    four_tiles = 4 * max(small_compute / 4, tile_memory)
    assert four_tiles < blend
    assert float(t_step.compute_s) == pytest.approx(four_tiles)
    # with a curve that fills the GPU (m_half 10 rows, n_half 50 outputs) the blend, within ~3%
    # of the small-M compute, is cheaper than any split (two halves already read the weights
    # twice, 3 us against ~2.2): it stands
    lean = Profile(gemm={"kernels": {**profile.gemm.kernels, "nvfp4": profile.gemm.kernels["nvfp4"].model_copy(
        update={"m_half": 10.0, "n_half": 50.0})}}, kernel_floor_s=2e-6, gemm_fixed_fraction=0.0)
    lean_fit = float(time_op(big, hw, lean, "prefill", standalone=True).compute_s)
    lean_blend = 15 / 16 * lean_fit + small_compute / 16
    assert lean_blend < four_tiles
    assert float(time_op(big, hw, lean, "prefill").compute_s) == pytest.approx(lean_blend)
    assert float(t_step.memory_s) == pytest.approx(small_memory)
    assert float(t_fit.memory_s) == pytest.approx(float(big.bytes) / (bw * 0.45))  # standalone: the fit's
    # a BF16 GEMM keeps its fitted curve in a step (the op rows measured cuBLAS's own small-M tactics)
    plain = Gemm("g", m=1.0, n=n, k=k, precision="bf16")
    assert float(time_op(plain, hw, profile, "decode").time_s) == pytest.approx(
        float(time_op(plain, hw, profile, "decode", standalone=True).time_s))


def test_sharded_flops_add_up():
    dep = _roofline(model="llama-3.1-70b")
    ops = build_graph(dep.model, Step.prefill(np.array(2.0), np.array(512.0)), dep.step_precision)
    for tp in (2, 4, 8):
        sharded = apply_tensor_parallel(ops, tp)
        for full, part in zip([o for o in ops if o.shard in ("column", "row", "heads")],
                              [o for o in sharded if o.shard in ("column", "row", "heads")]):
            assert tp * np.asarray(part.flops) == pytest.approx(np.asarray(full.flops))


def test_graph_memo_never_mixes_two_models_with_one_id():
    """Steps are memoized by model identity: an edited copy (same id, half the layers) is
    timed on its own graph, and the same step on another GPU reuses the graph, not its times."""
    full = _roofline()
    half_model = full.model.model_copy(update={"num_hidden_layers": 16, "layers": full.model.layers[:16]})
    assert sum(n for _, n in half_model.layer_groups) == 16   # no stale cache from the original
    half = deployment(half_model, "h100-sxm", profile="roofline")
    b, c = np.array(8.0), np.array(1000.0)
    t_full = float(decode(full, b, c).time_s)
    t_half = float(decode(half, b, c).time_s)
    assert t_half < 0.6 * t_full
    assert float(decode(full, b, c).time_s) == t_full
    other = deployment("llama-3.1-8b", "h200-sxm", profile="roofline")
    assert float(decode(other, b, c).time_s) < t_full   # same graph, more bandwidth


def test_tp_one_is_identity():
    dep = _roofline()
    ops = build_graph(dep.model, Step.decode(np.array(4.0), np.array(300.0)), dep.step_precision)
    assert apply_tensor_parallel(ops, 1) is ops


def test_roofline_on_pint_quantities_catches_swapped_arguments():
    t = roofline_seconds(Q("1 TFLOP"), Q("1 GB"), Q("989 TFLOPS"), Q("3.35 TB/s"))
    assert t.to("ms").magnitude == pytest.approx(1 / 989 * 1e3)  # 1 TFLOP at 989 TFLOP/s
    with pytest.raises(DimensionError):
        roofline_seconds(Q("1 TFLOP"), Q("1 GB"), Q("3.35 TB/s"), Q("989 TFLOPS"))


def test_does_not_fit_says_why_and_what_would():
    with pytest.raises(InfeasibleError) as info:
        estimate("llama-3.1-70b", "h100-sxm", tp=1)
    err = info.value
    # 70.55e9 params: linear in BF16 plus embedding and head, ~141 GB > 77 GB usable
    assert err.needed_bytes > 140e9 and err.available_bytes == pytest.approx(81559 * 2**20 * 0.9)
    assert err.suggestion == {"tp": 2}
    with pytest.raises(InfeasibleError) as info:
        estimate("llama-3.1-70b", "l40s", tp=4, batch_size=512, isl=4096, osl=4096)
    assert "largest batch that fits" in str(info.value) and info.value.suggestion["batch_size"] >= 1


def test_waves_when_the_batch_does_not_fit():
    est = estimate("llama-3.1-70b", "l40s", tp=4, batch_size=512, isl=4096, osl=4096, waves=True)
    assert float(est.waves) > 1


def test_cost_by_hand():
    est = estimate("llama-3.1-8b", "h100-sxm", batch_size=8, isl=1024, osl=128, profile="roofline")
    # 2.95 USD per GPU-hour (catalog), one GPU: USD per request = 2.95 / 3600 x total time / 8
    assert float(est.cost.usd_per_request) == pytest.approx(2.95 / 3600 * float(est.total_s) / 8)
    tokens_per_s = 8 * 128 / float(est.total_s)
    assert float(est.output_tokens_per_s) == pytest.approx(tokens_per_s)


def test_a_one_token_output_has_no_decode_cost_per_output_token():
    """osl=1: the one output token comes with the prefill, no decode step runs, so there are no
    decode-produced tokens to charge decode time to: $/M output is NaN (null in JSON, ``-`` in
    the table), not $0, while a request still costs 2.95 / 3600 x total / 8 and the input
    tokens carry the prefill. osl=2: one decode step, billed as an API bills, over the 8 x 2 output
    tokens: 2.95 / 3600 x step / 16 x 1e6, so that 1024 input and 2 output tokens cost the request
    (over the 8 x 1 tokens the step makes it had been 2x that, the sum 10% over the request)."""
    one = estimate("llama-3.1-8b", "h100-sxm", batch_size=8, isl=1024, osl=[1, 2], profile="roofline")
    usd = one.cost.usd_per_million_output
    assert np.isnan(usd[0])
    step = float(one.total_s[1] - one.ttft_s[1])
    assert usd[1] == pytest.approx(2.95 / 3600 * step / 16 * 1e6, rel=1e-12)
    billed = (1024 * one.cost.usd_per_million_input[1] + 2 * usd[1]) / 1e6
    assert billed == pytest.approx(2.95 / 3600 * float(one.total_s[1]) / 8, rel=1e-12)
    assert float(one.cost.usd_per_request[0]) == pytest.approx(2.95 / 3600 * float(one.total_s[0]) / 8, rel=1e-12)
    assert float(one.cost.usd_per_million_input[0]) == pytest.approx(
        2.95 / 3600 * float(one.ttft_s[0]) / (8 * 1024) * 1e6, rel=1e-12)
    single = estimate("llama-3.1-8b", "h100-sxm", batch_size=8, isl=1024, osl=1, profile="roofline")
    assert single.to_dict()["cost"]["usd_per_million_output"] is None
    assert single.summary_rows()[0][9] == "-"
    # and no TPOT: '-' and null, as serve says it, not 0.00 ms; explain shows no decode step
    assert single.summary_rows()[0][4] == "-" and single.to_dict()["tpot_s"] is None
    said = single.explain()
    banded = estimate("llama-3.1-8b", "h100-sxm", batch_size=8, isl=1024, osl=1)
    assert "TPOT - (one output token a request: no decode step)" in banded.explain()
    assert banded.to_dict()["interval"]["tpot_s"]["point"] is None  # not a 0.00-0.00 band
    assert "decode: none (one output token a request)" in said and "decode:" not in said.replace("decode: none", "")


def test_static_batch_totals():
    est = estimate("llama-3.1-8b", "h100-sxm", batch_size=4, isl=512, osl=64, profile="roofline")
    # the first token comes with the prefill; 63 more decode steps follow
    assert float(est.total_s) == pytest.approx(float(est.ttft_s) + 63 * float(est.tpot_s))
    # TPOT is the mean over contexts 512..574: between the first and the last step's time
    first = float(decode(est.deployment, np.array(4.0), np.array(512.0)).time_s)
    last = float(decode(est.deployment, np.array(4.0), np.array(574.0)).time_s)
    assert first <= float(est.tpot_s) <= last


@settings(max_examples=30, deadline=None)
@given(
    batch=st.integers(1, 256), isl=st.integers(1, 8192), osl=st.integers(1, 2048),
    scale=st.floats(1.01, 10.0), model=st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b", "gemma-3-27b", "mistral-7b"]),
)
def test_more_bandwidth_or_flops_is_never_slower(batch, isl, osl, scale, model):
    hw = load_hardware("h200-sxm")
    faster_mem = hw.model_copy(update={"memory_bandwidth": hw.memory_bandwidth.model_copy(
        update={"si": hw.memory_bandwidth.si * scale})})
    faster_flops = hw.model_copy(update={"flops": {k: v.model_copy(update={"si": v.si * scale})
                                                   for k, v in hw.flops.items()}})
    kw = dict(isl=isl, osl=osl, batch_size=batch, waves=True)
    base = estimate(model, hw, **kw)
    for other in (faster_mem, faster_flops):
        est = estimate(model, other, **kw)
        assert float(est.ttft_s) <= float(base.ttft_s) * (1 + 1e-9)
        assert float(est.tpot_s) <= float(base.tpot_s) * (1 + 1e-9)
    for value in (base.ttft_s, base.tpot_s, base.total_s):
        assert np.all(np.isfinite(value)) and np.all(value >= 0)


@settings(max_examples=20, deadline=None)
@given(ctx=st.integers(0, 100_000), extra=st.integers(1, 50_000))
def test_decode_step_grows_with_context(ctx, extra):
    dep = _roofline(model="llama-3.1-8b")
    a = float(decode(dep, np.array(4.0), np.array(float(ctx))).time_s)
    b = float(decode(dep, np.array(4.0), np.array(float(ctx + extra))).time_s)
    assert b >= a


def test_mla_without_a_query_latent_builds_its_graph():
    """DeepSeek-V2-Lite's MLA has no q_lora_rank (None): only the KV latent is normalized."""
    from inferlab.inputs.resolve import deployment

    m = load_model("deepseek-v3")
    lite = m.model_copy(update={"mla": m.mla.model_copy(update={"q_lora_rank": None})})
    dep = deployment(lite, "h200-sxm", tp=8, precision="fp8")
    ops = build_graph(lite, Step.prefill(1.0, 128.0), dep.step_precision)
    norms = next(op for op in ops if op.name == "latent_norms")
    assert float(norms.elements_read) == 128 * m.mla.kv_lora_rank
    assert not any(op.name == "q_a_proj" for op in ops)


def test_mla_decode_attention_runs_at_its_own_kernels_rate_by_hand():
    """DeepSeek-V3's absorbed decode attention over TP8 (16 of 128 heads a GPU), batch 256 at
    4,096 cached tokens, on a B200: 256 x 4,097 pairs x 16 heads x 2 x (576 + 512) FLOP =
    36.5 GFLOP a layer. MLA kernels stack a sequence's heads as the rows of 64-row tiles; with
    full tiles Blackwell's CUTLASS MLA decode moves 4,124 GB/s of a BF16 latent, 242 FLOP a byte
    (128 heads x 2 x 1,088 / 1,152 B): 998 TFLOPS (sglang PR #6929). 16 heads fill a quarter,
    249.5 TFLOPS, so 0.1463 ms of compute, above the latent's 256 x 4,097 x 576 B = 604 MB at
    8 TB/s x the profile's share (0.0755 ms at 1.0). With attention DP (all 128 heads a rank) the
    tiles are full: four times the rate. Hopper keeps FlashMLA's 580 of the H800's 989 TFLOPS."""
    from inferlab.core.timing import mla_decode_flops_per_s, time_op

    dep = deployment("deepseek-v3", "b200", tp=8, precision="fp8", engine="trtllm")
    step = Step.decode(np.array(256.0), np.array(4096.0))
    att = next(op for op in apply_tensor_parallel(build_graph(dep.model, step, dep.step_precision), 8)
               if op.name == "attention" and op.group == "full/moe")
    assert att.latent and att.heads == 16
    flops = 256 * 4097 * 16 * 2 * (576 + 512)
    assert float(att.flops) == pytest.approx(flops)
    rate = 998e12 / 4
    assert mla_decode_flops_per_s(load_hardware("b200"), 16) == pytest.approx(rate)
    assert mla_decode_flops_per_s(load_hardware("gb200"), 128) == pytest.approx(2500e12 * 998 / 2250)
    assert mla_decode_flops_per_s(load_hardware("h200-sxm"), 128) == pytest.approx(580e12)  # H100's die
    rubin = load_hardware("rubin")  # no published MLA kernel: Blackwell's share of its own BF16 peak
    from inferlab.core.timing import tensor_flops_per_s
    assert mla_decode_flops_per_s(rubin, 128) == pytest.approx(tensor_flops_per_s(rubin, "bf16") * 998 / 2250)
    assert mla_decode_flops_per_s(load_hardware("b200"), 128) == pytest.approx(4 * rate)
    assert mla_decode_flops_per_s(load_hardware("b200"), 16, 4) == pytest.approx(4 * rate)  # MTP: 4 rows a head
    t = time_op(att, load_hardware("b200"), dep.profile, "decode")
    assert float(t.compute_s) == pytest.approx(flops / rate)
    assert float(t.compute_s) > float(t.memory_s)
    # a GQA decode (Llama-3.1-70B, 8 query heads per KV head) keeps the fitted share
    gqa = next(op for op in build_graph(load_model("llama-3.1-70b"), step, dep.step_precision) if op.name == "attention")
    assert not gqa.latent


def test_mla_decode_on_a_part_without_tensor_core_tiles_keeps_the_fitted_share():
    """A CPU has no 64-row tiles for MLA's kernels to fill: its absorbed decode is timed as any
    attention op (the profile's share of its peak), where a GPU's is not."""
    from dataclasses import replace

    from inferlab.core.timing import time_op

    dep = deployment("deepseek-v3", "b200", precision="bf16", engine="trtllm")
    att = next(op for op in build_graph(dep.model, Step.decode(np.array(64.0), np.array(4096.0)), dep.step_precision)
               if op.name == "attention" and op.latent)
    cpu, gpu = load_hardware("epyc-9654"), load_hardware("b200")
    assert not cpu.tiled_matrix_units and gpu.tiled_matrix_units
    plain = replace(att, latent=False)
    assert float(time_op(att, cpu, dep.profile, "decode").compute_s) == float(time_op(plain, cpu, dep.profile,
                                                                                      "decode").compute_s)
    assert float(time_op(att, gpu, dep.profile, "decode").compute_s) != float(time_op(plain, gpu, dep.profile,
                                                                                      "decode").compute_s)
