"""The fleet's control loop and its inputs, from a bug hunt: the autoscaler acts every
``period_s`` and sees the router's queue, the start count is held to ``max_replicas``,
availability counts only replicas taking requests, the router's queue hands a request only
to a pool of its model, and fleet_of's pools and regions refuse what they cannot use."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferlab
from inferlab.errors import SpecError
from inferlab.fleet import fleet_of
from inferlab.fleet.classes import build_requests
from inferlab.fleet.simulation import OK

M, G = "llama-3.1-8b", "h100-sxm"
P = {"model": M, "hardware": G}
T = {"rate": 1, "isl": 100, "osl": 10}


def _orders(r, after: float = 0.0) -> list[float]:
    return [t for t, what, _ in r.events if what == "order" and t > after]


def test_autoscaler_sees_the_requests_waiting_at_the_router():
    """Admission at the router, 4 requests per replica: one replica serves at most 4 requests
    of 100 output tokens at a time, each >= 100 decode steps of >= 4.8 ms (16 GB of weights
    read at 3.35 TB/s), so <= 4 / 0.48 s = 8.3 requests/s; at 20 requests/s >= 11.7/s wait at
    the router, >= 175 by the first evaluation at 15 s: a queue of 175 per replica against a
    target of 2 wants ceil(1 x 175 / 2) replicas, held to max_replicas 4: 3 ordered at 15 s.
    (The queue signal had read only the replicas' queues, empty here: no replica was ordered.)"""
    r = inferlab.fleet(M, G, replicas=1, horizon_s=30.0, traffic={"rate": 20.0, "isl": 400, "osl": 100},
                       admission={"at": "router", "max_outstanding": 4},
                       autoscaler={"signal": "queue", "target": 2.0, "min_replicas": 1, "max_replicas": 4})
    assert _orders(r) == [15.0, 15.0, 15.0]


def test_autoscaler_acts_every_period_when_samples_are_sparser():
    """Samples every 40 s, autoscaler period 15 s: it acts at 15, 30, 45, ... (it had acted
    only at samples, 40 and 80 s: a period of 40 s). Overload from the start (2 requests/s
    of 3,000-token prompts and 400-token answers per replica against a concurrency target of 1)
    makes the first evaluation at 15 s order replicas."""
    r = inferlab.fleet(M, G, replicas=1, horizon_s=60.0, sample_s=40.0, traffic={"rate": 4.0, "isl": 3000, "osl": 400},
                       autoscaler={"signal": "concurrency", "target": 1.0, "min_replicas": 1, "max_replicas": 8,
                                   "period_s": 15.0})
    times = _orders(r)
    assert times and times[0] == 15.0
    assert set(times) <= {15.0, 30.0, 45.0}
    assert list(r.samples["t"]) == [0.0, 40.0]  # the samples keep their own period


def test_fleet_of_autoscaler_keeps_its_period_over_a_long_horizon():
    """fleet_of samples every horizon / 2000 (a day: 43.2 s); a pool's autoscaler of period
    15 s still acts at 15 s, not at the first sample past it (43.2 s)."""
    r = fleet_of([{**P, "replicas": 1, "autoscaler": {"signal": "concurrency", "target": 1.0, "max_replicas": 4}}],
                 traffic={"rate": 4.0, "isl": 3000, "osl": 400}, horizon_s=40.0, sample_s=30.0)
    assert _orders(r)[:1] == [15.0]


def test_a_start_count_above_max_replicas_is_cut_at_the_first_evaluation():
    """6 replicas at the start, max_replicas 3: the first evaluation (15 s) scales down to 3,
    as the HPA applies its bounds after its stabilization window; it had kept all 6 for the
    whole 300 s window."""
    r = inferlab.fleet(M, G, replicas=6, horizon_s=120.0, traffic={"rate": 0.2, "isl": 400, "osl": 60},
                       autoscaler={"signal": "concurrency", "target": 8, "min_replicas": 1, "max_replicas": 3})
    downs = [t for t, what, _ in r.events if what == "scale down"]
    assert downs == [15.0, 15.0, 15.0]
    s = r.samples
    assert np.all(s["ready"][s["t"] > 15.0] <= 3)  # (the sample at 15 s is taken before the evaluation)


@settings(max_examples=8, deadline=None)
@given(start=st.integers(0, 6), low=st.integers(1, 3), extra=st.integers(0, 3))
def test_ready_replicas_stay_within_the_bounds_after_the_first_evaluation(start, low, extra):
    high = low + extra
    r = inferlab.fleet(M, G, replicas=start, horizon_s=45.0, traffic={"rate": 0.2, "isl": 200, "osl": 20},
                       startup={"warm_pool": True, "preloaded_image": True, "local_weights": True,
                                "cached_engine": True},
                       autoscaler={"signal": "concurrency", "target": 8, "min_replicas": low, "max_replicas": high})
    s = r.samples
    assert np.all(s["ready"][s["t"] > 15.0] <= high)  # (the sample at 15 s precedes the evaluation)
    # replicas starting or serving from the first evaluation on: at least min_replicas, at most max_replicas
    for t, n in zip(s["t"], s["ready"] + s["starting"]):
        if t > 15.0:
            assert low <= n <= high


def test_availability_counts_only_replicas_taking_requests():
    """3 replicas, 3 needed; the autoscaler (period 15 s, window 60 s, min 1) wants 1 at every
    evaluation of a near-idle fleet, but its window holds the start's 3 until the evaluation at
    75 s (0 s < 75 - 60 s): two replicas drain at 75 s, so 3 take requests for 75 s of 1200 s:
    availability 75 / 1200 = 0.0625. Draining replicas (and stopped ones, which were never
    recorded) had counted as serving: 1.0."""
    r = inferlab.fleet(M, G, replicas=3, need=3, horizon_s=1200.0, traffic={"rate": 0.05, "isl": 400, "osl": 60},
                       autoscaler={"signal": "concurrency", "target": 8, "min_replicas": 1, "max_replicas": 3,
                                   "scale_down_delay_s": 60.0})
    assert [t for t, what, _ in r.events if what == "scale down"] == [75.0, 75.0]
    assert r.availability == pytest.approx(75.0 / 1200.0, rel=1e-12)


def test_availability_defaults_to_the_autoscaler_floor():
    """The same fleet without ``need``: an autoscaled fleet counts against its floor
    (min_replicas 1), and 1 to 3 replicas take requests all 1200 s: availability 1. Counted
    against its starting 3, a fleet that scales down at night had read 0.0625."""
    r = inferlab.fleet(M, G, replicas=3, horizon_s=1200.0, traffic={"rate": 0.05, "isl": 400, "osl": 60},
                       autoscaler={"signal": "concurrency", "target": 8, "min_replicas": 1, "max_replicas": 3,
                                   "scale_down_delay_s": 60.0})
    assert r.need == 1 and r.availability == 1.0
    from inferlab.fleet.autoscaler import Autoscaler
    from inferlab.fleet.pools import Pool, default_need

    scaled = Autoscaler(min_replicas=2, max_replicas=8)
    assert default_need((Pool(None, 4, scaled), Pool(None, 3))) == 2 + 3  # a floor, and a fixed pool's count
    assert default_need((Pool(None, 0),)) == 1


def test_the_router_queue_hands_a_request_only_to_a_pool_of_its_model():
    """Two pools serving models a and b, admission at the router: a's overflow waits for a's
    replica; b's replica, idle, had taken half of it."""
    traffic = [{"rate": 20, "isl": 400, "osl": 100, "model": "a"}, {"rate": 0.2, "isl": 400, "osl": 100, "model": "b"}]
    r = fleet_of([{**P, "serves": "a"}, {**P, "serves": "b"}], traffic=traffic, horizon_s=60.0,
                 admission={"at": "router", "max_outstanding": 4})
    req = build_requests(traffic, 60.0, 0)
    sent = r.replica >= 0
    served_by = np.array(["a", "b"])[r.replica_pool[r.replica[sent]]]
    assert np.sum(r.status == OK) > 100
    assert np.all(served_by == req.model[sent])


@pytest.mark.parametrize("kwargs,match", [
    ({"pools": [{**P, "replicas": "two"}]}, "pool 0: replicas must be an integer"),
    ({"pools": [{**P, "replicas": 1.5}]}, "pool 0: replicas must be an integer"),
    ({"pools": [{**P, "prefix_cache": "no"}]}, "pool 0: prefix_cache must be true or false"),
    ({"pools": [{**P, "limits": "x"}]}, "pool 0: limits must be a mapping"),
    ({"pools": ["x"]}, "pool 0: must be a mapping"),
    ({"pools": {"model": M}}, "pools must be a list"),
    ({"horizon_s": 0}, "horizon_s must be a finite number in \\(0"),
    ({"regions": [1]}, "regions must be a mapping"),
    ({"regions": {"rtt_s": {"a|b": "x"}}}, "rtt_s\\['a\\|b'\\] must be a number"),
    ({"regions": {"rtt_s": {"a|b": -1}}}, "rtt_s\\['a\\|b'\\] must be a finite number in \\[0"),
    ({"regions": {"rtt_s": {"ab": 0.1}}}, "key 'ab' must name two regions as 'a\\|b'"),
    ({"regions": {"rtt_s": {"a|a": 0.1}}}, "key 'a\\|a' must name two regions .* within a region the round trip is 0"),
    ({"regions": {"rtt_s": {"a|b": 0.1, "b|a": 0.2}}}, "'b\\|a' and 'a\\|b' give two round-trip times \\(0.2 and 0.1 s\\)"),
    ({"regions": {"spill": "x"}}, "regions.spill must be an integer"),
    ({"regions": {"quota_gpus": {"local": -1}}}, "quota_gpus\\['local'\\] must be between 0"),
    ({"regions": {"provider_quota_gpus": "x"}}, "provider_quota_gpus must be a mapping"),
])
def test_fleet_of_refuses_bad_pools_and_regions(kwargs, match):
    args = {"pools": [P], "traffic": T, "horizon_s": 60.0, **kwargs}
    with pytest.raises(SpecError, match=match):
        fleet_of(**args)


def test_fleet_refuses_a_prefix_cache_that_is_not_a_boolean():
    with pytest.raises(SpecError, match="prefix_cache must be true or false, got 'no'"):
        inferlab.fleet(M, G, traffic=T, horizon_s=60.0, prefix_cache="no")


def test_cli_cascade_share_that_is_not_a_number_is_one_line(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text(f"model: {M}\nhardware: {G}\nfleet:\n  hours: 0.01\n  traffic: {{rate: 1, isl: 100, osl: 10}}\n"
                    "  cascade: {model: llama-3.1-70b, tp: 4, share: abc}\n")
    out = subprocess.run([sys.executable, "-c", "import sys; from inferlab.cli.main import main; sys.exit(main())",
                          "fleet", str(path)], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "inferlab: error: f.yaml: fleet.cascade.share (the share of answers escalated) must be a number, got 'abc'"]


def test_a_cascades_fleet_blames_the_settings_both_share_on_the_fleet_not_the_cascade(tmp_path, capsys):
    # a misspelt router is the fleet's own key: its error had read "fleet.cascade (llama-3.1-70b): ..."
    from inferlab.cli.main import main

    path = tmp_path / "f.yaml"
    path.write_text(f"model: {M}\nhardware: {G}\nfleet:\n  hours: 0.01\n  router: cache-aware\n"
                    "  traffic: {rate: 1, isl: 100, osl: 10}\n  cascade: {model: llama-3.1-70b, tp: 4, share: 0.2}\n")
    assert main(["fleet", str(path)]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'cache_aware'" in err and "cascade" not in err


def test_a_round_trip_given_either_way_round_replaces_the_built_in_one():
    # the built-in table holds ap-southeast-2|us-east-1 at 0.2 s; a scenario naming the pair the
    # other way round at 0.3 s sets both directions (one had stayed 0.2 s)
    from inferlab.fleet.pools import regions_of
    r = regions_of({"rtt_s": {"us-east-1|ap-southeast-2": 0.3}})
    assert r.rtt("ap-southeast-2", "us-east-1") == r.rtt("us-east-1", "ap-southeast-2") == 0.3
    assert r.rtt("us-east-1", "eu-west-1") == 0.070  # the others as built in


def test_a_cascade_to_the_fleets_own_model_is_refused(monkeypatch):
    # escalating an answer to the model that gave it, in its own format, changes nothing a cascade
    # is for; the model's repository name is the same model; refused before either fleet runs
    from inferlab.fleet import cascade

    base = {"model": M, "hardware": G, "horizon_s": 60.0, "traffic": T}
    ran = []
    monkeypatch.setattr(cascade, "fleet", lambda **kw: ran.append(kw))
    for name in (M, "meta-llama/Llama-3.1-8B-Instruct"):
        with pytest.raises(SpecError, match=f"fleet.cascade: model '{name}' is the fleet's own model \\({M}\\)"):
            cascade.run_scenario({**base, "cascade": {"model": name, "share": 0.2}})
    assert ran == []
    monkeypatch.undo()
    # the same model in another format answers otherwise: escalated to
    r = cascade.run_scenario({**base, "precision": "fp8", "cascade": {"model": M, "precision": "bf16", "share": 0.2}})
    assert len(r.large.arrival) > 0


def test_a_reclaimed_spot_replica_without_an_autoscaler_is_replaced():
    """Two spot replicas, each reclaimed at 6 an hour (every 10 minutes on average), no
    autoscaler: a managed group keeps its size, so every reclaim orders a replacement at the
    notice and two replicas are always running or starting. Without it the fleet had shrunk
    to none within minutes and served 996 of 7,233 requests."""
    r = inferlab.fleet(M, G, replicas=2, horizon_s=3600.0, traffic={"rate": 2, "isl": 400, "osl": 60},
                       pricing={"on_demand_usd_per_hour": 3.0, "spot_share": 1.0, "spot_usd_per_hour": 1.0,
                                "spot_reclaims_per_h": 6.0})
    what = [e[1] for e in r.events]
    assert what.count("reclaim") >= 3
    assert what.count("order") == 2 + what.count("reclaim")
    assert np.sum(r.status == OK) > 0.9 * len(r.status)


def test_a_restarted_replica_reads_busy_from_its_first_sample():
    """One replica at 5 requests/s failing every ~6 minutes (MTBF 0.1 h), restarted 40 s later:
    the restarted engine counts its tokens from zero, and the utilization marks must too. They
    had kept the old engine's count, so the first sample after each restart read 0 (idle) while
    the replica served, and the autoscaler's utilization signal with it."""
    r = inferlab.fleet(M, G, replicas=1, horizon_s=1800.0, traffic={"rate": 5, "isl": 400, "osl": 100},
                       failures={"replica_mtbf_h": 0.1, "detection_s": 10.0, "restart_s": 30.0}, sample_s=10.0, seed=1)
    t, u = np.array(r.samples["t"]), np.array(r.samples["utilization"])
    ready = [when for when, what, _ in r.events if what == "ready"]
    assert len(ready) >= 2
    for when in ready:
        after = u[t > when]
        if after.size:
            assert after[0] > 0.0


def test_the_start_orders_its_replicas_in_time_linear_in_their_number(monkeypatch):
    """Each replica ordered at the start had counted every replica before it (the GPUs held
    against a quota, and the replicas serving): quadratic, so the 100,000 replicas a fleet may
    start with ran for hours before the first request. Without a quota the count is not needed,
    and the replicas serving at the start are recorded once."""
    from inferlab.fleet.replicas import Replica

    reads = []
    state = Replica.state
    monkeypatch.setattr(Replica, "state", property(lambda r: reads.append(1) or state.fget(r), state.fset))
    n = 400
    r = inferlab.fleet(M, G, replicas=n, horizon_s=1.0, traffic=T)
    assert r.availability == 1.0 and len(_orders(r, after=-1.0)) == n
    assert len(reads) < 10 * n


def test_a_spot_price_without_a_spot_share_is_said():
    # a spot price beside spot_share 0 puts no replica on spot: said in the notes, not dropped
    pricing = {"on_demand_usd_per_hour": 3.0, "spot_usd_per_hour": 1.0}
    r = inferlab.fleet(M, G, horizon_s=60.0, traffic=T, pricing=pricing)
    assert any("a spot price (1 USD/h) with spot_share 0: no replica runs on spot" in n for n in r.notes)
    pools = fleet_of([{**P, "pricing": pricing}, {**P, "pricing": pricing}], traffic=T, horizon_s=60.0)
    assert sum("with spot_share 0" in n for n in pools.notes) == 1  # once for two pools priced alike
    plain = inferlab.fleet(M, G, horizon_s=60.0, traffic=T, pricing={"on_demand_usd_per_hour": 3.0})
    assert not any("spot" in n for n in plain.notes)
