"""Attention-DP ranks that each run their prompts before their decodes (SGLang's
``--enable-dp-attention``: every rank's scheduler builds its own prefill or decode batch, and the
ranks' batches run as one forward): the decodes of the ranks without prompts advance in an
iteration another rank prefills. The simulation had stalled every rank's decodes for any prompt,
so a gpt-oss-120b replica over eight B200s fell behind at 75 req/s (200/200; TPOT 105 ms and
growing) and the fluid model, which batched every prompt into one stall per token, put its
capacity at 464 req/s."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import inferlab
from inferlab.engines.scheduler import SchedulerConfig
from inferlab.planning.prefill_first import chain, free_share, prefill_first_points
from inferlab.serving.batch import RunningBatch
from inferlab.serving.iteration import plan_prefill


def test_a_prefilling_ranks_decodes_wait_and_the_others_decode():
    # eight ranks, 16,384 tokens a replica: 2,048 a rank (SGLang divides chunked_prefill_size);
    # requests are dealt round robin, request i on rank i % 8
    run = RunningBatch(24)
    for i in range(16):  # decoding: two on each rank
        run.add(i, 5.0, 100.0, 50.0, done=100.0)
    for i in (16, 17, 24):  # prompts of 1,500 tokens on ranks 0, 1 and 0
        run.add(i, 0.0, 1500.0, 50.0)
    seen = {}

    def time(**kw):
        seen.update(kw)
        return 0.1

    sched = SchedulerConfig(max_num_batched_tokens=16384, chunked_prefill=True, mixed_prefill=False)
    elapsed, chunk, decoding, n_dec, finishing, n_fin, _ = plan_prefill(run, sched, SimpleNamespace(groups=8, time=time))
    # rank 0 takes request 16 whole and 2,048 - 1,500 = 548 tokens of request 24; rank 1 request 17
    assert chunk.tolist() == [0.0] * 16 + [1500.0, 1500.0, 548.0]
    # ranks 0 and 1 prefill: their decodes (requests 0, 8 and 1, 9) wait; the other twelve decode
    assert n_dec == 12
    assert [i for i in range(16) if not decoding[i]] == [0, 1, 8, 9]
    assert len(seen["decode_context"]) == 12
    assert n_fin == 2 and seen["logits"] == 14.0  # twelve decodes and the two prompts that end
    assert elapsed == 0.1


def test_one_group_stays_prefill_first_for_every_decode():
    run = RunningBatch(4)
    for i in range(3):
        run.add(i, 5.0, 100.0, 50.0, done=100.0)
    run.add(3, 0.0, 200.0, 50.0)
    sched = SchedulerConfig(max_num_batched_tokens=16384, chunked_prefill=True, mixed_prefill=False)
    out = plan_prefill(run, sched, SimpleNamespace(groups=1, time=lambda **kw: 0.0))
    assert out[3] == 0 and out[1].tolist() == [0.0, 0.0, 0.0, 200.0]


def _poisson_free_share(mu: float, g: int) -> float:
    return sum((g - n) * math.exp(-mu) * mu**n / math.factorial(n) for n in range(g)) / g


def test_free_share_of_round_robin_ranks():
    # eight ranks, five prompts an iteration on average: sum over n < 8 of (8 - n) P(N = n) / 8
    assert abs(float(free_share(np.array(5.0), 8)) - _poisson_free_share(5.0, 8)) < 1e-12
    assert abs(_poisson_free_share(5.0, 8) - 0.39026) < 1e-5
    # one rank: only an iteration without prompts decodes, e^-mu
    assert abs(float(free_share(np.array(0.7), 1)) - math.exp(-0.7)) < 1e-12
    assert float(free_share(np.array(0.0), 8)) == 1.0


def test_chain_of_one_rank_by_hand():
    # 10 req/s, decode iterations of 10 ms, prefill ones of 50 ms: a prefill follows a decode with
    # probability a = 1 - e^-0.1 = 0.095163 and a prefill with c = 1 - e^-0.5 = 0.393469; the share
    # of prefill iterations f = a / (a + 1 - c) = 0.095163 / 0.701694 = 0.135619; the mean
    # iteration 0.135619 x 50 + 0.864381 x 10 = 15.4248 ms; a request decodes in the 86.4381% that
    # are not prefills: TPOT 15.4248 / 0.864381 = 17.845 ms
    f, mean, tokens, _ = chain(np.array(10.0), np.array(0.010), np.array(0.050), 1)
    assert abs(float(f) - 0.135619) < 1e-6
    assert abs(float(mean) - 0.0154248) < 1e-7
    assert abs(float(mean / tokens) - 0.017845) < 1e-6


@settings(max_examples=200, deadline=None)
@given(rate=st.floats(0.01, 2000.0), d=st.floats(1e-3, 0.1), extra=st.floats(0.0, 0.5),
       ranks=st.sampled_from([1, 2, 4, 8, 16, 32]))
def test_chain_properties(rate, d, extra, ranks):
    p = d + extra  # a prefill iteration is never shorter than a decode one
    f, mean, tokens, var = chain(np.array(rate), np.array(d), np.array(p), ranks)
    assert 0.0 <= float(f) <= 1.0 and d - 1e-15 <= float(mean) <= p + 1e-15
    assert 0.0 <= float(tokens) <= 1.0
    # more ranks for the same prompts: no fewer decodes advance (the prompts stall fewer of them)
    more = chain(np.array(rate), np.array(d), np.array(p), 2 * ranks)[2]
    assert float(more) >= float(tokens) - 1e-12
    if float(tokens) > 1e-12:
        assert float(mean / tokens) >= d - 1e-15 and float(var) >= 0.0


def test_rate_grows_with_the_requests_in_flight():
    b = np.array([1.0, 8.0, 64.0, 512.0, 4096.0])
    pts = prefill_first_points(b, np.array([0.004, 0.0045, 0.006, 0.007, 0.01]), 0.0335, 0.0, 8, 8, 200.0)
    assert np.all(np.diff(pts.rate) > 0) and np.all(np.diff(pts.tpot_s) >= 0)
    # Little's law holds at each point: b = lambda (p + 199 TPOT)
    assert np.allclose(pts.rate * (pts.ttft_s + 199.0 * pts.tpot_s), b, rtol=1e-6)


def _sim(rate: float):
    r = inferlab.serve("gpt-oss-120b", "b200", tp=8, ep=8, attention_dp=True, precision="fp8", engine="sglang",
                       rate=rate, num_requests=int(rate * 60), isl=200, osl=200)
    a = np.asarray(r.trace.arrival)
    windows = [(a > np.percentile(a, lo)) & (a < np.percentile(a, lo + 20)) for lo in (20, 60)]
    return [float(np.mean(r.e2e_s[k])) for k in windows], float(np.nanmean(r.tpot_s[windows[1]]))


def test_sglang_attention_dp_keeps_up_and_the_fluid_model_agrees():
    """gpt-oss-120b FP8 over eight B200s, TP8 EP8 with attention DP on SGLang, 200/200. With every
    prompt stalling every rank the replica fell behind at 75 req/s; with each rank prefilling its
    own it keeps up at 150 (the time from arrival to last token the same early and late in the
    run), and the fluid model's TPOT is the simulation's within 15% (it had been half of it at 150;
    measured +10% at 75 req/s, -3% at 150)."""
    from inferlab.planning.scenario import load_scenario
    from inferlab.planning.search import candidates, evaluate

    sc = load_scenario({"name": "adp", "models": ["gpt-oss-120b"], "hardware": ["b200"], "engine": "sglang",
                        "traffic": {"rate": 150, "isl": 200, "osl": 200},
                        "slo": {"ttft_ms": 1000, "tpot_ms": 200, "percentile": 99},
                        "search": {"precisions": ["fp8"], "tp": [8]}, "verify": 0})
    config = next(c for c in candidates(sc) if c["attention_dp"] and not c["disaggregated"])
    curve = evaluate(sc, config).curve
    for rate in (75.0, 150.0):
        (early, late), tpot = _sim(rate)
        assert abs(late / early - 1.0) < 0.1  # keeps up
        fluid = 1.0 / float(np.interp(rate, curve["rate"], curve["output_tokens_per_s_per_user"]))
        assert abs(fluid / tpot - 1.0) < 0.15, (rate, fluid, tpot)


def test_one_rank_prefill_first_chain_against_the_simulation(fluid_over_served):
    """Without attention DP SGLang is one prefill-first rank: a prompt that arrives during any
    iteration makes the next a prefill, during which the decodes wait, and the prompts arriving
    meanwhile make the one after it a prefill too. Where a prefill iteration is long against a
    decode step (a 200-token prompt's eager iteration of a mixture of experts: 33.5 ms on
    gpt-oss-120b over eight B200s, against decode steps of about 9 ms), that chain, not one prefill
    a token, sets TPOT: at 50 req/s the simulation reads 100 ms, the fluid model had read 37;
    now within 15% of it. Llama-3.1-8B FP8 on an H100 at 40 req/s stays within 10% (17.0 ms
    simulated)."""
    assert abs(fluid_over_served("gpt-oss-120b", "b200", "sglang", 8, 50.0, 200, 200, seconds=90)) < 0.15
    assert abs(fluid_over_served("llama-3.1-8b", "h100-sxm", "sglang", 1, 40.0, 200, 200, seconds=90)) < 0.1


def test_a_second_prompt_is_free_while_the_kernels_take_longer_to_issue_than_to_run():
    """SGLang runs prefill eagerly: a 200-token iteration of Llama-3.1-8B FP8 on an H100 lasts as
    long as its kernels take to issue, one prompt or two; vLLM's piecewise graphs leave the GPU's
    work, which a second prompt adds to."""
    from inferlab.inputs.resolve import deployment
    from inferlab.planning.curve import next_prompt_s

    sglang = deployment("llama-3.1-8b", "h100-sxm", precision="fp8", engine="sglang")
    vllm = deployment("llama-3.1-8b", "h100-sxm", precision="fp8", engine="vllm")
    assert next_prompt_s(sglang, 0.0, 200.0) == 0.0
    assert next_prompt_s(vllm, 0.0, 200.0) > 0.0
