"""Fleet inputs that used to be dropped or mispriced: a Deployment's price beside a partial
pricing, reserved-only pricing on a GPU the catalog has no price for, keys given beside
``fleet.pools``, ``--rate-scale`` with a trace, a plan scenario's fleet naming one of its GPUs."""

from __future__ import annotations

import numpy as np
import pytest

import inferlab
from inferlab.cli.main import main
from inferlab.errors import SpecError
from inferlab.fleet import fleet_of

TRAFFIC = {"rate": 2.0, "isl": 200, "osl": 20}
DEP = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "price_per_gpu_hour": 1.0}


def test_a_deployments_price_stays_beside_a_pricing_that_names_no_on_demand_price():
    """One replica on one GPU at 1 USD/h, reserved 0, for an hour: 1.00 USD (the catalog's H100
    price would give more; the on-demand replica also pays the seconds it drains its last
    requests past the hour); a pool reserving its one replica at 0.5 USD/h: 0.50 USD."""
    dep = inferlab.Deployment.from_dict(DEP)
    one = inferlab.fleet(dep, horizon_s=3600.0, traffic=TRAFFIC, pricing={"reserved": 0})
    assert one.usd == pytest.approx(1.0, rel=1e-3)
    pool = fleet_of([{"deployment": DEP, "replicas": 1, "pricing": {"reserved": 1, "reserved_usd_per_hour": 0.5}}],
                    traffic=[TRAFFIC], horizon_s=3600.0)
    assert pool.usd == pytest.approx(0.5, rel=1e-3)


def test_reserved_replicas_cost_what_they_are_reserved_at_where_the_catalog_has_no_price():
    """A GPU without a catalog price (b300): one reserved replica at 30 USD/h for half an hour is
    15 USD; nothing runs on demand, so the unknown on-demand price does not make it unknown."""
    r = inferlab.fleet("llama-3.1-8b", "b300", horizon_s=1800.0, traffic=TRAFFIC,
                       pricing={"reserved": 1, "reserved_usd_per_hour": 30.0})
    assert r.usd == pytest.approx(15.0, rel=1e-3)


def _write(tmp_path, text):
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return str(path)


def test_keys_beside_fleet_pools_are_refused_not_dropped(tmp_path, capsys):
    path = _write(tmp_path, """
fleet:
  hours: 0.01
  replicas: 5
  pools: [{model: llama-3.1-8b, hardware: h100-sxm, replicas: 1}]
  traffic: [{rate: 1, isl: 100, osl: 10}]
""")
    assert main(["fleet", path]) == 2
    assert "replicas belong in each pool" in capsys.readouterr().err


def test_rate_scale_with_a_trace_is_refused(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("arrival_s,isl,osl\n0.0,100,10\n0.5,100,10\n")
    path = _write(tmp_path, f"""
model: llama-3.1-8b
hardware: h100-sxm
fleet: {{hours: 0.01, trace: {tmp_path / 't.csv'}}}
""")
    assert main(["fleet", path, "--rate-scale", "0.1"]) == 2
    assert "a trace replays its recorded arrival times" in capsys.readouterr().err


def test_a_plan_scenarios_fleet_naming_one_gpu_keeps_only_its_price(tmp_path, capsys):
    """The plan scenario prices two GPUs; its fleet section names one: the plan narrowed to it
    runs (it raised a traceback on the other GPU's price)."""
    path = _write(tmp_path, """
name: two gpus
models: [llama-3.1-8b]
hardware: [h100-sxm, h200-sxm]
engine: vllm
traffic: {rate: 2, isl: 500, osl: 50}
slo: {ttft_ms: 2000, tpot_ms: 60}
search: {precisions: [fp8], tp: [1]}
prices: {h100-sxm: 2.0, h200-sxm: 3.0}
verify: 0
fleet: {hours: 0.01, hardware: h200-sxm}
""")
    assert main(["fleet", path]) == 0
    out = capsys.readouterr().out
    assert "h200-sxm" in out and "which a fleet replica does not run" in out


def test_a_node_holds_one_pools_replicas():
    """Two pools in two regions, one replica each, on nodes of two replicas: a node failure takes
    down only its own pool's replica (they failed together, grouped by their global index)."""
    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "replicas": 1, "region": "us-east-1"},
             {"model": "llama-3.1-8b", "hardware": "h200-sxm", "replicas": 1, "region": "eu-west-1"}]
    r = fleet_of(pools, traffic=[{"rate": 0.5, "isl": 100, "osl": 10, "region": "us-east-1"}], horizon_s=3 * 3600.0,
                 failures={"replica_mtbf_h": float("inf"), "node_mtbf_h": 0.5, "replicas_per_node": 2}, seed=1)
    fails = [(t, i) for t, kind, i in r.events if kind == "fail"]
    assert fails and len({t for t, _ in fails}) == len(fails)   # never two replicas at one instant


