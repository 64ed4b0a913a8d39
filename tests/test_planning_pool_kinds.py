"""Separate prefill and decode pools of different replica kinds: a narrow prefill pool beside a
wide expert-parallel (attention-DP) decode pool, as production DeepSeek deployments run them;
each pool timed, counted, priced, transferred and simulated as its own kind."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from inferlab.inputs.resolve import deployment
from inferlab.planning.operations import day_plan
from inferlab.planning.planner import plan
from inferlab.planning.scenario import load_scenario
from inferlab.planning.pools_seed import exposed_transfer_s
from inferlab.planning.search import candidates, evaluate, with_replicas

DEEPSEEK = {"name": "deepseek pools", "models": ["deepseek-v3"], "hardware": ["h200-sxm"], "engine": "sglang",
            "traffic": {"rate": 20, "isl": 4000, "osl": 500}, "slo": {"ttft_ms": 2000, "tpot_ms": 50, "percentile": 90},
            "search": {"precisions": ["fp8"], "tp": [8], "disaggregation": True, "max_gpus": 256}, "verify": 0}
LLAMA = {"name": "llama pools", "models": ["llama-3.1-70b"], "hardware": ["h100-sxm"], "engine": "vllm",
         "traffic": {"rate": 4, "isl": 2000, "osl": 300}, "slo": {"ttft_ms": 2000, "tpot_ms": 60, "percentile": 90},
         "search": {"precisions": ["fp8"], "tp": [2, 4], "disaggregation": True}, "verify": 0}


def _mixed(sc, prefill_kind, decode_kind):
    return next(c for c in candidates(sc) if c["disaggregated"] and c["prefill_kind"] == prefill_kind
                and (c["tp"], c["ep"], c["attention_dp"]) == decode_kind)


def _alike(sc, kind):
    return next(c for c in candidates(sc) if c["disaggregated"] and c["prefill_kind"] is None
                and (c["tp"], c["ep"], c["attention_dp"]) == kind)


def test_each_pool_is_timed_as_its_own_kind():
    """An EP8 prefill pool beside an attention-DP decode pool prefills at the EP8 pools' rate and
    decodes at the attention-DP pools' rate (each the curve of its own kind)."""
    sc = load_scenario(DEEPSEEK)
    mixed = evaluate(sc, _mixed(sc, (8, 8, False), (8, 8, True)))
    ep8 = evaluate(sc, _alike(sc, (8, 8, False)))
    adp = evaluate(sc, _alike(sc, (8, 8, True)))
    assert mixed.feasible
    assert mixed.curve["mu_p"] == ep8.curve["mu_p"]
    assert mixed.curve["rate_d_j"] == adp.curve["rate_d_j"]
    assert mixed.label == f"deepseek-v3 h200-sxm fp8 disagg P{mixed.pools[0]} tp8 ep8 : D{mixed.pools[1]} tp8 ep8 adp"


def test_an_attention_dp_prefill_replica_is_a_server_a_rank():
    """Each rank prefills its own prompts, sharing iterations with the others: the replica's
    prefill rate with every rank busy is never below one prompt at a time, and the planner sizes
    the attention-DP pair by simulation, which shows it meeting the SLOs at its seed or fewer
    replicas (one prompt a replica at a time had seeded it at five times the simulated count)."""
    sc = load_scenario({**DEEPSEEK, "verify": 2})
    adp = evaluate(sc, _alike(sc, (8, 8, True)))
    from inferlab.planning.curve import _capacity_curve

    curve, alone = adp.curve, _capacity_curve(sc, _alike(sc, (8, 8, True)), 4000, 500).prefill_1_s
    assert curve["servers"] == 8
    assert curve["servers"] * curve["mu_p"] >= 1.0 / alone  # sharing iterations never slower than one at a time
    result = plan(sc)
    sized = next(c for c in result.candidates if c.disaggregated and c.attention_dp and c.prefill_kind is None)
    assert sized.simulated and sized.feasible and sized.replicas <= adp.seed_replicas


def test_pools_of_two_sizes_count_and_price_their_own_gpus():
    """Llama-3.1-70B, prefill replicas of TP2 and decode replicas of TP4, P3:D2: 3 x 2 + 2 x 4 =
    14 GPUs at the H100's $/GPU-h (not 5 replicas x 4 GPUs)."""
    sc = load_scenario({**LLAMA, "prices": {"h100-sxm": 2.5}})
    sized = with_replicas(sc, evaluate(sc, _mixed(sc, (2, 1, False), (4, 1, False))), 5, pd="P3:D2")
    assert (sized.gpus, sized.usd_per_hour) == (14, pytest.approx(35.0))
    pools = sized.deployment("vllm").disaggregation
    assert (pools.prefill.num_gpus, pools.prefill.tp, pools.decode.num_gpus, pools.decode.tp) == (6, 2, 8, 4)
    assert sized.label == "llama-3.1-70b h100-sxm fp8 disagg P3 tp2 : D2 tp4"
    assert sized.to_dict()["pool_gpus_per_replica"] == [2, 4]
    assert replace(sized, pd="").label == "llama-3.1-70b h100-sxm fp8 disagg prefill tp2 : decode tp4"


