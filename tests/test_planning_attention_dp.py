"""The planner searches attention data parallelism for mixture-of-experts models: each GPU its own
sequences (MLA's latent held once, not on every GPU), the experts over expert parallelism."""

from __future__ import annotations

import numpy as np
import pytest

import inferlab
from inferlab.inputs.resolve import deployment
from inferlab.planning.planner import plan
from inferlab.planning.scenario import load_scenario
from inferlab.planning.attention_dp import balancing_hold_s, prompts_together
from inferlab.planning.search import candidates

DEEPSEEK = {"name": "deepseek chat", "models": ["deepseek-v3"], "hardware": ["h200-sxm"], "engine": "trtllm-pytorch",
            "traffic": {"rate": 8, "isl": 2000, "osl": 500},
            "slo": {"ttft_ms": 3000, "tpot_ms": 60, "percentile": 90},
            "search": {"precisions": ["fp8"], "tp": [8]}, "verify": 2}


def _scenario(**overrides):
    return load_scenario({**DEEPSEEK, **overrides})


def test_attention_dp_candidates_for_experts_only():
    layouts = {(c["tp"], c["ep"], c["attention_dp"]) for c in candidates(_scenario())}
    assert layouts == {(8, 1, False), (8, 8, False), (8, 8, True)}
    off = _scenario(search={**DEEPSEEK["search"], "attention_dp": False})
    assert not any(c["attention_dp"] for c in candidates(off))
    dense = _scenario(models=["llama-3.1-70b"])
    assert not any(c["attention_dp"] for c in candidates(dense))


def test_balanced_ranks_share_a_prefill_iteration_after_a_hold():
    """TensorRT-LLM's balancing holds a prompt until every one of the 8 ranks has one, at most 60
    iterations (60 x 30 ms = 1.8 s). Of the 8 prompts a release takes, the j-th waits for 7 - j more
    Poisson arrivals: P(hold > t) = (1/8) sum_{n=1..7} P(Poisson(lambda t) < n). At 4 prompts/s its
    median is where that is 1/2 (checked with the Poisson sums written out here: 0.754 s, where a
    uniform hold up to 7 / 4 s had put it at 0.875); the last prompt of each eight waits for nobody,
    so the lowest level (10%) holds 0; at 1 prompt/s the timeout ends every hold past 1.8 s, the
    median among them."""
    import math

    sc = _scenario()
    dep = deployment("deepseek-v3", "h200-sxm", tp=8, ep=8, attention_dp=True, precision="fp8")
    assert prompts_together(sc, dep) == 8
    assert prompts_together(_scenario(engine="vllm"), dep) == 1  # no balancing: each prompt stalls the ranks
    hold = balancing_hold_s(sc, 8, np.array([4.0, 1.0]), np.array([0.03, 0.03]))
    from inferlab.planning.ttft_mix import TAIL_EDGES

    def beyond(t, lam):
        x = lam * t
        return sum(sum(math.exp(-x) * x**k / math.factorial(k) for k in range(n)) for n in range(1, 8)) / 8.0

    median = int(np.flatnonzero(TAIL_EDGES == 0.5)[0])
    assert beyond(float(hold[0, median]), 4.0) == pytest.approx(0.5, abs=1e-6)
    assert float(hold[0, median]) == pytest.approx(0.754, abs=1e-3)
    assert hold[1, median] == pytest.approx(1.8)
    assert hold[:, 0] == pytest.approx([0.0, 0.0], abs=1e-9)
    assert hold[:, -1] == pytest.approx([1.8, 1.8])


