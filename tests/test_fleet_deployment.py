"""A fleet's replicas take the same Deployment as estimate and serve (issue 18): written as a
Deployment, a pool's deployment mapping or a scenario's ``deployment:``, a replica simulates
exactly as its keyword form."""

from __future__ import annotations

import numpy as np
import pytest

import inferlab
from inferlab import Deployment
from inferlab.inputs.lengths import Lengths
from inferlab.errors import SpecError
from inferlab.fleet import fleet_of
from inferlab.fleet.scenario import load_fleet_scenario
from inferlab.fleet.cascade import run_scenario

TRAFFIC = {"rate": 3.0, "isl": 600, "osl": 80}
KEYWORDS = dict(tp=2, precision="fp8", engine="sglang", max_num_seqs=64)
DEPLOYMENT = Deployment(model="llama-3.1-8b", hardware="h100-sxm", layout={"tp": 2}, precision="fp8",
                        engine={"name": "sglang", "max_num_seqs": 64})


def test_a_deployment_runs_the_same_fleet_as_its_keywords():
    by_keywords = inferlab.fleet("llama-3.1-8b", "h100-sxm", replicas=2, horizon_s=120.0, traffic=TRAFFIC,
                                 **KEYWORDS)
    typed = inferlab.fleet(DEPLOYMENT, replicas=2, horizon_s=120.0, traffic=TRAFFIC)
    assert len(typed.ttft) == len(by_keywords.ttft) > 200
    assert np.array_equal(typed.ttft, by_keywords.ttft) and typed.usd == by_keywords.usd


def test_a_pool_written_as_a_deployment_is_its_keyword_pool():
    keyword_pool = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "tp": 2, "precision": "fp8",
                    "engine": "sglang", "limits": {"max_num_seqs": 64}, "region": "us-east-1"}
    typed_pool = {"deployment": DEPLOYMENT.to_dict(), "region": "us-east-1"}
    traffic = {**TRAFFIC, "region": "us-east-1"}
    a = fleet_of([keyword_pool], traffic=traffic, horizon_s=120.0)
    b = fleet_of([typed_pool], traffic=traffic, horizon_s=120.0)
    assert np.array_equal(a.ttft, b.ttft) and a.usd == b.usd
    with pytest.raises(SpecError, match="pool 0: hardware given beside its deployment"):
        fleet_of([{**typed_pool, "hardware": "h200-sxm"}], traffic=traffic, horizon_s=10.0)


def test_a_scenario_deployment_is_its_model_and_hardware(tmp_path):
    plain = tmp_path / "plain.yaml"
    plain.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nengine: sglang\ntp: 2\nprecision: fp8\n"
                     "fleet: {replicas: 1, hours: 0.03, traffic: {rate: 2, isl: 500, osl: 60}}\n")
    typed = tmp_path / "typed.yaml"
    typed.write_text("deployment: {model: llama-3.1-8b, hardware: h100-sxm, layout: {tp: 2}, precision: fp8, "
                     "engine: {name: sglang}}\n"
                     "fleet: {replicas: 1, hours: 0.03, traffic: {rate: 2, isl: 500, osl: 60}}\n")
    a, b = run_scenario(load_fleet_scenario(plain)), run_scenario(load_fleet_scenario(typed))
    assert np.array_equal(a.ttft, b.ttft) and len(a.ttft) > 100
    clash = tmp_path / "clash.yaml"
    clash.write_text("deployment: {model: llama-3.1-8b, hardware: h100-sxm}\nhardware: h200-sxm\n"
                     "fleet: {replicas: 1}\n")
    with pytest.raises(SpecError, match="hardware given beside deployment"):
        load_fleet_scenario(clash)


def test_what_a_fleet_replica_does_not_simulate_is_refused():
    with pytest.raises(SpecError, match="pp, dp .*not simulated in fleets"):
        inferlab.fleet(Deployment(model="llama-3.1-8b", hardware="h100-sxm", layout={"pp": 2, "dp": 2}),
                       traffic=TRAFFIC, horizon_s=10.0)
    with pytest.raises(SpecError, match="hardware, tp given beside the Deployment"):
        inferlab.fleet(DEPLOYMENT, "h100-sxm", tp=4, traffic=TRAFFIC, horizon_s=10.0)
    with pytest.raises(SpecError, match="give the hardware"):
        inferlab.fleet("llama-3.1-8b", traffic=TRAFFIC, horizon_s=10.0)


