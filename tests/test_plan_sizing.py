"""The planner's replica counts are the simulation's: admission wait by hand, the
bracket-and-bisect search, and the plan against a brute-force simulation over replica counts."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.planning.candidate import Probe
from inferlab.planning.fluid import OperatingPoints, admission_wait_s, slot_wait_s
from inferlab.planning.planner import plan
from inferlab.planning.scenario import load_scenario
from inferlab.planning.probes import probe_requests, smallest_meeting, techniques
from inferlab.serving.serve import serve

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "scenarios"


def _points(batch, rate, tpot, share):
    a = np.array([batch], float)
    return OperatingPoints(a, np.array([rate], float), np.array([tpot], float), np.zeros(1), np.array([share], float))


def test_admission_wait_by_hand():
    """P99 (q = 0.01). Iteration: the engine busy with probability B = 1 - e^-b (b = 1.5: 0.77687;
    b = 10: 1 - 4.54e-5), then a uniform residual: (1 - q / B) x 20 ms = 19.743 ms at b = 1.5,
    19.8 ms less 9.1 ns at b = 10 (0.99 x 20 ms in a busy engine).
    Slots: c = 2, A = b = 1.5, holding S = b / rate = 1 s. Erlang B = (1.5^2 / 2) / (1 + 1.5 + 1.125)
    = 0.31034; C = 2 B / (2 - 1.5 (1 - B)) = 0.62069 / 0.96552 = 0.64286; wait = S ln(C / q) / (c - A)
    = ln(64.286) / 0.5 = 8.3267 s. Prompts: share 0.005 < q, no wait."""
    w = admission_wait_s(_points(1.5, 1.5, 0.02, 0.005), prefill_s=0.1, slots=2, percentile=99)
    assert float(w[0]) == pytest.approx(0.019743 + math.log(64.286) / 0.5, rel=1e-4)
    # prompts ahead: share 0.2 of prefill work, 100 ms each: 0.1 ln(0.2 / 0.01) / 0.8 = 374.5 ms;
    # 10 requests in 256 slots never wait for one
    w = admission_wait_s(_points(10, 5.0, 0.02, 0.2), prefill_s=0.1, slots=256, percentile=99)
    assert float(w[0]) == pytest.approx(0.0198 - 9.1e-9 + 0.1 * math.log(20) / 0.8, rel=1e-9)
    # prompts of one length (E[P^2] / E[P]^2 = 1): the M/D/1-like wait, half of M/M/1's
    w = admission_wait_s(_points(10, 5.0, 0.02, 0.2), prefill_s=0.1, slots=256, percentile=99, prefill_spread=1.0)
    assert float(w[0]) == pytest.approx(0.0198 - 9.1e-9 + 0.1 * 0.5 * math.log(20) / 0.8, rel=1e-9)
    # all slots taken: no steady state
    assert math.isinf(float(admission_wait_s(_points(256, 5.0, 0.02, 0.2), 0.1, 256, 99)[0]))


@settings(max_examples=60, deadline=None)
@given(load=st.floats(0.1, 200.0), slots=st.integers(1, 300), extra=st.floats(0.0, 50.0))
def test_slot_wait_more_slots_or_less_load_never_waits_longer(load, slots, extra):
    hold = np.array(2.0)
    w = float(slot_wait_s(np.array(load), float(slots), hold, 0.01))
    assert w >= 0.0
    assert float(slot_wait_s(np.array(load), float(slots + 1), hold, 0.01)) <= w + 1e-9
    assert float(slot_wait_s(np.array(load + extra), float(slots), hold, 0.01)) >= w - 1e-9


def _threshold_probe(threshold, calls):
    def probe(n):
        calls.append(n)
        return Probe(n, 0.0, 0.0, 0.0, n >= threshold)
    return probe


@settings(max_examples=200, deadline=None)
@given(threshold=st.integers(1, 300), seed=st.integers(1, 300))
def test_bracket_and_bisect_finds_the_threshold_from_any_seed(threshold, seed):
    calls: list[int] = []
    n, seen = smallest_meeting(_threshold_probe(threshold, calls), seed, n_max=400)
    assert n == threshold
    assert len(calls) == len(set(calls))   # no count simulated twice
    # doubling steps then bisection: about 2 log2 of the distance from the seed
    assert len(calls) <= 2 * math.log2(abs(seed - threshold) + 1) + 3


def test_bracket_and_bisect_is_monotone_safe_and_bounded():
    # 4 misses although 3 meets (noise): the answer met and the count below it missed
    meets = {1: False, 2: False, 3: True, 4: False, 5: True, 6: True, 7: True, 8: True}
    n, seen = smallest_meeting(lambda k: Probe(k, 0.0, 0.0, 0.0, meets[k]), seed=8, n_max=8)
    assert seen[n].meets and not seen[n - 1].meets
    # nothing within the limit: None, after probing the limit itself
    n, seen = smallest_meeting(_threshold_probe(50, []), seed=3, n_max=20)
    assert n is None and 20 in seen and not seen[20].meets


def test_probe_request_rule():
    # 20 requests beyond the percentile, at least 1000, at most 20000
    assert probe_requests(99) == 2000 and probe_requests(90) == 1000 and probe_requests(99.99) == 20000


def _brute_force(sc, cand, upto):
    """Smallest replica count meeting the SLOs, by simulating every count from 1, each one
    replica at the scenario's rate split over the replicas (offline: the whole job per replica)."""
    tr, slo = sc.traffic, sc.slo
    extra = {"speculative": cand.speculative} if cand.speculative else {}
    if tr.prefix_hit:   # the scenario's hit rate as one prefix of that share of the prompt, shared by all
        extra["prefix"] = f"shared:tokens={round(tr.prefix_hit * tr.isl.expected)},groups=1"
    for n in range(1, upto + 1):
        layout = dict(tp=cand.tp, pp=cand.pp, ep=cand.ep, precision=cand.precision, engine=sc.engine,
                      isl=tr.isl, osl=tr.osl, seed=0, **extra)
        if tr.offline:
            r = serve(cand.model, cand.hardware, offline=True, num_requests=math.ceil(tr.requests / n), **layout)
            if r.duration_s <= tr.deadline_h * 3600:
                return n
            continue
        r = serve(cand.model, cand.hardware, rate=tr.request_rate / n,
                  num_requests=probe_requests(slo.percentile) * cand.pp, **layout)
        ttft, tpot = np.percentile(r.ttft_s, slo.percentile), np.nanpercentile(r.tpot_s, slo.percentile)
        if (not slo.ttft_ms or ttft <= slo.ttft_ms / 1e3) and (not slo.tpot_ms or tpot <= slo.tpot_ms / 1e3):
            return n
    return None


