"""A disaggregated pool's memory is its replica's whole layout (attention DP, expert parallelism),
as an aggregated deployment of that layout holds it: hand derivations and the invariant."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferlab

# Qwen3-30B-A3B: 48 layers, hidden 2048, 32 query and 4 KV heads of 128, 128 experts, BF16.
QWEN3_30B_KV_BF16 = 98_304  # B/token: 48 layers x 2 (K, V) x 4 KV heads x 128 x 2 B
# What a GPU holds whole under attention DP instead of 1/8 of under TP8, per layer:
# q 2048 x 4096 + k, v 2048 x 512 each + o 4096 x 2048 = 18,874,368; q/k norms 2 x 128;
# two RMSNorms 2 x 2048; router 2048 x 128 = 262,144 -> 19,140,864; x 48 layers + the final
# norm 2048 = 918,763,520 parameters; the embedding and the (untied) LM head, 151,936 x 2048
# each, 622,329,856 more: 1,541,093,376 (the experts stay spread over EP).
QWEN3_30B_REPLICATED_PARAMS = 1_541_093_376


def _decode_pool(adp: bool, batch: int = 64):
    pools = "prefill=h100-sxmx8:tp8:ep8,decode=h100-sxmx8:tp8:ep8" + (":adp" if adp else "")
    return inferlab.estimate("qwen3-30b-a3b", isl=2048, osl=256, batch_size=batch, engine="trtllm",
                             disaggregation=pools).memory["decode"]


def test_an_attention_dp_decode_pool_holds_each_ranks_sequences_by_hand():
    """64 sequences of 2048 + 256 = 2304 tokens (whole 16-token pages).

    Attention DP over 8 GPUs: each holds the full KV of its 8 sequences,
    8 x 2304 x 98,304 B = 1,811,939,328 B. TP8 without it: the 4 KV heads replicate past
    TP 4, so each GPU holds a quarter of every sequence's KV, 64 x 2304 x 98,304 / 4 =
    3,623,878,656 B (twice as much). The pool with attention DP holds the attention weights,
    the embedding and the LM head whole (each rank runs them on its own sequences):
    7/8 x 1,541,093,376 x 2 B = 2,696,913,408 B more weights per GPU."""
    adp, tp = _decode_pool(True), _decode_pool(False)
    assert float(adp.kv_batch) == 8 * 2304 * QWEN3_30B_KV_BF16 == 1_811_939_328
    assert float(tp.kv_batch) == 64 * 2304 * QWEN3_30B_KV_BF16 // 4 == 3_623_878_656
    assert adp.weights - tp.weights == pytest.approx(7 / 8 * QWEN3_30B_REPLICATED_PARAMS * 2, abs=1.0)
    assert adp.weights - tp.weights == pytest.approx(2_696_913_408, abs=1.0)


def test_a_decode_batch_that_fits_an_attention_dp_pool_is_not_refused():
    """DeepSeek-V3's MLA latent (576 x 61 layers x 2 B = 70,272 B/token) is one KV head: TP
    replicates it on every GPU, attention DP splits the sequences. 1024 sequences of 2304
    tokens: 1024 / 8 x 2304 x 70,272 B = 20.7 GB per GPU with attention DP (fits next to
    ~97.5 GB of FP8 weights on an H200's 135.7 GB), 165.8 GB without (does not)."""
    assert 1024 // 8 * 2304 * 70_272 == 20_724_056_064
    d = inferlab.estimate("deepseek-v3", isl=2048, osl=256, batch_size=1024, engine="trtllm",
                          disaggregation="prefill=h200-sxmx8:tp8:ep8,decode=h200-sxmx8:tp8:ep8:adp")
    assert bool(d.feasible)
    assert float(d.memory["decode"].kv_batch) == 20_724_056_064


@settings(max_examples=12, deadline=None)
@given(layout=st.sampled_from([(8, 1, False), (8, 8, False), (8, 8, True), (4, 2, True), (2, 1, False)]),
       engine=st.sampled_from(["trtllm", "sglang", "vllm"]), batch=st.sampled_from([1, 16, 64]))
def test_a_pool_holds_memory_as_the_same_aggregated_layout_does(layout, engine, batch):
    """The decode pool's GPU holds what an aggregated replica of the same layout, engine and
    batch holds: weights, KV, workspace and the sequences that fit."""
    tp, ep, adp = layout
    pool = f"h100-sxmx{tp}:tp{tp}:ep{ep}" + (":adp" if adp else "")
    d = inferlab.estimate("qwen3-30b-a3b", isl=1024, osl=128, batch_size=batch, engine=engine,
                          disaggregation=f"prefill={pool},decode={pool}").memory["decode"]
    a = inferlab.estimate("qwen3-30b-a3b", "h100-sxm", tp=tp, ep=ep, attention_dp=adp, isl=1024, osl=128,
                          batch_size=batch, engine=engine).memory
    assert (d.weights, float(d.kv_batch), float(d.workspace), float(d.max_sequences)) == \
        (a.weights, float(a.kv_batch), float(a.workspace), float(a.max_sequences))


def test_the_aggregated_replica_compared_has_the_decode_pools_layout():
    """compare_with_aggregated's default replica is like the decode pool's: tp8, ep8 and
    attention DP, so its 64 sequences of 2304 tokens hold 8 per GPU, 8 x 2304 x 98,304 B =
    1,811,939,328 B of KV (a plain TP8 replica would hold twice that, see above)."""
    from inferlab.phases.compare import compare_with_aggregated

    c = compare_with_aggregated("qwen3-30b-a3b", "prefill=h100-sxmx8:tp8:ep8,decode=h100-sxmx8:tp8:ep8:adp",
                                isl=2048, osl=256, decode_batch=64, engine="trtllm")
    par = c.aggregated.deployment.parallel
    assert (par.tp, par.ep, par.attention_dp) == (8, 8, True)
    assert float(c.aggregated.memory.kv_batch) == 1_811_939_328


def _prefill_s(pool: str, budget: int, engine: str) -> tuple[float, float]:
    d = inferlab.estimate("qwen3-30b-a3b", isl=2048, osl=2, batch_size=8, prefill_batch=8, engine=engine,
                          disaggregation=f"prefill={pool},decode=h100-sxmx8:tp8:ep8", max_num_tokens=budget)
    return float(d.prefill_s), d.prefill_deployment.profile.step_overhead_s


@pytest.mark.parametrize("engine", ["trtllm", "vllm"])  # engines whose token budget is each rank's
def test_an_attention_dp_prefill_pool_chunks_each_ranks_prompts_under_its_own_budget(engine):
    """8 prompts of 2048 tokens with a 2048-token budget. Attention DP over 8 ranks: each rank
    takes one prompt within its own budget, one iteration, as with a budget of 16,384. Plain
    TP8: the replica's one budget takes the 16,384 tokens in 8 iterations, each a step of its
    own: more than 7 step overheads above one step of 16,384, as each reads the experts' weights
    again (2,048 tokens x top-8 touch all 128 experts: 61 GB / 8 GPUs, 2.3 ms a read at
    3.35 TB/s). The pool with attention DP had been chunked as plain TP (8 iterations)."""
    adp, adp_wide = (_prefill_s("h100-sxmx8:tp8:ep8:adp", b, engine)[0] for b in (2048, 16384))
    assert adp == adp_wide
    (tp, overhead), (tp_wide, _) = (_prefill_s("h100-sxmx8:tp8:ep8", b, engine) for b in (2048, 16384))
    assert tp - tp_wide > 7 * (overhead + 61e9 / 8 / 3.35e12)


def test_an_attention_dp_prefill_pool_prefills_as_the_same_aggregated_layout_does():
    """The prefill pool's batch of 8 is the aggregated replica's first-token time (same layout,
    engine and budget: 1 iteration each)."""
    d = inferlab.estimate("qwen3-30b-a3b", isl=2048, osl=2, batch_size=8, prefill_batch=8, engine="trtllm",
                          disaggregation="prefill=h100-sxmx8:tp8:ep8:adp,decode=h100-sxmx8:tp8:ep8",
                          max_num_tokens=2048)
    a = inferlab.estimate("qwen3-30b-a3b", "h100-sxm", tp=8, ep=8, attention_dp=True, isl=2048, osl=2, batch_size=8,
                          engine="trtllm", max_num_tokens=2048)
    assert float(d.prefill_s) == pytest.approx(float(a.ttft_s), rel=1e-12)


def test_pools_with_two_kv_formats_are_refused():
    # the decode pool reads the prefill pool's KV blocks as written: an FP8 prefill pool beside a BF16 decode
    # pool had been priced with FP8 blocks on the link and BF16 ones in decode, labelled fp8
    from inferlab.cli.main import main

    for cmd in (["estimate", "llama-3.1-8b"], ["serve", "llama-3.1-8b", "--rate", "1", "--num-requests", "4"]):
        assert main([*cmd, "--disagg", "prefill=h100-sxm:fp8,decode=h100-sxm:bf16"]) == 2
    from inferlab.errors import SpecError
    from inferlab.phases.disaggregated import pool_deployments
    from inferlab.techniques.disaggregation import Disaggregation, Pool

    with pytest.raises(SpecError, match="the prefill pool keeps its KV cache in fp8 and the decode pool in bf16"):
        pool_deployments("llama-3.1-8b", "prefill=h100-sxm:fp8,decode=h100-sxm:bf16", engine="generic",
                         profile="default", precision=None)
    # FP8 weights and a BF16 KV cache in the prefill pool: one KV format, so it runs
    d, pre, dec = pool_deployments("llama-3.1-8b", Disaggregation(Pool("h100-sxm", precision="fp8 kv:bf16"),
                                                                  Pool("h100-sxm", precision="bf16")),
                                   engine="generic", profile="default", precision=None)
    assert pre.precision.kv_cache == dec.precision.kv_cache == "bf16"
