"""Attention data parallelism in the serving simulation.

Each attention-DP rank prefills the prompts it holds, and the ranks meet at every MoE layer,
so an iteration lasts as long as its busiest rank. TensorRT-LLM (as NVIDIA's DeepSeek-R1
recipes run it) holds new prompts until every rank has one, or 60 iterations.
"""

from dataclasses import replace

import numpy as np
import pytest

import inferlab
from inferlab import serve
from inferlab.engines.render import parse_engine_args
from inferlab.engines.scheduler import ENGINE_SCHEDULERS
from inferlab.serving.stepmodel import StepModel

ADP = dict(tp=8, ep=8, attention_dp=True, precision="fp8", engine="trtllm-pytorch")


@pytest.fixture(scope="module")
def model():
    return StepModel(inferlab.estimate("deepseek-v3", "h200-sxm", **ADP).deployment, 16384)


def _prefill(model, chunks):
    chunks = np.asarray(chunks, float)
    return model.time(decode_context=np.zeros(0), prefill_context=np.zeros(len(chunks)), prefill_tokens=chunks,
                      logits=float(len(chunks)))


def test_a_prompt_is_prefilled_on_one_rank(model):
    # One 1024-token prompt runs its attention and projections on one of the 8 ranks; eight
    # such prompts, one per rank, run the same rank-local work on every rank at once and add
    # only routed-expert rows (which see every rank's tokens). So eight prompts together cost
    # less than twice one prompt, where spreading the one prompt over the ranks (1/8 of it
    # each) would make it about 1/8 of the eight.
    one, eight = _prefill(model, [1024]), _prefill(model, [1024] * 8)
    assert one < eight < 2 * one
    # nine prompts: the ninth goes to a rank that already holds one; that rank does twice the
    # rank-local work, most of one prompt's time
    nine = _prefill(model, [1024] * 9)
    assert nine > eight + 0.5 * one


def test_a_prompt_alone_waits_longer_with_attention_dp_than_with_tp_attention():
    # at idle a prompt's first token is its prefill: spread over 8 GPUs by heads with TP
    # attention, on one GPU's attention with attention DP (the known cost of DP attention at
    # low load)
    kw = dict(isl=2048, osl=16, rate=0.05, num_requests=5, seed=1)
    tp = serve("deepseek-v3", "h200-sxm", tp=8, precision="fp8", engine="trtllm-pytorch", **kw)
    dp = serve("deepseek-v3", "h200-sxm", **ADP, **kw)
    assert np.mean(dp.ttft_s) > np.mean(tp.ttft_s)


def test_balancing_trades_ttft_for_tpot_under_load():
    # closed loop, 64 clients over 8 ranks: holding prompts until every rank has one batches
    # eight prefills into one iteration (fewer iterations stall the decodes: lower TPOT) and
    # makes prompts wait for each other (higher TTFT). Mixed lengths: clients that all finish
    # together would send their prompts together, balanced or not.
    rng = np.random.default_rng(0)
    kw = dict(isl=rng.integers(1024, 3072, 400).tolist(), osl=rng.integers(64, 256, 400).tolist(), concurrency=64,
              num_requests=400, seed=2)
    balanced = serve("deepseek-v3", "h200-sxm", **ADP, **kw)
    off = serve("deepseek-v3", "h200-sxm", **ADP, **kw,
                scheduler=replace(ENGINE_SCHEDULERS["trtllm-pytorch"], balance_timeout_iters=0))
    assert np.mean(balanced.tpot_s) < np.mean(off.tpot_s)
    assert np.mean(balanced.ttft_s) > np.mean(off.ttft_s)


def test_an_idle_engine_does_not_hold_a_prompt():
    # nothing running: the engine's loop spins through its timeout at once
    kw = dict(isl=1024, osl=8, rate=0.01, num_requests=3, seed=3)
    balanced = serve("deepseek-v3", "h200-sxm", **ADP, **kw)
    off = serve("deepseek-v3", "h200-sxm", **ADP, **kw,
                scheduler=replace(ENGINE_SCHEDULERS["trtllm-pytorch"], balance_timeout_iters=0))
    assert balanced.ttft_s == pytest.approx(off.ttft_s, rel=1e-12)


def test_explain_says_a_balancing_hold_is_not_a_saturated_engine():
    """Two clients on DeepSeek-V3 with attention DP over eight H200s: a new prompt waits for a
    second one (every rank one) or 60 iterations, so most of the TTFT is that hold while two
    requests run against hundreds of slots; explain names the balancing, not a saturated engine.
    With balancing off the hold and the line are gone."""
    kw = dict(isl=1000, osl=200, concurrency=2, num_requests=40, seed=5)
    held = serve("deepseek-v3", "h200-sxm", **ADP, **kw)
    text = held.explain()
    assert "attention-DP balancing" in text and "timeout_iters 60" in text
    assert "the engine is saturated" not in text
    off = serve("deepseek-v3", "h200-sxm", **ADP, **kw,
                scheduler=replace(ENGINE_SCHEDULERS["trtllm-pytorch"], balance_timeout_iters=0))
    assert "attention-DP balancing" not in off.explain()
    assert np.mean(held.ttft_s) > 2 * np.mean(off.ttft_s)


def test_balancing_acts_only_with_attention_dp():
    kw = dict(isl=1024, osl=64, concurrency=16, num_requests=64, seed=4)
    on = serve("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", **kw)
    off = serve("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", **kw,
                scheduler=replace(ENGINE_SCHEDULERS["trtllm-pytorch"], balance_timeout_iters=0))
    assert on.ttft_s == pytest.approx(off.ttft_s, rel=1e-12)


def test_attention_dp_config_in_the_extra_options(tmp_path):
    modelled = tmp_path / "a.yaml"
    modelled.write_text("enable_attention_dp: true\nattention_dp_config:\n  enable_balance: true\n"
                        "  batching_wait_iters: 0\n  timeout_iters: 60\n")
    other = tmp_path / "b.yaml"
    other.write_text("enable_attention_dp: true\nattention_dp_config:\n  enable_balance: false\n")
    cmd = "trtllm-serve deepseek-ai/DeepSeek-R1 --tp_size 8 --ep_size 8 --extra_llm_api_options "
    a = parse_engine_args(cmd + str(modelled))
    assert a.attention_dp and not a.unknown and any("balancing inferlab simulates" in n for n in a.notes)
    b = parse_engine_args(cmd + str(other))
    assert any("enable_balance" in u and "timeout_iters: 60" in u for u in b.unknown)


@pytest.mark.parametrize("kw, line", [
    ({"model": "llama-3.1-8b", "hardware": "h100-sxm", "dp": 8},
     "idle capacity: a batch of 3 over 8 data-parallel replicas leaves 5 of them without a sequence; the cost "
     "counts all 8 GPUs (fewer replicas serve it for less)"),
    ({"model": "deepseek-v3", "hardware": "h200-sxm", "tp": 8, "ep": 8, "attention_dp": True, "precision": "fp8"},
     "idle capacity: a batch of 3 over 8 attention data-parallel ranks leaves 5 of them without a sequence; the "
     "cost counts all 8 GPUs (fewer ranks serve it for less)"),
])
def test_a_batch_smaller_than_the_ranks_says_the_rest_sit_idle(kw, line):
    est = inferlab.estimate(**kw, batch_size=[3, 16])
    assert line in est.notes and line in str(est)
    assert not any("idle" in n for n in inferlab.estimate(**kw, batch_size=8).notes)  # one sequence a rank