_CHAT_8B = {"name": "8b chat", "models": ["llama-3.1-8b"], "hardware": ["h100-sxm", "l40s"], "engine": "vllm",
            "traffic": {"rate": 25, "isl": {"kind": "lognormal", "mean": 1000, "sigma": 0.5}, "osl": 200},
            "slo": {"ttft_ms": 600, "tpot_ms": 25, "percentile": 90}, "search": {"precisions": ["fp8"], "tp": [1]},
            "verify": 1}
_MOE = {"name": "moe chat", "models": ["qwen3-30b-a3b"], "hardware": ["l40s"], "engine": "vllm",
        "traffic": {"rate": 12, "isl": 1200, "osl": 250}, "slo": {"ttft_ms": 1000, "tpot_ms": 40, "percentile": 90},
        "search": {"precisions": ["fp8"], "tp": [1, 2]}, "verify": 1}
_RAG_PREFIX = {"name": "rag", "models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "engine": "sglang",
               "traffic": {"rate": 6, "isl": 8000, "osl": 150, "prefix_hit": 0.3},
               "slo": {"ttft_ms": 2000, "tpot_ms": 30, "percentile": 90},
               "search": {"precisions": ["fp8"], "tp": [1, 2]}, "verify": 1}
_CHAT_SPEC = {"name": "chat eagle", "models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "engine": "vllm",
              "traffic": {"rate": 8, "isl": 1000, "osl": 300}, "slo": {"ttft_ms": 600, "tpot_ms": 8, "percentile": 90},
              "search": {"precisions": ["fp8"], "tp": [1], "speculative": ["eagle:k=3,accept=0.7"]}, "verify": 1}
