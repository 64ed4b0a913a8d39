"""The plan's GPU counts and dollars against hand arithmetic: the budget and GPU limits, what a
configuration costs, and the figures derived from it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.planning.candidate import Candidate
from inferlab.planning.probes import allowed_replicas
from inferlab.planning.scenario import load_scenario
from inferlab.planning.limits import limits


def _scenario(**fields):
    return load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "traffic": {"rate": 10},
                          "search": {"precisions": ["fp8"], "tp": [1]}, **fields})


def _candidate(replicas: int, usd_per_gpu_hour: float, tp: int = 1) -> Candidate:
    gpus = replicas * tp
    return Candidate("llama-3.1-8b", "h100-sxm", "fp8", tp, 1, None, True, replicas=replicas, gpus=gpus,
                     usd_per_hour=gpus * usd_per_gpu_hour)


def test_a_budget_of_exactly_the_cost_allows_it():
    # 3 replicas of one GPU at $2.95/h: 3 x 2.95 = $8.85/h (8.850000000000001 in floating point),
    # within a budget of $8.85/h; 8.85 // 2.95 is 2.0 in floating point, the count is 3
    sc = _scenario(prices={"h100-sxm": 2.95}, budget_usd_per_hour=8.85)
    assert allowed_replicas(sc, _candidate(1, 2.95)) == 3
    assert limits(sc, _candidate(3, 2.95)).feasible
    # a cent less: 8.84 / 2.95 = 2.997 -> 2 replicas; the reason in cents, not "$9/h over the budget $9/h"
    sc = _scenario(prices={"h100-sxm": 2.95}, budget_usd_per_hour=8.84)
    assert allowed_replicas(sc, _candidate(1, 2.95)) == 2
    out = limits(sc, _candidate(3, 2.95))
    assert not out.feasible and out.over_limits
    assert out.reason == "$8.85/h over the budget $8.84/h"


@settings(max_examples=60, deadline=None)
@given(cents=st.integers(1, 2000), replicas=st.integers(1, 64), tp=st.sampled_from([1, 2, 8]))
def test_a_budget_written_as_the_cost_in_cents_allows_exactly_that_count(cents, replicas, tp):
    # a price of c cents per GPU-hour and a budget of n x tp x c cents, written in dollars as a
    # user writes them: n replicas fit, n + 1 (a whole replica, >= 1 cent, more) do not (max_gpus
    # out of the way)
    price, budget = cents / 100, replicas * tp * cents / 100
    sc = _scenario(prices={"h100-sxm": price}, budget_usd_per_hour=budget, search={"precisions": ["fp8"], "tp": [tp], "max_gpus": 10**6})
    assert allowed_replicas(sc, _candidate(1, price, tp)) == replicas
    assert limits(sc, _candidate(replicas, price, tp)).feasible
    assert not limits(sc, _candidate(replicas + 1, price, tp)).feasible


def test_a_disaggregated_candidates_tokens_per_gpu_follow_its_sized_pools():
    # 6 req/s x 300 output tokens = 1,800 tok/s over the fluid pools' GPUs, then over the pools a
    # simulation may size instead, of one GPU a replica: P3:D2 1,800 / 5 = 360 tok/s per GPU,
    # P2:D1 1,800 / 3 = 600 (it had kept the seed's pools' figure)
    from inferlab.planning.search import candidates, evaluate, with_replicas

    sc = load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"],
                        "traffic": {"rate": 6, "isl": 12000, "osl": 300}, "slo": {"ttft_ms": 2000, "tpot_ms": 20},
                        "search": {"precisions": ["fp8"], "tp": [1], "disaggregation": True}})
    seed = next(evaluate(sc, c) for c in candidates(sc) if c["disaggregated"])
    assert seed.feasible and seed.tokens_per_s_per_gpu == 1800.0 / seed.gpus
    for pools, gpus, per_gpu in (("P3:D2", 5, 360.0), ("P2:D1", 3, 600.0)):
        sized = with_replicas(sc, seed, gpus, pd=pools)
        assert (sized.gpus, sized.tokens_per_s_per_gpu) == (gpus, per_gpu)


def test_an_offline_jobs_api_comparison_is_per_job():
    # 1,000,000 requests x (1000 x $0.10 + 500 x $0.40) / 1e6 = $300.00 on the API; the job on
    # dedicated replicas costs its GPU-hours (their $/h x the job's hours), not an hourly rate
    # against always-on replicas ("$12.50/h for this traffic", "pay off from 4.86 req/s")
    from inferlab.planning.planner import plan
    from inferlab.planning.search import job_s

    sc = load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "verify": 0,
                        "traffic": {"offline": True, "requests": 1_000_000, "deadline_h": 24, "isl": 1000, "osl": 500},
                        "search": {"precisions": ["fp8"], "tp": [1]}, "prices": {"h100-sxm": 2.0},
                        "api_price": {"input_per_million": 0.10, "output_per_million": 0.40}})
    result = plan(sc)
    best = result.best
    job_usd = best.gpus * 2.0 * job_s(sc, best) / 3600.0
    line = next(x for x in result.explain().splitlines() if x.startswith("vs the API"))
    assert line == (f"vs the API at $0.1/$0.4 per 1M in/out tokens: $300.00 for the job's 1,000,000 requests, "
                    f"against ${job_usd:,.2f} on these replicas")


def test_a_price_a_replica_never_beats_says_so(tmp_path, capsys):
    """A break-even utilization above 100% had printed 'pay off from inf req/s (each replica 163%
    busy)'. At $0.01 per million tokens the API bills 1,000 x 0.01 / 1e6 + 100 x 0.01 / 1e6 = 1.1e-5
    USD a request; an H100 at $2.95/h would need 2.95 / 3600 / 1.1e-5 = 74.5 requests/s to match."""
    from inferlab.cli.main import main

    path = tmp_path / "s.yaml"
    path.write_text("models: [llama-3.1-8b]\nhardware: [h100-sxm]\ntraffic: {rate: 0.5, isl: 1000, osl: 100}\n"
                    "slo: {ttft_ms: 2000, tpot_ms: 100}\nsearch: {precisions: [bf16], tp: [1]}\n"
                    "prices: {h100-sxm: 2.95}\nverify: 0\napi_price: {input_per_million: 0.01, output_per_million: 0.01}\n")
    assert main(["plan", str(path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("vs the API"))
    assert "never pay off at this price: one would need to serve 74.49 req/s" in line and "inf" not in line