def test_the_day_of_pools_of_two_sizes_is_bought_by_the_gpu():
    """P3 of TP2 and D2 of TP4 at 10% and 100% of the peak: each pool keeps its share, at least
    one replica: 1 x 2 + 1 x 4 = 6 GPUs, then 14."""
    sc = load_scenario({**LLAMA, "prices": {"h100-sxm": 2.5}, "operations": {"daily_profile": [0.1, 1.0],
                                                                             "period_h": 12}})
    cand = with_replicas(sc, evaluate(sc, _mixed(sc, (2, 1, False), (4, 1, False))), 5, pd="P3:D2")
    day = day_plan(sc, replace(cand, headroom=0.2))
    assert list(day.capacity.demand) == [6, 14] and day.unit == "GPUs" and day.to_dict()["unit"] == "GPUs"
    assert "6-14 GPUs" in "\n".join(day.lines())


def test_kv_transfer_from_a_narrower_prefill_replica_by_hand():
    """Llama-3.1-70B, a 2,000-token prompt (BF16 KV: 655.36 MB), prefilled on TP2 in 0.5 ms, sent
    to a TP8 decode replica over 50 GB/s NICs: each decode GPU receives its eighth (81.92 MB),
    all 655.36 MB leave two prefill GPUs: wire = max(655.36 / (2 x 50), 81.92 / 50) = 6.5536 ms;
    exposed = 0.02 + 6.5536 - 0.5 x 79 / 80 = 6.07985 ms."""
    est = {tp: SimpleNamespace(deployment=deployment("llama-3.1-70b", "h100-sxm", precision="fp8 kv:bf16", tp=tp),
                               prefill_1_s=0.5e-3) for tp in (2, 8)}
    config = {"hardware": "h100-sxm", "tp": 8, "ep": 1, "prefill_kind": (2, 1, False)}
    assert exposed_transfer_s(config, est[2], 2000, est[8]) == pytest.approx(6.07985e-3, rel=1e-6)


def test_the_simulation_sizes_pools_of_two_sizes():
    """The planner's verification simulates both pools as their own kinds and counts their GPUs."""
    from inferlab.planning.sizing import size_by_simulation

    import inferlab.planning.sizing_disaggregated as sizing

    ran = []

    def steady_probe(sc_, run, *args):
        def recorded(k, seed):
            result = run(k, seed)
            ran.append((result.prefill_deployment.tp, result.deployment.tp))  # deployment: a decode replica
            return result
        return real(sc_, recorded, *args)

    real, sizing.steady_probe = sizing.steady_probe, steady_probe
    sc = load_scenario(LLAMA)
    cand = evaluate(sc, _mixed(sc, (2, 1, False), (4, 1, False)))
    assert cand.feasible
    try:
        sized = size_by_simulation(sc, cand)
    finally:
        sizing.steady_probe = real
    assert ran and set(ran) == {(2, 4)}  # each pool simulated as its own kind
    assert sized.feasible and sized.sized_by == "simulation"
    n_p, n_d = sized.pools
    assert sized.gpus == 2 * n_p + 4 * n_d
    assert sized.simulated_ttft_s <= 2.0 and sized.simulated_tpot_s <= 0.060


def test_pools_of_two_sizes_are_sized_within_the_gpu_limit():
    """max_gpus 16 with TP1 prefill and TP8 decode replicas: every pair the sizing simulates fits
    16 GPUs (counted in the narrower replicas, P2:D2 = 18 GPUs was its first probe)."""
    import inferlab.planning.sizing_disaggregated as sizing
    from inferlab.planning.candidate import Probe

    sc = load_scenario({**LLAMA, "search": {**LLAMA["search"], "tp": [1, 8], "max_gpus": 16}})
    cand = evaluate(sc, _mixed(sc, (1, 1, False), (8, 1, False)))
    probed = []

    def simulate(sc_, cand_, n_p, n_d, growth):
        probed.append(n_p * 1 + n_d * 8)
        return Probe(replicas=n_p + n_d, growth=growth, ttft_s=0.1, tpot_s=0.01, meets=n_p >= 3, pd=f"P{n_p}:D{n_d}")

    real, sizing._simulate = sizing._simulate, simulate
    try:
        sized = sizing.size_disaggregated(sc, replace(cand, pd="P4:D1"))
    finally:
        sizing._simulate = real
    assert probed and max(probed) <= 16
    assert sized.pools == (3, 1) and sized.gpus == 11


def test_ranks_at_their_own_depths_wait_for_the_deepest_ones_attention():
    """Prompts dealt round robin leave an attention-DP replica's ranks at independent depths of
    their prompts; each shared iteration waits for the deepest: of eight ranks at uniform depths
    the deepest is at 8/9 of its prompt against the mean 1/2, so only the attention share grows,
    at most 16/9 times. It grows with the prompt (attention's share does), and one rank is alone."""
    from inferlab.planning.attention_dp import depth_imbalance

    dep = deployment("deepseek-v3", "h200-sxm", tp=8, ep=8, attention_dp=True, precision="fp8", engine="sglang")
    short, long = depth_imbalance(dep, 8, 4000), depth_imbalance(dep, 8, 60000)
    assert 1.0 <= short < long <= 16 / 9
    assert depth_imbalance(dep, 1, 60000) == 1.0