def test_more_replicas_a_node_than_its_gpus_hold_is_refused():
    with pytest.raises(SpecError, match="a h100-sxm node has 8: at most 1 a node"):
        inferlab.fleet("llama-3.1-70b", "h100-sxm", tp=8, horizon_s=60.0, traffic=TRAFFIC,
                       failures={"node_mtbf_h": 100.0, "replicas_per_node": 2})


def test_starting_replicas_over_a_regions_quota_are_refused():
    """Two H200 TP8 replicas (16 GPUs) asked to start where the quota is 8 GPUs: refused up front
    (they ran as one, with availability counted against the two asked for, and a note)."""
    pools = [{"model": "llama-3.1-70b", "hardware": "h200-sxm", "tp": 8, "replicas": 2, "region": "us-east-1"}]
    with pytest.raises(SpecError, match="region 'us-east-1' start 16 GPUs, over its quota of 8"):
        fleet_of(pools, traffic=[{"rate": 0.5, "isl": 100, "osl": 10, "region": "us-east-1"}], horizon_s=60.0,
                 regions={"quota_gpus": {"us-east-1": 8}})


def test_a_utilization_target_the_signal_never_reaches_is_said():
    """A sparse MoE replica saturated with decodes processes well under half the tokens of its
    full-budget prefill: a utilization target of 0.6 never scales it while nearly every request
    misses its TTFT objective; the result says why (it stayed silent at one replica)."""
    r = inferlab.fleet("qwen3-30b-a3b", "h100-sxm", engine="vllm", replicas=1, horizon_s=300.0,
                       traffic={"rate": 40, "isl": 2000, "osl": 300},
                       autoscaler={"signal": "utilization", "target": 0.6, "max_replicas": 10})
    assert r.samples["ready"].max() == 1
    assert any("the utilization signal peaked at" in n and "scale on queue or concurrency" in n for n in r.notes)


@pytest.mark.parametrize("engine,layout", [("trtllm-pytorch", {"ep": 8, "attention_dp": True}),
                                           ("sglang", {"ep": 8})])
def test_one_expert_parallel_replica_fleet_equals_serve(engine, layout):
    """A fleet of one DeepSeek-V3 replica over eight H200s with its experts spread over them (and
    attention data-parallel: each GPU its own sequences) serves the same requests as serve() on
    that deployment, request by request (fleets refused expert parallelism before)."""
    from inferlab.fleet.replicas import replica_kind
    from inferlab.fleet.simulation import FleetConfig, run
    from inferlab.fleet.startup import Startup
    from inferlab.fleet.traffic import plain

    kw = dict(tp=8, precision="fp8", engine=engine, **layout)
    ref = inferlab.serve("deepseek-v3", "h200-sxm", isl=1500, osl=150, rate=6.0, num_requests=150, seed=3,
                         **kw).trace
    kind, _ = replica_kind("one", "deepseek-v3", "h200-sxm", startup=Startup(), **kw)
    rec = run(kind, plain(ref.arrival, ref.isl, ref.osl), FleetConfig())
    assert np.array_equal(rec.first_token, ref.first_token) and np.array_equal(rec.finish, ref.finish)
    r = inferlab.fleet("deepseek-v3", "h200-sxm", horizon_s=30.0, traffic={"rate": 2.0, "isl": 500, "osl": 50}, **kw)
    assert r.counts()["ok"] > 0 and r.usd > 0


def test_a_fleet_file_names_expert_parallel_attention_dp_replicas(tmp_path, capsys):
    path = _write(tmp_path, """
model: deepseek-v3
hardware: h200-sxm
engine: sglang
tp: 8
ep: 8
attention_dp: true
precision: fp8
fleet: {hours: 0.01, replicas: 1, traffic: {rate: 2, isl: 500, osl: 50}}
""")
    assert main(["fleet", path, "--json"]) == 0
    assert '"usd"' in capsys.readouterr().out