_BATCH = {"name": "batch", "models": ["llama-3.1-8b"], "hardware": ["l40s"], "engine": "vllm",
          "traffic": {"offline": True, "requests": 6000, "deadline_h": 0.1, "isl": 1000, "osl": 300},
          "search": {"precisions": ["fp8"], "tp": [1]}, "verify": 1}


@pytest.mark.parametrize("data", [_CHAT_8B, _MOE, _RAG_PREFIX, _CHAT_SPEC, _BATCH], ids=lambda d: d["name"])
def test_planned_count_against_brute_force(data):
    """Chat (dense, MoE, with EAGLE), RAG with prefix hits and a batch job, each simulated with
    its techniques: the plan's GPU count is at least
    and at most 25% above the smallest a brute-force simulation over replica counts finds."""
    sc = load_scenario(data)
    best = plan(sc).best
    assert best.simulated
    smallest = _brute_force(sc, best, best.replicas)
    assert smallest is not None   # the planned count meets in simulation
    assert smallest <= best.replicas <= math.ceil(1.25 * smallest)


def test_speculation_and_prefix_hits_are_simulated_when_sizing():
    # Llama-3.1-8B FP8 on one H100: EAGLE (k=3, acceptance 0.7: (1 - 0.7^4) / 0.3 = 2.53
    # tokens per target step) shortens the simulated decode at this load; a prefix_hit of 0.2
    # is simulated as one shared prefix of 0.2 x ISL tokens, which the cache finds
    spec = {"precisions": ["fp8"], "tp": [1], "speculative": ["eagle:k=3,accept=0.7"]}
    plain = {"precisions": ["fp8"], "tp": [1]}
    traffic = dict(_CHAT_8B["traffic"], prefix_hit=0.2)
    with_spec = plan(load_scenario(dict(_CHAT_8B, search=spec, traffic=traffic))).best
    without = plan(load_scenario(dict(_CHAT_8B, search=plain, traffic=traffic))).best
    assert with_spec.simulated and with_spec.simulated_without == ()
    assert with_spec.simulated_tpot_s < 0.8 * without.simulated_tpot_s
    kwargs, missing = techniques(load_scenario(dict(_CHAT_8B, search=spec, traffic=traffic)), with_spec)
    assert kwargs["speculative"] == "eagle:k=3,accept=0.7" and missing == ()
    isl = load_scenario(_CHAT_8B).traffic.isl.expected
    assert kwargs["prefix"].kind == "shared" and kwargs["prefix"].tokens == round(0.2 * isl)
    # the two-pool simulation has neither: a disaggregated candidate says so
    assert techniques(load_scenario(dict(_CHAT_8B, search=spec, traffic=traffic)),
                      replace(with_spec, disaggregated=True)) == ({}, ("speculation", "prefix cache"))


def test_columns_say_planned_and_simulated():
    result = plan(load_scenario(_CHAT_8B))
    text = str(result)
    assert "P90 TTFT ms sim" in text and "P90 TPOT ms sim" in text and "fluid" in text and "headroom" in text
    best = result.best
    row = result.to_dict()["candidates"][0]
    assert row["label"] == best.label and row["sized_by"] == "simulation"
    for key in ("simulated_ttft_s", "simulated_tpot_s", "fluid_ttft_s", "fluid_tpot_s", "seed_replicas", "headroom",
                "simulated_ttft_se_s", "simulated_tpot_se_s"):
        assert key in row
    # how sure: the percentiles' standard errors over some thousands of requests read are a few
    # percent of them (a P90 over n requests: sqrt(0.09 / n) / density at the P90), and printed
    assert 0 < best.simulated_tpot_se_s < 0.1 * best.simulated_tpot_s
    assert 0 < best.simulated_ttft_se_s < 0.1 * best.simulated_ttft_s
    assert f"{best.simulated_tpot_s * 1e3:.1f} \u00b1 {best.simulated_tpot_se_s * 1e3:.1f} ms" in result.explain()
    # the simulation at the plan's count is among the probes, and it met
    assert any(p["replicas"] == best.replicas and p["growth"] == 0 and p["meets"] for p in row["probes"])
    # headroom: the growth found meeting; the probe just above it missed (or none up to 1500%)
    grown = [p for p in best.probes if p.replicas == best.replicas and p.growth > 0]
    assert grown and all(p.meets == (p.growth <= best.headroom) for p in grown)
    if best.replicas > 1:   # one replica fewer carries each replica's share at growth n / (n - 1) - 1
        below = next(p for p in best.probes if p.replicas == best.replicas - 1 and p.growth == 0)
        assert not below.meets and best.headroom < best.replicas / (best.replicas - 1) - 1