def test_a_deployments_price_is_the_replicas_on_demand_price():
    """2 GPUs at 3.00 USD/h each for 0.1 h of one replica: 0.60 USD."""
    priced = Deployment(**{**DEPLOYMENT.to_dict(), "price_per_gpu_hour": 3.0})
    r = inferlab.fleet(priced, replicas=1, horizon_s=360.0, traffic={"rate": 0.5, "isl": 200, "osl": 20},
                       drain_s=0.0)
    assert r.usd == pytest.approx(0.60, rel=1e-9)


def test_a_fleet_refuses_requests_beyond_the_models_positions_unless_allowed():
    # llama-3.1-8b was trained for 131,072 positions: 140,000-token prompts are refused by a
    # fleet, a pool and a Deployment's replica as by serve, and run where the deployment allows
    # long contexts (RoPE scaling); a max_model_len past the positions likewise
    long = {"rate": 0.1, "isl": 140_000, "osl": 100}
    with pytest.raises(SpecError, match="isl \\+ osl = 140,100 tokens exceeds the 131,072 positions"):
        inferlab.fleet("llama-3.1-8b", "h200-sxm", replicas=1, horizon_s=60.0, traffic=long)
    assert len(inferlab.fleet("llama-3.1-8b", "h200-sxm", replicas=1, horizon_s=60.0, traffic=long,
                              allow_long_context=True).ttft) > 0
    with pytest.raises(SpecError, match="max_model_len=200,000 exceeds the 131,072 positions"):
        inferlab.fleet("llama-3.1-8b", "h200-sxm", replicas=1, horizon_s=10.0, traffic=TRAFFIC,
                       max_model_len=200_000)
    allowed = Deployment(model="llama-3.1-8b", hardware="h200-sxm", allow_long_context=True)
    inferlab.fleet(allowed, replicas=1, horizon_s=60.0, traffic=long)
    with pytest.raises(SpecError, match="allow_long_context given beside the Deployment"):
        inferlab.fleet(allowed, replicas=1, horizon_s=10.0, traffic=long, allow_long_context=True)
    pool = {"model": "llama-3.1-8b", "hardware": "h200-sxm"}
    with pytest.raises(SpecError, match="140,100 tokens exceeds"):
        fleet_of([pool], traffic=long, horizon_s=60.0)
    fleet_of([{**pool, "allow_long_context": True}], traffic=long, horizon_s=60.0)
    fleet_of([{"deployment": allowed.to_dict()}], traffic=long, horizon_s=60.0)
    with pytest.raises(SpecError, match="allow_long_context given beside its deployment"):
        fleet_of([{"deployment": allowed.to_dict(), "allow_long_context": True}], traffic=long, horizon_s=10.0)


def test_a_fleet_scenario_allows_long_contexts_where_it_says_so(tmp_path):
    # a scenario that says allow_long_context (at the top, or in its deployment) runs 140,000-token
    # prompts to Llama-3.1-8B (131,072 positions), its cascade's large fleet (Llama-3.1-70B) too; without it the
    # scenario is refused; a pool's flag must be a boolean, not text that reads as one
    fleet_part = ("fleet: {replicas: 1, hours: 0.02, traffic: {rate: 0.1, isl: 140000, osl: 50}, "
                  "cascade: {model: llama-3.1-70b, tp: 2, share: 0.5, replicas: 1}}\n")
    plain = tmp_path / "plain.yaml"
    plain.write_text("model: llama-3.1-8b\nhardware: h200-sxm\nallow_long_context: true\n" + fleet_part)
    typed = tmp_path / "typed.yaml"
    typed.write_text("deployment: {model: llama-3.1-8b, hardware: h200-sxm, allow_long_context: true}\n" + fleet_part)
    for path in (plain, typed):
        result = run_scenario(load_fleet_scenario(path))
        assert len(result.small.ttft) > 0 and len(result.large.arrival) > 0  # the escalated ones reach it
    plain.write_text("model: llama-3.1-8b\nhardware: h200-sxm\n" + fleet_part)
    with pytest.raises(SpecError, match="140,050 tokens exceeds the 131,072 positions"):
        run_scenario(load_fleet_scenario(plain))
    with pytest.raises(SpecError, match="pool 0: allow_long_context must be true or false"):
        fleet_of([{"model": "llama-3.1-8b", "hardware": "h200-sxm", "allow_long_context": "false"}],
                 traffic=TRAFFIC, horizon_s=10.0)