def test_a_replica_is_paid_from_its_order_to_its_stop():
    """A burst the autoscaler answers with more replicas, each paid at 2 USD/h from the moment it
    is ordered (pricing.py: a starting replica holds its GPUs) until it stops; the first one from
    0 to the end of the run. The bill is the sum over the orders and stops the run records (it
    was sampled every period, so each order was paid a period late)."""
    r = inferlab.fleet("llama-3.1-8b", "h100-sxm", replicas=1, horizon_s=900.0, sample_s=30.0,
                       traffic={"shape": "burst", "rate": 1.0, "peak_rate": 30.0, "start_s": 100.0, "end_s": 400.0,
                                "isl": 1000, "osl": 200},
                       autoscaler={"signal": "queue", "target": 4.0, "max_replicas": 6, "period_s": 15.0,
                                   "scale_down_delay_s": 60.0},
                       pricing={"on_demand_usd_per_hour": 2.0})
    finish = r.finish[r.status == 0]
    end = max(900.0, float(np.nanmax(finish)))
    ordered = {i: t for t, kind, i in r.events if kind == "order"}
    # a replica scaled down while still starting stops at once; a serving one drains, then stops
    stopped = {i: t for t, kind, i in r.events if kind == "scale down"}
    stopped.update({i: t for t, kind, i in r.events if kind == "stop"})
    assert len(ordered) >= 2 and ordered[0] == 0.0   # the autoscaler ordered more
    held = sum(min(stopped.get(i, end), end) - t for i, t in ordered.items())
    assert r.usd == pytest.approx(2.0 * held / 3600.0, rel=1e-9)


def test_a_pool_of_no_replicas_and_no_autoscaler_is_refused():
    with pytest.raises(SpecError, match="pool 0: replicas 0 without an autoscaler serves nothing"):
        fleet_of([{"model": "llama-3.1-8b", "hardware": "h100-sxm", "replicas": 0}], traffic=[TRAFFIC], horizon_s=60.0)


def test_an_unknown_cost_says_which_price_is_missing():
    r = inferlab.fleet("llama-3.1-8b", "b300", horizon_s=60.0, traffic=TRAFFIC)
    assert any("cost unknown: no on-demand price for llama-3.1-8b on b300" in n for n in r.notes)


def test_spend_by_hand_with_reserved_and_spot_replicas():
    """One pool: 1 reserved at 1 USD/h, on demand 2 USD/h, spot 0.5 USD/h, over 2 h. Replica 0
    (reserved) 0-2 h; replica 1 on demand 0-1 h; replica 2 on spot 0.5-2 h; replica 3 ordered
    after the end (not paid). Reserved 1 x 1 x 2 = 2; on demand 2 x 1 = 2; spot 0.5 x 1.5 =
    0.75: 4.75 USD."""
    from inferlab.fleet.pricing import Pricing, spend_usd

    price = Pricing(on_demand_usd_per_hour=2.0, reserved_usd_per_hour=1.0, spot_usd_per_hour=0.5, reserved=1)
    h = 3600.0
    usd = spend_usd([price], [(0.0, float("inf")), (0.0, h), (0.5 * h, float("inf")), (3 * h, float("inf"))],
                    [0, 0, 0, 0], [False, False, True, False], 2 * h)
    assert usd == pytest.approx(4.75, rel=1e-12)


def test_an_attention_dp_replicas_peak_is_its_ranks_prefilling_together():
    """The utilization signal's peak of an attention-DP replica is eight prompts, one a rank, each
    an eighth of the budget (as the engine chunks them): at least the TP8 replica's peak, not
    one prompt on one rank (which read a light load as full and scaled up)."""
    from inferlab.fleet.replicas import replica_kind
    from inferlab.fleet.startup import Startup

    peaks = [replica_kind("", "deepseek-v3", "h200-sxm", tp=8, ep=8, attention_dp=adp, precision="fp8",
                          engine="sglang", startup=Startup())[0].peak_tokens_per_s for adp in (False, True)]
    assert peaks[1] >= peaks[0]


def test_a_fleet_replica_refuses_an_expert_imbalance_it_would_drop():
    dep = inferlab.Deployment.from_dict({"model": "deepseek-v3", "hardware": "h200-sxm", "precision": "fp8",
                                         "layout": {"tp": 8, "ep": 8, "expert_imbalance": 1.5}})
    with pytest.raises(SpecError, match="expert_imbalance"):
        inferlab.fleet(dep, horizon_s=60.0, traffic=TRAFFIC)


def test_a_start_quota_counts_the_autoscalers_floor():
    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "replicas": 0, "region": "us-east-1",
              "autoscaler": {"signal": "queue", "min_replicas": 4, "max_replicas": 8}}]
    with pytest.raises(SpecError, match="start 4 GPUs, over its quota of 2"):
        fleet_of(pools, traffic=[{"rate": 0.5, "isl": 100, "osl": 10, "region": "us-east-1"}], horizon_s=60.0,
                 regions={"quota_gpus": {"us-east-1": 2}})