@pytest.mark.slow
@pytest.mark.parametrize("source", [EXAMPLES / "chat.yaml",
                                    {"name": "70b h100", "models": ["llama-3.1-70b"], "hardware": ["h100-sxm"],
                                     "engine": "vllm", "traffic": {"rate": 10, "isl": 2000, "osl": 300},
                                     "slo": {"ttft_ms": 1500, "tpot_ms": 50}, "search": {"precisions": ["fp8"],
                                                                                        "tp": [4, 8]}, "verify": 2},
                                    dict(_MOE, slo={"ttft_ms": 1000, "tpot_ms": 40}, verify=2)],
                         ids=["chat-example", "70b-h100", "moe-p99"])
def test_every_simulated_count_against_brute_force_p99(source):
    """P99 (2,000 requests a probe): every configuration the plan sized by simulation."""
    sc = load_scenario(source)
    for cand in plan(sc).candidates:
        if cand.simulated and cand.feasible and not cand.disaggregated:
            smallest = _brute_force(sc, cand, cand.replicas)
            assert smallest is not None and smallest <= cand.replicas <= math.ceil(1.25 * smallest), cand.label


def test_a_queue_that_falls_behind_misses_even_without_a_ttft_objective():
    from types import SimpleNamespace

    from inferlab.serving.goodput import queue_grows

    # arrivals at t = 0..999 s. Served at once: the backlog is always 0 -> stable.
    # Scheduled at 1.2 t (the server falls 20% behind): backlog(t) = #{i: t/1.2 < i <= t} ~ t/6,
    # 166 at the last arrival vs 83 at the middle one: 166 > max(1.5 x 83, 1% of 1000, 10) -> grows.
    arrival = np.arange(1000.0)
    assert not queue_grows(SimpleNamespace(arrival=arrival, first_scheduled=arrival))
    assert queue_grows(SimpleNamespace(arrival=arrival, first_scheduled=1.2 * arrival))
    # a steady backlog of 50 requests (each waits 50 s): 50 at the middle and at the end -> stable
    assert not queue_grows(SimpleNamespace(arrival=arrival, first_scheduled=arrival + 50.0))
    # and a result without a trace (a hand-made summary) is not judged
    assert not queue_grows(None)


def test_traffic_prefix_is_simulated_and_named_only_where_the_two_pool_simulation_leaves_it_out():
    sc = load_scenario(dict(_CHAT_8B, search={"precisions": ["fp8"], "tp": [1]},
                            traffic=dict(_CHAT_8B["traffic"], prefix="shared:tokens=500,groups=4")))
    best = plan(sc).best
    assert best.simulated_without == ()
    kwargs, _ = techniques(sc, best)
    assert (kwargs["prefix"].tokens, kwargs["prefix"].groups) == (500, 4)
    assert techniques(sc, replace(best, disaggregated=True))[1] == ("prefix cache",)


def test_a_fluid_queue_that_does_not_settle_is_sat_and_null_never_infinity():
    # 182 requests/s of ~182-token prompts on one H100: the simulation meets the P99 SLOs with one
    # replica. The fluid model, prefilling each prompt alone, had not settled there; batching the
    # prompts that arrive during an iteration, it does (the fluid TTFT finite). A candidate whose
    # fluid queue does not settle (its estimate unbounded) is shown as one here.
    sc = load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "verify": 1,
                        "search": {"precisions": ["fp8"], "tp": [1]},
                        "traffic": {"rate": 181.7, "isl": 182, "osl": 16}})
    settled = plan(sc)
    assert settled.best.simulated and math.isfinite(settled.best.fluid_ttft_s)
    best = replace(settled.best, fluid_ttft_s=math.inf, fluid_tpot_s=math.inf)
    result = replace(settled, candidates=(best, *settled.candidates[1:]))
    row = best.to_dict()
    assert row["fluid_ttft_s"] is None and row["fluid_tpot_s"] is None
    assert all(v is None or math.isfinite(v) for p in row["probes"] for v in p.values() if isinstance(v, float))
    text = str(result)
    assert "inf" not in text.replace("info", "")
    assert "sat: the fluid model's queue does not settle at that load" in text
    assert "(fluid model saturated)" in result.explain()


