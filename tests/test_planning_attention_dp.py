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
    """TensorRT-LLM's balancing holds a prompt until the other 7 ranks have one, at most 60
    iterations: at 4 prompts/s the 7 others arrive in 1.75 s, under 60 x 30 ms = 1.8 s, so the
    hold is uniform up to 1.75 s (its median 0.875 s); at 1 prompt/s they would take 7 s (uniform
    up to 7 s, its median 3.5 s) and the timeout, 1.8 s, ends every hold past it: the median is 1.8 s."""
    sc = _scenario()
    dep = deployment("deepseek-v3", "h200-sxm", tp=8, ep=8, attention_dp=True, precision="fp8")
    assert prompts_together(sc, dep) == 8
    assert prompts_together(_scenario(engine="vllm"), dep) == 1  # no balancing: each prompt stalls the ranks
    hold = balancing_hold_s(sc, 8, np.array([4.0, 1.0]), np.array([0.03, 0.03]))
    from inferlab.planning.ttft_mix import TAIL_EDGES

    median = int(np.flatnonzero(TAIL_EDGES == 0.5)[0])
    assert hold[0, median] == pytest.approx(0.875)
    assert hold[1, median] == pytest.approx(1.8)
    assert hold[:, -1] == pytest.approx([1.75 * TAIL_EDGES[-1], 1.8])
    assert hold[1, 0] == pytest.approx(min(7.0 * TAIL_EDGES[0], 1.8))


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