def test_a_plan_scenarios_fleet_names_an_attention_dp_layout(tmp_path, capsys):
    path = _write(tmp_path, """
name: ds
models: [deepseek-v3]
hardware: [h200-sxm]
engine: sglang
traffic: {rate: 2, isl: 500, osl: 50}
slo: {ttft_ms: 2000, tpot_ms: 60}
search: {precisions: [fp8], tp: [8]}
verify: 0
fleet: {hours: 0.01, replicas: 1, ep: 8, attention_dp: true}
""")
    from inferlab.fleet.scenario import load_fleet_scenario

    kwargs = load_fleet_scenario(path)
    assert (kwargs["ep"], kwargs["attention_dp"]) == (8, True)
    assert main(["fleet", path]) == 0


def test_a_node_keeps_failing_after_its_first_replica_stops():
    """Four replicas, two a node, scaled down to one at a quiet load: node failures (every 15 min on
    average) keep hitting the replica left, whichever of its node's replicas came first (only
    the node's first replica carried them, so they stopped with it)."""
    r = inferlab.fleet("llama-3.1-8b", "h100-sxm", replicas=4, horizon_s=6 * 3600.0, seed=2,
                       traffic={"rate": 0.2, "isl": 200, "osl": 20},
                       autoscaler={"signal": "concurrency", "target": 8.0, "min_replicas": 1, "max_replicas": 4,
                                   "scale_down_delay_s": 60.0},
                       failures={"replica_mtbf_h": float("inf"), "node_mtbf_h": 0.25, "replicas_per_node": 2,
                                 "detection_s": 30.0, "restart_s": 60.0})
    assert r.samples["ready"][-1] <= 2   # scaled down
    late = [t for t, kind, _ in r.events if kind == "fail" and t > 3 * 3600.0]
    assert len(late) >= 3   # about 12 expected in those 3 h


def test_a_traffic_class_asking_for_another_model_is_refused_by_a_one_model_fleet():
    with pytest.raises(SpecError, match="asks for model 'qwen3-8b', which no pool serves; pools serve: llama-3.1-8b"):
        inferlab.fleet("llama-3.1-8b", "h100-sxm", horizon_s=60.0, traffic=[{**TRAFFIC, "model": "qwen3-8b"}])


def test_a_cheaper_spot_price_never_raises_the_bill():
    """Two replicas reserved at 1.5 USD/h, every replica beyond them on spot, an autoscaler
    between 1 and 5 replicas through five bursts. A scale-down had drained a replica in a
    reserved slot (paid whether it runs or not) and kept a spot one: spot at 2.5 USD/h, below
    the 2.95 on-demand price, cost 18.81 USD against 17.47 without spot."""
    from inferlab.fleet import fleet

    bursts = [{"shape": "burst", "rate": 0, "peak_rate": 30, "start_s": 300 + 1500 * k, "end_s": 1200 + 1500 * k,
               "isl": 1000, "osl": 200} for k in range(5)]
    scaler = {"signal": "concurrency", "target": 8, "min_replicas": 1, "max_replicas": 5, "scale_down_delay_s": 30}

    def bill(spot: float | None) -> float:
        pricing = {"reserved": 2, "reserved_usd_per_hour": 1.5, "spot_reclaims_per_h": 0}
        if spot is not None:
            pricing.update(spot_share=1, spot_usd_per_hour=spot)
        return fleet("llama-3.1-8b", "h100-sxm", replicas=2, horizon_s=7200, seed=1, pricing=pricing,
                     traffic=[{"rate": 2, "isl": 1000, "osl": 200}, *bursts], autoscaler=scaler).usd

    assert bill(2.5) < bill(None)


def test_a_price_given_as_nan_is_refused_not_read_as_the_catalogs():
    """NaN inside Pricing means 'not given'; given by the user it had silently become the catalog price."""
    with pytest.raises(SpecError, match=r"^fleet pricing.on_demand_usd_per_hour must be a number, got nan"):
        inferlab.fleet("llama-3.1-8b", "h100-sxm", horizon_s=60, traffic={"rate": 1, "isl": 100, "osl": 10},
                             pricing={"on_demand_usd_per_hour": float("nan")})


def test_a_fleet_without_a_prefix_cache_says_so_not_that_the_router_lost_the_hits():
    r = inferlab.fleet("llama-3.1-8b", "h100-sxm", replicas=2, horizon_s=120, prefix_cache=False,
                             traffic={"rate": 2, "isl": 400, "osl": 20, "prefix": "sessions:turns=2,think=1"})
    line = r.explain().splitlines()[0]
    assert line.startswith("prefix cache: none of the ") and "the replicas' prefix cache is off" in line


def test_an_availability_of_zero_from_a_need_above_the_fleet_says_why():
    r = inferlab.fleet("llama-3.1-8b", "h100-sxm", replicas=2, need=5, horizon_s=60, traffic=TRAFFIC)
    assert r.availability == 0.0
    assert "availability 0: it counts the time at least 5 replicas serve, and at most 2 ran" in r.notes