def test_an_expert_format_rules_out_the_dense_model_only():
    sc = load_scenario({"models": ["llama-3.1-8b", "gpt-oss-20b"], "hardware": ["h100-sxm"], "verify": 0,
                        "traffic": {"rate": 2}, "search": {"precisions": ["checkpoint moe:fp8"], "tp": [1]}})
    by_model = {c.model: c for c in plan(sc).candidates}
    assert by_model["gpt-oss-20b"].feasible
    assert not by_model["llama-3.1-8b"].feasible and "llama-3.1-8b is dense" in by_model["llama-3.1-8b"].reason


def test_a_budget_with_free_gpus_bounds_nothing():
    # a GPU at $0/h: the budget allows any number of replicas; max_gpus still bounds them
    sc = load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "verify": 1, "budget_usd_per_hour": 10,
                        "prices": {"h100-sxm": 0.0}, "traffic": {"rate": 20},
                        "search": {"precisions": ["fp8"], "tp": [1]}})
    best = plan(sc).best
    assert best.usd_per_hour == 0.0 and best.replicas >= 1


def test_binding_names_slos_apart_from_the_deadline_and_a_growing_queue():
    from inferlab.planning.probes import _binding

    assert _binding("TPOT") == "TPOT SLO"
    assert _binding("TTFT+TPOT") == "TTFT+TPOT SLO"
    assert _binding("TTFT+throughput") == "TTFT SLO and throughput (queue grows)"
    assert _binding("throughput") == "throughput (queue grows)"
    assert _binding("deadline") == "deadline"


def test_a_prefill_replicas_wait_by_kingman():
    """M/M/1 at u = 0.8, mu = 1/s, P99: ln(0.8 / 0.01) / 0.2 = 21.91 s. Four prefill replicas dealt
    Poisson arrivals round robin see Erlang-4 gaps (c_a^2 = 1/4); prompts of one length prefill in a
    constant time (c_s^2 = 0): Kingman's (1/4 + 0) / 2 = 1/8 of it, 2.739 s."""
    from inferlab.planning.prefill_pool import prefill_variability, queue_wait_s

    mm1 = float(queue_wait_s(np.array(1.0), 0.8, 99.0))
    assert mm1 == pytest.approx(math.log(80.0) / 0.2, rel=1e-12)
    assert prefill_variability(1, 2.0) == 1.0  # one replica, exponential prompts: M/M/1
    assert prefill_variability(4, 1.0) == 0.125
    assert float(queue_wait_s(np.array(1.0), 0.8, 99.0, prefill_variability(4, 1.0))) == pytest.approx(mm1 / 8)
    # lognormal prompts of sigma 0.6 (E[P^2]/E[P]^2 = e^0.36): (1/4 + 0.4333) / 2
    assert prefill_variability(4, math.exp(0.36)) == pytest.approx((0.25 + math.exp(0.36) - 1.0) / 2.0)


def test_a_probe_reads_its_requests_in_steady_state():
    """steady_run by hand: requests arrive 10 per second and each lives 50 s (a fake simulation).
    Run 1 aims 5% above the 1,000 requests to read: 1,050 (no prior), spanning 104.9 s; dropping
    50 s at each end leaves 50, so the lifetime grows 10% (55 s) and run 2 simulates
    1,050 + 2 x 10/s x 55 s = 2,150 requests (0 to 214.9 s), of which those arriving in
    [55, 159.9] s are read: 1,050 (edges: float rounding)."""
    from types import SimpleNamespace

    from inferlab.planning.probes import steady_run, steady_window

    runs = []

    def run(k):
        runs.append(k)
        arrival = np.arange(k) / 10.0
        return SimpleNamespace(trace=SimpleNamespace(arrival=arrival), e2e_s=np.full(k, 50.0))

    result, life = steady_run(run, 10.0, 1000)
    assert runs == [1050, 2150] and life == pytest.approx(55.0)
    assert 1040 <= np.count_nonzero(steady_window(result.trace.arrival, life)) <= 1050
    # a prior lifetime of 55 s gets there in one run; a run that misses on all its requests is not rerun
    runs.clear()
    assert steady_run(run, 10.0, 1000, 55.0)[1] == pytest.approx(55.0) and runs == [2150]
    runs.clear()
    assert steady_run(run, 10.0, 1000, meets=lambda r: False)[1] == 0.0 and runs == [1050]