def test_a_horizon_that_ends_mid_sample_is_billed_to_its_end():
    """One 2-GPU replica at 3.00 USD/h a GPU for 36 s, sampled every 15 s (0, 15, 30): 6 x 36 / 3600
    = 0.06 USD; the last sample's spend had run a whole period past the horizon (45 s: 0.075)."""
    priced = Deployment(**{**DEPLOYMENT.to_dict(), "price_per_gpu_hour": 3.0})
    r = inferlab.fleet(priced, replicas=1, horizon_s=36.0, sample_s=15.0,
                       traffic={"rate": 0.5, "isl": 200, "osl": 20}, drain_s=0.0)
    assert r.usd == pytest.approx(0.06, rel=1e-9)


def test_a_fleet_answers_a_request_past_max_model_len_alone_and_routes_it_where_it_fits():
    # lognormal prompts of mean 4,000 and sigma 0.8 (mu = ln 4000 - 0.32 = 7.974) plus 64 output
    # tokens pass max_model_len=8,192 where the prompt passes 8,128: P(Z > (ln 8128 - 7.974) / 0.8
    # = 1.29) = 9.9% of them. The engine answers those with an error and serves the others, as
    # serve does: the fleet ends them 'too long' and says why; beside a pool of the model's whole
    # context they go there instead
    traffic = {"rate": 1.0, "isl": {"kind": "lognormal", "mean": 4000, "sigma": 0.8}, "osl": 64}
    run = inferlab.fleet("llama-3.1-8b", "h100-sxm", replicas=1, horizon_s=600, traffic=traffic, max_model_len=8192)
    counts, isl, status = run.counts(), np.asarray(run.isl), np.asarray(run.status)
    assert 0.05 * len(isl) <= counts["too long"] <= 0.15 * len(isl) and counts["ok"] > 0.8 * len(isl)
    assert isl[status == 0].max() <= 8128 and isl[status == 7].min() > 8128
    said = run.explain()
    assert "longer (prompt plus output) than a pool's max_model_len" in said and "token budget" not in said
    served = inferlab.serve("llama-3.1-8b", "h100-sxm", rate=1.0, num_requests=600, isl=Lengths("lognormal", mean=4000,
                            sigma=0.8), osl=64, max_model_len=8192)
    assert 0.05 * 600 <= served.refused <= 0.15 * 600
    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "limits": {"max_model_len": 8192}},
             {"model": "llama-3.1-8b", "hardware": "h100-sxm"}]
    both = fleet_of(pools, traffic=[traffic], horizon_s=600)
    long = (np.asarray(both.status) == 0) & (np.asarray(both.isl) > 8128)
    assert both.counts()["too long"] == 0 and long.any()
    assert set(np.asarray(both.replica_pool)[np.asarray(both.replica)[long]].tolist()) == {1}


