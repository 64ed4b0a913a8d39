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


@pytest.mark.parametrize("config, timeout, unknown", [
    # NVIDIA's DeepSeek recipes: what inferlab's trtllm-pytorch runs by default
    ("attention_dp_config:\n  enable_balance: true\n  batching_wait_iters: 0\n  timeout_iters: 60\n", 60, None),
    ("attention_dp_config:\n  enable_balance: false\n", 0, None),
    # TensorRT-LLM's AttentionDpConfig defaults: timeout_iters 50, batching_wait_iters 10 (not modelled: said)
    ("attention_dp_config:\n  enable_balance: true\n", 50, "batching_wait_iters: 10"),
    ("", 0, None),  # no attention_dp_config: TensorRT-LLM balances nothing
])
def test_attention_dp_config_in_the_extra_options(tmp_path, config, timeout, unknown):
    path = tmp_path / "extra.yaml"
    path.write_text("enable_attention_dp: true\n" + config)
    launch = parse_engine_args("trtllm-serve deepseek-ai/DeepSeek-R1 --tp_size 8 --ep_size 8 "
                               f"--extra_llm_api_options {path}")
    assert launch.attention_dp and launch.balance_timeout_iters == timeout
    assert (unknown is None and not launch.unknown) or any(unknown in u for u in launch.unknown)
    if not config:
        assert any("without attention_dp_config" in n for n in launch.notes)
    assert launch.to_kwargs("serve")["balance_timeout_iters"] == timeout


def test_a_pasted_command_without_balancing_is_served_without_the_hold(tmp_path, capsys):
    """Two clients on DeepSeek-V3 with attention DP over eight H200s: the TensorRT-LLM command
    without attention_dp_config (balancing off, its default) serves with the TTFT of
    balance_timeout_iters 0, a fraction of NVIDIA's recipe's (timeout_iters 60), and the
    command inferlab writes back keeps what it read."""
    from inferlab.cli.main import main
    from inferlab.engines.render import launch_command

    path = tmp_path / "extra.yaml"
    path.write_text("enable_attention_dp: true\n")
    cmd = f"trtllm-serve deepseek-ai/DeepSeek-V3 --tp_size 8 --ep_size 8 --extra_llm_api_options {path}"
    args = ["h200-sxm", "--concurrency", "2", "--num-requests", "40", "--isl", "1000", "--osl", "200", "--json"]
    assert main(["serve", "--engine-args", cmd, *args]) == 0
    import json

    off = json.loads(capsys.readouterr().out)["latency_s"]["ttft"]["mean"]
    recipe = serve("deepseek-v3", "h200-sxm", **ADP, concurrency=2, num_requests=40, isl=1000, osl=200)
    assert off < 0.5 * float(np.mean(recipe.ttft_s))
    assert serve("deepseek-v3", "h200-sxm", **ADP, concurrency=2, num_requests=40, isl=1000, osl=200,
                 balance_timeout_iters=0).ttft_s == pytest.approx(
        serve("deepseek-v3", "h200-sxm", **ADP, concurrency=2, num_requests=40, isl=1000, osl=200,
              scheduler=replace(ENGINE_SCHEDULERS["trtllm-pytorch"], balance_timeout_iters=0)).ttft_s)
    assert "\nattention_dp_config:" not in launch_command(parse_engine_args(cmd)).script
    assert "timeout_iters: 60" in launch_command(replace(parse_engine_args(cmd), balance_timeout_iters=None)).script


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


@pytest.mark.parametrize("engine", ["vllm", "sglang", "generic"])
def test_balancing_is_refused_where_the_engine_has_none(engine):
    with pytest.raises(inferlab.SpecError, match="attention-DP balancing is TensorRT-LLM's"):
        serve("llama-3.1-8b", "h100-sxm", engine=engine, balance_timeout_iters=60, concurrency=1, num_requests=3)
    # off is what these engines do anyway
    serve("llama-3.1-8b", "h100-sxm", engine=engine, balance_timeout_iters=0, concurrency=1, num_requests=3)