def test_a_plan_that_meets_only_while_the_replicas_fill_up_is_not_sized_by_it():
    """Long answers (lognormal, mean 1,000 tokens): a request lives 25 s on average and 100 s at
    P99, so 1,000 requests at 6.7 per second end before the replica's KV cache fills up, and
    six H100s had met a P95 TPOT objective of 30 ms that, read in steady state, they miss by
    40% (the queue grows). The plan's count meets over the middle halves of three runs of 12,000
    requests (3,000 a side: more than 100 s of arrivals at the rates here; pooled, as one seed's
    P95 TPOT at seven replicas wanders from 24 to 33 ms between eighths of a run), one fewer misses."""
    sc = load_scenario({"name": "long answers", "models": ["llama-3.1-8b"], "hardware": ["h100-sxm"],
                        "engine": "vllm", "traffic": {"rate": 40, "isl": {"kind": "lognormal", "mean": 1000,
                                                                          "sigma": 0.8},
                                                      "osl": {"kind": "lognormal", "mean": 1000, "sigma": 0.8}},
                        "slo": {"ttft_ms": 2000, "tpot_ms": 30, "percentile": 95},
                        "search": {"precisions": ["bf16"], "tp": [1]}, "verify": 1})
    best = plan(sc).best
    assert best.simulated

    def meets(n):
        ttft, tpot = [], []
        for seed in range(3):
            r = serve(best.model, best.hardware, rate=40.0 / n, num_requests=12000, isl=sc.traffic.isl,
                      osl=sc.traffic.osl, precision="bf16", engine="vllm", seed=seed)
            lo, hi = np.quantile(r.trace.arrival, [0.25, 0.75])
            read = (r.trace.arrival >= lo) & (r.trace.arrival <= hi)
            ttft.append(r.ttft_s[read])
            tpot.append(r.tpot_s[read])
        return (np.percentile(np.concatenate(ttft), 95) <= 2.0) and \
            (np.nanpercentile(np.concatenate(tpot), 95) <= 0.030)

    assert best.replicas > 6
    assert meets(best.replicas) and not meets(best.replicas - 1)


def test_a_probe_near_its_objective_pools_more_seeds():
    """A fake replica whose seed 0 draws a P99 TPOT of 47 ms (within 20% of a 50 ms objective) and
    whose other seeds draw 65 ms: pooled with seed 1, half the requests read lie at 65 ms, so the
    P99 is 65 ms, 30% past the objective; but two seeds 18 ms apart put its standard error at
    18 / sqrt(2) = 12.7 ms, so 65 ms is within two of them and seed 2 is run too (the last
    allowed): a miss at 65 ms. Seed 0 at 30 ms (40% under) is decided alone."""
    from types import SimpleNamespace

    from inferlab.planning.probes import steady_probe

    sc = load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "traffic": {"rate": 10},
                        "slo": {"ttft_ms": 1000, "tpot_ms": 50, "percentile": 99}})

    def replica(first):
        seeds = []

        def run(k, seed):
            seeds.append((seed, k))
            arrival = np.arange(k) / 10.0
            tpot = first if seed == 0 else 0.065
            # two pipeline stages: the replica's workload holds twice the stream's requests
            return SimpleNamespace(trace=SimpleNamespace(arrival=arrival), e2e_s=np.full(k, 5.0),
                                   ttft_s=np.full(k, 0.1), tpot_s=np.full(k, tpot),
                                   workload=SimpleNamespace(num_requests=2 * k))
        return run, seeds

    run, seeds = replica(0.047)
    probe = steady_probe(sc, run, 10.0, 5.0, 4, 0.0)
    # each seed the same run: 1.05 x 2,000 + 2 x 10/s x 5 s = 2,200 a stream, 4,400 a replica
    assert seeds == [(0, 2200), (1, 2200), (2, 2200)] and probe.seeds == 3 and probe.tpot_s == pytest.approx(0.065)
    assert not probe.meets and probe.requests == 3 * 4400
    run, seeds = replica(0.030)
    probe = steady_probe(sc, run, 10.0, 5.0, 4, 0.0)
    assert seeds == [(0, 2200)] and probe.seeds == 1 and probe.meets