def test_the_planner_picks_attention_dp_where_it_serves_with_fewer_gpus():
    """DeepSeek-V3 at 8 requests/s on H200s: with tensor-parallel attention every GPU holds every
    sequence's MLA latent and each replica of eight carries about 4 requests/s within a 60 ms
    P90 TPOT; with attention DP one replica of eight carries all 8. The plan's count is the
    simulation's, and the fluid model agrees with it on the latencies."""
    result = plan(_scenario())
    best = result.best
    assert best.attention_dp and best.label.endswith("tp8 ep8 adp")
    assert best.simulated and best.replicas == 1 and best.gpus == 8
    assert best.fluid_tpot_s == pytest.approx(best.simulated_tpot_s, rel=0.2)
    assert best.fluid_ttft_s == pytest.approx(best.simulated_ttft_s, rel=0.3)
    # what the plan says, checked by serving it: one replica meets both objectives at 8 req/s
    served = inferlab.serve("deepseek-v3", "h200-sxm", tp=8, ep=8, attention_dp=True, precision="fp8",
                            engine="trtllm-pytorch", rate=8, isl=2000, osl=500, num_requests=800)
    assert np.percentile(served.ttft_s, 90) < 3.0 and np.percentile(served.tpot_s, 90) < 0.060
    # with tensor-parallel attention one replica does not
    tp_only = inferlab.serve("deepseek-v3", "h200-sxm", tp=8, ep=8, precision="fp8", engine="trtllm-pytorch",
                             rate=8, isl=2000, osl=500, num_requests=800)
    assert np.percentile(tp_only.tpot_s, 90) > 0.060


def test_the_engines_sequence_limit_holds_on_each_rank():
    """TensorRT-LLM's max_batch_size, vLLM's --max-num-seqs and SGLang's --max-running-requests
    limit each attention-DP rank's scheduler: eight ranks hold eight times the limit."""
    from inferlab.planning.search import sequence_limit

    tp = deployment("deepseek-v3", "h200-sxm", tp=8, ep=8, precision="fp8", engine="trtllm-pytorch")
    adp = deployment("deepseek-v3", "h200-sxm", tp=8, ep=8, attention_dp=True, precision="fp8",
                     engine="trtllm-pytorch")
    sc = _scenario()
    assert sequence_limit(sc, adp) == 8 * sequence_limit(sc, tp)
    given = _scenario(search={**DEEPSEEK["search"], "max_num_seqs": 64})
    assert (sequence_limit(given, tp), sequence_limit(given, adp)) == (64, 512)


def test_the_winners_launch_is_the_scenarios_engine_with_its_per_rank_limits():
    from inferlab.planning.launch import winner_launch

    launch = winner_launch(plan(_scenario()))
    assert (launch.engine, launch.attention_dp, launch.tp, launch.ep) == ("trtllm-pytorch", True, 8, 8)
    assert launch.max_num_seqs == 2048  # max_batch_size, each rank's (the simulation's 8 x 2,048 in all)


def test_a_chunk_on_one_attention_dp_rank_stalls_the_decodes_as_the_simulation_runs_it(fluid_over_served):
    """Under attention DP a prompt's chunk runs on one rank beside that rank's decodes while the
    routed experts see every rank's tokens: what it adds to the decodes' iteration is its own
    rank's dense and attention work (little beside hundreds of decodes), not a whole prefill less
    a decode step of one sequence, as the fluid model had charged it. gpt-oss-120b FP8 over two
    B200s, TP2 EP2 with attention DP on vLLM (mixed iterations), 200/200: the fluid TPOT is the
    simulation's within 10% at 67 and 150 req/s (it had been +51% and +64%)."""
    for rate in (67.0, 150.0):
        assert abs(fluid_over_served("gpt-oss-120b", "b200", "vllm", 2, rate, 200, 200, attention_dp=True)) < 0.1, rate


def test_balanced_prompts_share_their_iteration_with_those_that_arrive_beside_them(fluid_over_served):
    """TensorRT-LLM's attention-DP balancing holds prompts until every rank has one; under load more
    than that arrive during an iteration and run in the next together, sharing its fixed part
    (the eager launch of its kernels: a 200-token prompt's iteration 33.6 ms, the experts' and
    dense layers' work of one a rank little beside it). The fluid model had charged each prompt
    a rank's share of one, as if exactly one a rank ever ran together: gpt-oss-120b FP8 over two
    B200s, 200/200 at 100 req/s, TPOT 239 ms where the simulation reads 30; now within 25% of it."""
    assert abs(fluid_over_served("gpt-oss-120b", "b200", "trtllm-pytorch", 2, 100.0, 200, 200, attention_dp=True)) < 0.25