def test_a_request_past_the_positions_goes_to_the_pool_that_allows_long_context():
    # lognormal prompts of mean 100,000 and sigma 0.3 (mu = ln 1e5 - 0.045 = 11.468) pass
    # Llama-3.1-8B's 131,072 positions with their 64 output tokens where the prompt passes 131,008:
    # P(Z > (ln 131008 - 11.468) / 0.3 = 1.05) = 15%; the pool that allows long context (RoPE
    # scaling) takes them, the other none
    traffic = {"rate": 0.05, "isl": {"kind": "lognormal", "mean": 100_000, "sigma": 0.3}, "osl": 64}
    pools = [{"model": "llama-3.1-8b", "hardware": "h200-sxm"},
             {"model": "llama-3.1-8b", "hardware": "h200-sxm", "allow_long_context": True}]
    run = fleet_of(pools, traffic=[traffic], horizon_s=1200)
    isl, status = np.asarray(run.isl), np.asarray(run.status)
    long = isl + 64 > 131_072
    assert long.any() and (status[long] == 0).all() and run.counts()["too long"] == 0
    assert set(np.asarray(run.replica_pool)[np.asarray(run.replica)[long]].tolist()) == {1}
    alone = fleet_of(pools[:1], traffic=[traffic], horizon_s=1200)
    assert 0.05 * len(alone.isl) <= alone.counts()["too long"] <= 0.3 * len(alone.isl)


def test_a_fleet_is_refused_where_every_request_of_one_model_is_too_long():
    # Llama-2-7B was trained for 4,096 positions: 5,000-token prompts to it are refused as serve
    # refuses a run none of whose requests its engine takes, whatever the other model's pool serves
    pools = [{"model": "llama-2-7b", "hardware": "h100-sxm"}, {"model": "llama-3.1-8b", "hardware": "h100-sxm"}]
    traffic = [{"rate": 0.5, "isl": 5000, "osl": 16, "model": "llama-2-7b"},
               {"rate": 0.5, "isl": 1000, "osl": 16, "model": "llama-3.1-8b"}]
    with pytest.raises(SpecError, match="4,096 positions"):
        fleet_of(pools, traffic=traffic, horizon_s=60)


def test_a_keyword_fleet_does_not_take_is_named_with_what_it_takes():
    # unknown keywords had fallen through to the engine limits: "scheduler: unknown limit 'slo'"
    with pytest.raises(SpecError, match="fleet: unknown argument 'horizon' \\(did you mean 'horizon_s'\\?\\); it takes "
                                        "model, hardware"):
        inferlab.fleet("llama-3.1-8b", "h100-sxm", horizon=60)
    with pytest.raises(SpecError, match="fleet: unknown argument 'slo'; .*ttft_slo_s.*and the engine limits max_num_seqs"):
        inferlab.fleet("llama-3.1-8b", "h100-sxm", slo={"ttft_ms": 500})


def test_traffic_past_what_one_simulation_holds_is_refused_before_it_is_drawn(tmp_path):
    # about 1 kB a request while simulated: 10,000 requests/s over 3,000 s is 3e7 (30 GB), two
    # classes of 2,000/s 1.2e7; it had run until memory ran out
    with pytest.raises(SpecError, match="about 3e\\+07 requests; at most 1e\\+07 are simulated"):
        inferlab.fleet("llama-3.1-8b", "h100-sxm", traffic={"rate": 10_000}, horizon_s=3000)
    with pytest.raises(SpecError, match="first 2 class\\(es\\) send about 1.2e\\+07 requests"):
        inferlab.fleet("llama-3.1-8b", "h100-sxm", traffic=[{"rate": 2000}, {"rate": 2000}], horizon_s=3000)


def test_a_trace_past_what_one_simulation_holds_is_refused_before_its_rows_are_read(tmp_path, monkeypatch):
    # (the cap lowered to 5 for the test: a trace of 10 requests)
    import importlib

    traffic = importlib.import_module("inferlab.fleet.traffic")
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,isl,osl\n" + "".join(f"{i},100,10\n" for i in range(10)))
    monkeypatch.setattr(traffic, "MAX_REQUESTS", 5)
    with pytest.raises(SpecError, match="the trace t.csv holds about 10 requests; at most 5e\\+00 are simulated"):
        traffic.read_trace(path)
    monkeypatch.setattr(traffic, "_cell", lambda *a: (_ for _ in ()).throw(AssertionError("a row was parsed")))
    with pytest.raises(SpecError, match="at most 5e\\+00"):
        traffic.read_trace(path)
