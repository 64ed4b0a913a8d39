"""Disaggregated candidates of every replica kind the planner searches: pools of expert-parallel
and attention-DP replicas (DeepSeek's production shape), their KV transfer split as the serving
simulation splits it, and the simulation sizing the pools it plans."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from inferlab.inputs.resolve import deployment
from inferlab.planning.planner import plan
from inferlab.planning.scenario import load_scenario
from inferlab.planning.pools_seed import exposed_transfer_s
from inferlab.planning.search import candidates

DEEPSEEK = {"name": "deepseek disaggregated", "models": ["deepseek-v3"], "hardware": ["h200-sxm"],
            "engine": "trtllm-pytorch", "traffic": {"rate": 8, "isl": 2000, "osl": 500},
            "slo": {"ttft_ms": 3000, "tpot_ms": 60, "percentile": 90},
            "search": {"precisions": ["fp8"], "tp": [8], "disaggregation": True}, "verify": 0}


def test_disaggregated_candidates_take_expert_parallel_and_attention_dp_pools():
    layouts = {(c["ep"], c["attention_dp"], c["disaggregated"]) for c in candidates(load_scenario(DEEPSEEK))}
    assert layouts == {(ep, adp, d) for ep, adp in ((1, False), (8, False), (8, True)) for d in (False, True)}


def test_separate_pools_pair_every_prefill_kind_with_every_decode_kind():
    """Three replica kinds of DeepSeek-V3 on eight H200s (tp8, tp8 ep8, tp8 ep8 adp): 3 aggregated
    candidates and 3 x 3 pairs of pools, the 3 alike without a prefill kind of their own."""
    configs = candidates(load_scenario(DEEPSEEK))
    kinds = {(8, 1, False), (8, 8, False), (8, 8, True)}
    pairs = {(c["prefill_kind"] or (c["tp"], c["ep"], c["attention_dp"]), (c["tp"], c["ep"], c["attention_dp"]))
             for c in configs if c["disaggregated"]}
    assert len([c for c in configs if not c["disaggregated"]]) == 3
    assert pairs == {(p, d) for p in kinds for d in kinds}
    assert sum(c["disaggregated"] for c in configs) == 9


def _est(model, hardware, prefill_s, **layout):
    return SimpleNamespace(deployment=deployment(model, hardware, precision="fp8 kv:bf16", **layout),
                           prefill_1_s=prefill_s)


def test_kv_transfer_of_a_prompt_by_hand():
    """A 2,000-token prompt whose prefill takes 0.5 ms (so the transfer outlasts it: exposed =
    latency + X - P (L - 1) / L), BF16 KV cache, 50 GB/s NICs (400 Gb/s), 20 us a transfer.

    Llama-3.1-70B at TP8: 2 x 80 layers x 8 KV heads x 128 x 2 B = 327,680 B a token, 655.36 MB
    the prompt; each GPU sends its KV head's eighth, 81.92 MB: X = 1.6384 ms;
    exposed = 0.02 + 1.6384 - 0.5 x 79 / 80 = 1.16465 ms.

    DeepSeek-V3 (MLA): 61 layers x (512 + 64) x 2 B = 70,272 B a token, 140.544 MB the prompt.
    At TP8 every GPU keeps the whole latent, so each decode GPU receives all of it (X = 2.81088
    ms, not an eighth: the planner's former seed); with attention DP one rank sends it to one
    rank: the same X. exposed = 0.02 + 2.81088 - 0.5 x 60 / 61 = 2.339077 ms."""
    llama = _est("llama-3.1-70b", "h100-sxm", 0.5e-3, tp=8)
    assert exposed_transfer_s({"hardware": "h100-sxm", "tp": 8, "ep": 1}, llama, 2000) == \
        pytest.approx(1.16465e-3, rel=1e-6)
    for layout in ({"tp": 8, "ep": 8}, {"tp": 8, "ep": 8, "attention_dp": True}):
        ds = _est("deepseek-v3", "h200-sxm", 0.5e-3, **layout)
        assert exposed_transfer_s({"hardware": "h200-sxm", **layout}, ds, 2000) == pytest.approx(2.339077e-3, rel=1e-6)


def test_attention_dp_pools_are_planned_and_sized_by_simulation():
    """The DeepSeek scenario with separate pools of TP8/EP8 attention-DP replicas: feasible, and the
    simulation of both pools (the planner's verification) sizes P:D, meeting the SLOs there."""
    result = plan(load_scenario({**DEEPSEEK, "verify": 0}))
    adp = [c for c in result.candidates if c.disaggregated and c.attention_dp and c.prefill_kind is None]
    assert len(adp) == 1 and adp[0].feasible and adp[0].label.endswith("tp8 ep8 adp disagg " + adp[0].pd)
    dep = adp[0].deployment("trtllm-pytorch")
    pools = dep.disaggregation
    assert (pools.prefill.ep, pools.prefill.attention_dp, pools.decode.ep, pools.decode.attention_dp) == \
        (8, True, 8, True)
    from inferlab.planning.sizing import size_by_simulation

    sized = size_by_simulation(load_scenario(DEEPSEEK), adp[0])
    assert sized.feasible and sized.sized_by == "simulation"
    n_p, n_d = sized.pools
    assert sized.gpus == 8 * (n_p + n_d)
    assert sized.simulated_ttft_s <= 3.0 and sized.simulated_tpot_s <= 0.060


def test_pools_on_a_gpu_without_a_nic_in_its_spec_are_simulated_over_the_link_the_plan_priced():
    """MI300X's spec names no scale-out NIC: the plan prices its pools' KV transfer over PCIe
    (64 GB/s), and the deployment it hands the simulation says so (the simulation refused the
    pools before: no NIC to send over)."""
    sc = load_scenario({**DEEPSEEK, "hardware": ["mi300x"], "engine": "sglang"})
    cand = next(c for c in plan(sc).candidates if c.disaggregated and c.feasible)
    dep = cand.deployment("sglang")
    assert dep.disaggregation.link_bandwidth == 64e9
    from inferlab.planning.sizing import size_by_simulation

    assert size_by_simulation(sc, cand).sized_by == "simulation"


def test_plan_launch_with_a_disaggregated_winner_prints_the_plan(tmp_path, capsys):
    import yaml

    from inferlab.cli.main import main

    path = tmp_path / "ds.yaml"
    path.write_text(yaml.safe_dump({**DEEPSEEK, "search": {**DEEPSEEK["search"], "tp": [8]},
                                    "slo": {"ttft_ms": 400, "tpot_ms": 40, "percentile": 90}}))
    assert main(["plan", str(path), "--launch", "all", "--verify", "0"]) == 0
    out = capsys.readouterr().out
    assert "best:" in out and "disagg" in out.split("best:")[1].splitlines()[0]
    assert "no launch command: the winner" in out


def test_a_disaggregated_winners_day_needs_one_replica_of_each_pool_at_least():
    """Separate pools through a day at 10% and 100% of the peak: each pool keeps its share of
    its replicas and at least one (a prefill pool without a decode pool serves nothing), so the
    quiet period needs 2 replicas, not 10% of the plan's (16 req/s: P1:D2, say)."""
    sc = load_scenario({**DEEPSEEK, "slo": {"ttft_ms": 400, "tpot_ms": 40, "percentile": 90},
                        "traffic": {**DEEPSEEK["traffic"], "rate": 16},
                        "operations": {"daily_profile": [0.1, 1.0], "period_h": 12}})
    result = plan(sc)
    best = result.best
    assert best.disaggregated
    n_p, n_d = best.pools
    assert n_p + n_d > 2
    from inferlab.planning.operations import day_plan

    assert list(day_plan(sc, best).capacity.demand) == [2, n_p + n_d]


def test_a_disaggregated_winner_is_compared_with_the_api():
    """The API comparison was dropped for separate pools. 8 req/s of 2,000 in / 500 out tokens
    at $1 / $4 per 1M tokens: (2,000 x 1 + 500 x 4) / 1e6 = $0.004 a request, x 8 x 3,600 =
    $115.20/h."""
    sc = load_scenario({**DEEPSEEK, "slo": {"ttft_ms": 400, "tpot_ms": 40, "percentile": 90},
                        "api_price": {"input_per_million": 1.0, "output_per_million": 4.0}})
    result = plan(sc)
    assert result.best.disaggregated
    assert "$115.20/h for this traffic, against" in result.explain()


def test_disaggregated_pools_are_not_planned_past_what_a_pool_completes():
    """Llama-3.1-8B FP8 on H100s, 4,000/500 tokens at 100 req/s, separate TP1 pools. A prefill
    replica completes about 14.4 req/s with every prompt queued (60 TFLOP a prompt, near 69 ms)
    and a decode replica about 13 (some 245 sequences of 4,000-4,500 tokens in its FP8 KV cache
    at a TPOT near 37 ms: 245 / (500 x 0.037) = 13.2). Seven decode replicas, 14.3 req/s each,
    had been planned from a 2,500-request probe; the plan now has at least 100 / 13.5 -> 8 of
    them, seven read as a decode throughput miss, and over 12,000 requests the plan's pools keep
    up: the time from arrival to last token of the last fifth of the run within 30% of the
    second fifth's (at P7:D7 it grew 7.3 -> 12.8 s)."""
    import numpy as np

    from inferlab.inputs.workload import Workload
    from inferlab.planning.search import scenario_deployment
    from inferlab.planning.sizing import size_by_simulation
    from inferlab.planning.sizing_disaggregated import saturated_rates
    from inferlab.serving.serve import serve

    sc = load_scenario({"name": "cliff", "models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "engine": "vllm",
                        "traffic": {"rate": 100, "isl": 4000, "osl": 500},
                        "slo": {"ttft_ms": 2000, "tpot_ms": 50, "percentile": 99},
                        "search": {"precisions": ["fp8"], "tp": [1], "disaggregation": True}, "verify": 0})
    cand = next(c for c in plan(sc).candidates if c.disaggregated)
    mu_p, mu_d = saturated_rates(sc, cand)
    assert 12.0 < mu_p < 16.0 and 11.0 < mu_d < 14.0
    sized = size_by_simulation(sc, cand)
    n_p, n_d = sized.pools
    assert sized.feasible and n_d >= 8 and n_p >= 7
    fewer = [q for q in sized.probes if q.growth == 0 and q.pd == f"P{n_p}:D{n_d - 1}"]
    assert fewer and fewer[0].missed == "decode throughput"
    run = serve(scenario_deployment(sc, sized), Workload(rate=100, num_requests=12_000, isl=4000, osl=500, seed=0))
    e2e = np.asarray(run.trace.finish) - np.asarray(run.trace.arrival)
    fifths = [float(np.mean(part)) for part in np.array_split(e2e[np.argsort(run.trace.arrival)], 5)]
    assert fifths[4] < 1.3 * fifths[1]


def test_a_probe_over_both_pools_names_both():
    """Where neither pool keeps up, the probe says both (it had named the prefill pool alone)."""
    import math

    from inferlab.planning.candidate import Probe
    from inferlab.planning.result import _missed_by

    sc = SimpleNamespace(slo=SimpleNamespace(percentile=99.0))
    both = Probe(6, 0.0, math.nan, math.nan, False, "prefill and decode throughput", pd="P3:D3")
    assert _missed_by(sc, both) == (" (more arrives than a prefill replica or a decode replica completes with every "
                                    "request queued)")
    one = Probe(6, 0.0, math.nan, math.nan, False, "decode throughput", pd="P3:D3")
    assert _missed_by(sc, one) == " (more arrives than a decode replica completes with every request queued)"
    aggregated = Probe(2, 0.0, math.nan, math.nan, False, "throughput")
    assert _missed_by(sc, aggregated) == " (more arrives than a replica completes with every request queued)"