def test_a_trickle_of_traffic_is_simulated_over_what_a_simulation_can_hold():
    """One request every 500 s: 2,000 requests would arrive over 10^6 s, past the 11.6 days a
    simulation holds at microsecond resolution; the probe simulates what arrives within it and
    the configuration is sized by simulation, not ruled out (it had been: 'at most 1e+06 s')."""
    sc = load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "engine": "vllm",
                        "traffic": {"rate": 0.002, "isl": 1000, "osl": 200},
                        "slo": {"ttft_ms": 1000, "tpot_ms": 30, "percentile": 99},
                        "search": {"precisions": ["fp8"], "tp": [1]}, "verify": 1})
    best = plan(sc).best
    assert best.simulated and best.replicas == 1
    assert 0 < best.probes[0].requests <= 0.002 * 1e6


def test_a_percentiles_standard_error_by_hand():
    """Batch means against the sample quantile's asymptotic standard error: the P99 of n draws of
    an exponential of mean 1 (density 0.01 at its P99, ln 100) has sqrt(0.99 x 0.01 / n) / 0.01;
    four seeds of 20,000 requests, n = 80,000: 0.0352."""
    from inferlab.planning.probes import percentile_se

    rng = np.random.default_rng(7)
    windows = [rng.exponential(1.0, 20000) for _ in range(4)]
    assert 0.6 * 0.0352 < percentile_se(windows, 99.0) < 1.6 * 0.0352
    # a quarter of the requests: twice the error (the mean ratio over ten replications, as one
    # estimate from four seeds spreads by about 40%)
    ratios = []
    for seed in range(10):
        r = np.random.default_rng(seed)
        full = [r.exponential(1.0, 20000) for _ in range(4)]
        ratios.append(percentile_se([w[:5000] for w in full], 99.0) / percentile_se(full, 99.0))
    assert 1.6 < float(np.mean(ratios)) < 2.6
    # fewer than two sections of 200 requests (two beyond a P99 each): no error to give
    assert math.isnan(percentile_se([windows[0][:399]], 99.0))
    assert percentile_se([np.full(2000, 0.05)], 99.0) == 0.0  # a constant reads exactly


def test_seeds_that_disagree_widen_the_standard_error():
    """Three seeds whose runs sit 0.5 apart (a heavy-tailed workload's seeds differ more than one
    run's sections show: its queue carries across them): the error is at least the spread of
    the seeds' P99 over sqrt(3), sd 0.5 / sqrt(3) = 0.29, where the sections alone say ~0.04."""
    from inferlab.planning.probes import percentile_se

    rng = np.random.default_rng(3)
    windows = [rng.exponential(1.0, 20000) + shift for shift in (0.0, 0.5, 1.0)]
    assert percentile_se(windows, 99.0) >= 0.9 * 0.5 / math.sqrt(3)


def test_a_probe_within_two_standard_errors_of_an_objective_is_near():
    from inferlab.planning.probes import _near

    sc = load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "traffic": {"rate": 10},
                        "slo": {"ttft_ms": 1000, "tpot_ms": 50, "percentile": 99}})
    # 35 ms is 30% under 50 ms, outside the 20% band: near only when 2 x SE covers the 15 ms
    assert _near(sc, Probe(2, 0.0, 0.2, 0.035, True, tpot_se_s=0.008))
    assert not _near(sc, Probe(2, 0.0, 0.2, 0.035, True, tpot_se_s=0.005))
    assert not _near(sc, Probe(2, 0.0, 0.2, 0.035, True))  # no error known: the band alone
