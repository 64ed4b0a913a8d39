"""Economics: cost per token, API vs dedicated, capacity mix, cold start.

Hand derivations are written out next to each expected value.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import Q, SpecError, UnitError
from inferlab.economics import (
    BreakEven, CapacityPlan, ColdStart, Headroom, TrafficCosts, api_usd_per_request, api_vs_dedicated, cold_start,
    cost_per_million_tokens, plan_capacity, replicas_needed, reserved_replicas, traffic_costs,
    utilization_for_cost, warm_headroom,
)
from inferlab.inputs.resolve import deployment

prices = st.floats(0.01, 100.0)
shares = st.floats(0.01, 1.0)


# --- cost per token --------------------------------------------------------------------

def test_cost_per_million_tokens_by_hand():
    # 2.95 $/h over 1000 tok/s x 3600 s = 3.6e6 tok/h: 2.95 / 3.6 = 0.81944 $/M tokens
    assert cost_per_million_tokens(2.95, 1, 1000.0, 1.0) == pytest.approx(2.95 / 3.6, rel=1e-12)
    assert cost_per_million_tokens(2.95, 1, 1000.0) == pytest.approx(0.819444, rel=1e-6)
    # 8 GPUs at 2 $/h = 16 $/h over 4000 tok/s x 3600 x 0.5 = 7.2e6 tok/h: 16 / 7.2 = 2.2222 $/M
    assert cost_per_million_tokens(2.0, 8, 4000.0, 0.5) == pytest.approx(16 / 7.2, rel=1e-12)


def test_utilization_thirty_percent_costs_three_times_ninety():
    busy_30 = cost_per_million_tokens(2.95, 4, 2500.0, 0.3)
    busy_90 = cost_per_million_tokens(2.95, 4, 2500.0, 0.9)
    assert busy_30 / busy_90 == pytest.approx(3.0, rel=1e-12)


def test_cost_broadcasts_and_takes_quantities():
    out = cost_per_million_tokens([1.0, 2.0, 3.0], 1, [[1000.0], [2000.0]])
    assert out.shape == (2, 3)
    assert out[1, 2] == pytest.approx(3.0 / 7.2, rel=1e-12)
    assert cost_per_million_tokens(Q("2.95 USD/hour"), 1, Q("60000 tok/minute")) == pytest.approx(2.95 / 3.6)
    assert cost_per_million_tokens("$2.95/hour", 1, "1 ktok/s") == pytest.approx(2.95 / 3.6)
    with pytest.raises(UnitError, match="tokens_per_s"):
        cost_per_million_tokens(2.95, 1, Q("2.95 USD/hour"))  # swapped: a price where a rate goes


def test_utilization_for_cost_inverts_cost():
    u = utilization_for_cost(2.0, 2.95, 1, 1000.0)
    assert u == pytest.approx(2.95 / 3.6 / 2.0)
    assert cost_per_million_tokens(2.95, 1, 1000.0, u) == pytest.approx(2.0)


@pytest.mark.parametrize("kwargs, message", [
    ({"usd_per_gpu_hour": -1.0}, "usd_per_gpu_hour must be >= 0"),
    ({"utilization": 0.0}, r"utilization must be in \(0, 1\]"),
    ({"utilization": 1.5}, r"utilization must be in \(0, 1\]"),
    ({"tokens_per_s": 0.0}, "tokens_per_s must be > 0"),
    ({"num_gpus": -2}, "num_gpus must be > 0"),
    ({"tokens_per_s": float("nan")}, "tokens_per_s must be finite"),
])
def test_cost_errors(kwargs, message):
    args = {"usd_per_gpu_hour": 2.95, "num_gpus": 1, "tokens_per_s": 1000.0, "utilization": 1.0, **kwargs}
    with pytest.raises(SpecError, match=message):
        cost_per_million_tokens(**args)


@settings(max_examples=50, deadline=None)
@given(prices, prices, st.floats(1.0, 1e5), shares, shares)
def test_cost_monotone_in_price_and_utilization(p1, p2, rate, u1, u2):
    lo, hi = sorted((p1, p2))
    assert cost_per_million_tokens(lo, 2, rate, u1) <= cost_per_million_tokens(hi, 2, rate, u1)
    ua, ub = sorted((u1, u2))
    assert cost_per_million_tokens(p1, 2, rate, ub) <= cost_per_million_tokens(p1, 2, rate, ua)


# --- API vs dedicated ------------------------------------------------------------------

OFFER = {"usd_per_million_input": 3.0, "usd_per_million_output": 15.0, "isl": 1000, "osl": 200,
         "usd_per_replica_hour": 8 * 2.95, "requests_per_s_per_replica": 10.0}


def test_break_even_by_hand():
    be = api_vs_dedicated(**OFFER)
    # API: 1000 x 3 / 1e6 + 200 x 15 / 1e6 = 0.003 + 0.003 = 0.006 $/request
    assert be.api_usd_per_request == pytest.approx(0.006)
    # one replica: 8 x 2.95 = 23.6 $/h for 10 req/s x 3600 = 36,000 req/h: 6.5556e-4 $/request
    assert be.dedicated_usd_per_request == pytest.approx(23.6 / 36000)
    # u* = 6.5556e-4 / 0.006 = 0.10926; pays from u* x 10 = 1.0926 req/s
    assert be.break_even_utilization == pytest.approx(23.6 / 36000 / 0.006)
    assert be.break_even_request_rate == pytest.approx(1.0925926, rel=1e-6)
    # n0 = ceil(1 / (1 - 0.109)) = 2: from the first step on it always pays
    assert be.always_cheaper_request_rate == pytest.approx(be.break_even_request_rate)


def test_whole_replicas_make_a_step_function():
    # API: 0 in, 10 $/M out, 1000 out tokens: 0.01 $/req; C = 1 req/s; H = 3600 x 0.01 x 0.75 = 27 $/h
    be = api_vs_dedicated(usd_per_million_input=0.0, usd_per_million_output=10.0, isl=0, osl=1000,
                          usd_per_replica_hour=27.0, requests_per_s_per_replica=1.0)
    assert be.break_even_utilization == pytest.approx(0.75)
    assert be.break_even_request_rate == pytest.approx(0.75)
    # n0 = ceil(1 / 0.25) = 4: always pays from (4 - 1) x 0.75 x 1 = 2.25 req/s; in (2, 2.25) the
    # third replica (81 $/h) costs more than the API (3600 x 0.01 x 2.1 = 75.6 $/h)
    assert be.always_cheaper_request_rate == pytest.approx(2.25)
    rates = np.linspace(0.0, 6.0, 6001)
    t = be.costs(rates)
    assert t.replicas[rates.tolist().index(2.1)] == 3
    dedicated = t.cheaper == "dedicated"
    assert rates[np.argmax(dedicated)] == pytest.approx(0.75)
    assert np.all(dedicated[rates >= 2.25]) and not dedicated[rates == 2.2].any()
    # inside step n dedicated pays from n u* C: [0.75, 1], [1.5, 2], [2.25, 3]
    assert dedicated[rates == 1.5].all() and not dedicated[rates == 1.4].any()


def test_costs_over_traffic_by_hand():
    t = traffic_costs([0.0, 0.3, 10.0, 10.5], min_replicas=1, **OFFER)
    assert isinstance(t, TrafficCosts)
    # 10.5 req/s needs ceil(10.5 / 10) = 2 replicas = 47.2 $/h; the API bills 10.5 x 3600 x 0.006 = 226.8 $/h
    assert t.replicas.tolist() == [1, 1, 1, 2]
    assert t.dedicated_usd_per_hour.tolist() == pytest.approx([23.6, 23.6, 23.6, 47.2])
    assert t.api_usd_per_hour.tolist() == pytest.approx([0.0, 6.48, 216.0, 226.8])
    assert t.cheaper.tolist() == ["api", "api", "dedicated", "dedicated"]
    assert api_vs_dedicated(**OFFER).costs([0.0], min_replicas=0).replicas.tolist() == [0]
    # 0.3 / 0.1 = 3.0000000000000004 is still 3 replicas
    assert api_vs_dedicated(**{**OFFER, "requests_per_s_per_replica": 0.1}).costs(0.3).replicas == 3
    assert "cheaper" in str(t) and json.dumps(t.to_dict())


def test_capacity_in_output_tokens_is_the_same_offer():
    by_tokens = api_vs_dedicated(**{**OFFER, "requests_per_s_per_replica": None},
                                 output_tokens_per_s_per_replica=2000.0)  # 2000 / 200 = 10 req/s
    assert by_tokens.break_even_request_rate == pytest.approx(api_vs_dedicated(**OFFER).break_even_request_rate)


def test_dedicated_that_never_pays():
    be = api_vs_dedicated(**{**OFFER, "usd_per_replica_hour": 300.0})  # 300 / 36000 > 0.006 per request
    assert be.break_even_utilization > 1
    assert math.isinf(be.break_even_request_rate) and math.isinf(be.always_cheaper_request_rate)
    assert "never" in str(be)
    assert json.dumps(be.to_dict(), allow_nan=True)


def test_break_even_broadcasts():
    be = api_vs_dedicated(**{**OFFER, "usd_per_replica_hour": [11.8, 23.6, 47.2]})
    assert np.asarray(be.break_even_request_rate) == pytest.approx(np.array([0.5, 1.0, 2.0]) * 1.0925926, rel=1e-6)
    assert len(str(be).splitlines()) == 3 + 3  # title, header, rule, one row per price


@pytest.mark.parametrize("change, message", [
    ({"usd_per_million_input": -3.0}, "usd_per_million_input must be >= 0"),
    ({"usd_per_replica_hour": -1.0}, "usd_per_replica_hour must be >= 0"),
    ({"isl": 0, "osl": 0}, r"isl \+ osl must be > 0"),
    ({"requests_per_s_per_replica": None}, "exactly one of"),
    ({"output_tokens_per_s_per_replica": 100.0}, "exactly one of"),
    ({"requests_per_s_per_replica": 0.0}, "requests_per_s_per_replica must be > 0"),
])
def test_break_even_errors(change, message):
    with pytest.raises(SpecError, match=message):
        api_vs_dedicated(**{**OFFER, **change})


def test_negative_traffic_is_refused():
    with pytest.raises(SpecError, match="request_rate must be >= 0"):
        api_vs_dedicated(**OFFER).costs([1.0, -1.0])


@settings(max_examples=50, deadline=None)
@given(st.floats(0.1, 50.0), st.floats(0.1, 10.0), st.floats(0.1, 10.0))
def test_break_even_traffic_scales_with_price_ratio(hourly, k_dedicated, k_api):
    offer = {**OFFER, "usd_per_replica_hour": hourly, "requests_per_s_per_replica": 1e4}
    base = api_vs_dedicated(**offer).break_even_request_rate
    dearer = api_vs_dedicated(**{**offer, "usd_per_replica_hour": hourly * k_dedicated}).break_even_request_rate
    api = api_vs_dedicated(**{**offer, "usd_per_million_input": 3.0 * k_api,
                              "usd_per_million_output": 15.0 * k_api}).break_even_request_rate
    # lambda* = H / (3600 c): proportional to the dedicated price over the API price
    assert dearer == pytest.approx(base * k_dedicated, rel=1e-9)
    assert api == pytest.approx(base / k_api, rel=1e-9)


# --- capacity mix ----------------------------------------------------------------------

TOY = [1, 2, 4, 3]


def test_reserved_rule_on_a_toy_curve_by_hand():
    # p_res / p_od = 2.2 / 4 = 0.55. Share of hours with demand >= r:
    #   r=1: 4/4 = 1.00 > 0.55 reserve; r=2: 3/4 = 0.75 > 0.55 reserve; r=3: 2/4 = 0.50 no; r=4: 1/4 no
    assert reserved_replicas(TOY, reserved_usd_per_hour=2.2, on_demand_usd_per_hour=4.0) == 2
    # brute force, per R: R x 2.2 x 4 h + on-demand replica-hours sum(max(d - R, 0)) x 4
    #   R=0: 0 + 10 x 4 = 40.0; R=1: 8.8 + 6 x 4 = 32.8; R=2: 17.6 + 3 x 4 = 29.6
    #   R=3: 26.4 + 1 x 4 = 30.4; R=4: 35.2 + 0 = 35.2
    costs = [plan_capacity(TOY, reserved_usd_per_hour=2.2, on_demand_usd_per_hour=4.0, reserved=r).total_usd
             for r in range(5)]
    assert costs == pytest.approx([40.0, 32.8, 29.6, 30.4, 35.2])
    plan = plan_capacity(TOY, reserved_usd_per_hour=2.2, on_demand_usd_per_hour=4.0)
    assert plan.reserved == 2 and plan.total_usd == pytest.approx(29.6)
    assert plan.on_demand.tolist() == [0, 0, 2, 1] and plan.idle_reserved.tolist() == [1, 0, 0, 0]
    assert plan.all_on_demand_usd == pytest.approx(40.0)


def test_spot_with_a_safety_share_by_hand():
    # spot at 1 $/h available 90%: expected 0.9 x 1 + 0.1 x 4 = 1.3 $/h. Non-spot floor ceil(0.5 d) = [1, 1, 2, 2]
    # saving of reserving r (vs 4 x 2.2 = 8.8): r=1: 4 h on demand = 16 > 8.8; r=2: 2 h on demand (h2, h3)
    # + 1 h on spot (h1) = 8 + 1.3 = 9.3 > 8.8; r=3: 2 h on spot = 2.6 < 8.8. So R = 2, and the rest on spot:
    # 17.6 + spot [0, 0, 2, 1] x 1.3 = 17.6 + 3.9 = 21.5
    plan = plan_capacity(TOY, reserved_usd_per_hour=2.2, on_demand_usd_per_hour=4.0, spot_usd_per_hour=1.0,
                         spot_availability=0.9, min_non_spot_share=0.5)
    assert plan.reserved == 2
    assert plan.spot.tolist() == [0, 0, 2, 1] and plan.on_demand.tolist() == [0, 0, 0, 0]
    assert plan.total_usd == pytest.approx(21.5)
    assert plan.mix == pytest.approx({"reserved_used": 7, "reserved_idle": 1, "on_demand": 0, "spot": 3,
                                      "spot_fallback": 0.3})
    # all on non-spot (share 1) is the plan without spot
    strict = plan_capacity(TOY, reserved_usd_per_hour=2.2, on_demand_usd_per_hour=4.0, spot_usd_per_hour=1.0,
                           min_non_spot_share=1.0)
    assert strict.total_usd == pytest.approx(29.6) and not strict.spot.any()
    # spot dearer than on demand once reclaims are paid for is never used
    dear = plan_capacity(TOY, reserved_usd_per_hour=2.2, on_demand_usd_per_hour=4.0, spot_usd_per_hour=5.0)
    assert not dear.spot.any()


curves = st.lists(st.integers(0, 12), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(curves, st.floats(0.5, 5.0), st.floats(0.05, 1.2))
def test_classic_rule_matches_brute_force(demand, on_demand, ratio):
    rule = reserved_replicas(demand, reserved_usd_per_hour=ratio * on_demand, on_demand_usd_per_hour=on_demand)
    costs = [plan_capacity(demand, reserved_usd_per_hour=ratio * on_demand, on_demand_usd_per_hour=on_demand,
                           reserved=r).total_usd for r in range(max(demand) + 2)]
    best = plan_capacity(demand, reserved_usd_per_hour=ratio * on_demand, on_demand_usd_per_hour=on_demand)
    assert best.reserved == rule
    assert best.total_usd == pytest.approx(min(costs), rel=1e-12, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(curves, st.floats(0.5, 5.0), st.floats(0.05, 1.2), st.floats(0.05, 1.2), shares, st.floats(0.0, 1.0))
def test_spot_plan_matches_brute_force(demand, on_demand, ratio, spot_ratio, availability, safety):
    kw = {"reserved_usd_per_hour": ratio * on_demand, "on_demand_usd_per_hour": on_demand,
          "spot_usd_per_hour": spot_ratio * on_demand, "spot_availability": availability,
          "min_non_spot_share": safety}
    best = plan_capacity(demand, **kw)
    costs = [plan_capacity(demand, reserved=r, **kw).total_usd for r in range(max(demand) + 2)]
    assert best.total_usd == pytest.approx(min(costs), rel=1e-12, abs=1e-9)
    assert np.all(best.spot + best.on_demand + np.minimum(best.reserved, best.demand) == best.demand)


def test_demand_in_requests_per_second():
    # 25 req/s at 10 req/s per replica needs ceil(2.5) = 3 replicas; fractional replicas round up too
    assert replicas_needed([0.0, 25.0, 30.0], 10.0).tolist() == [0, 3, 3]
    assert replicas_needed([0.2, 2.0, 2.5]).tolist() == [1, 2, 3]
    day = 10.0 + 30.0 * np.sin(np.linspace(0, np.pi, 24)) ** 2  # req/s over 24 hours
    plan = plan_capacity(day, reserved_usd_per_hour=1.6, on_demand_usd_per_hour=2.95, requests_per_s_per_replica=4.0)
    assert isinstance(plan, CapacityPlan) and plan.demand.size == 24
    assert plan.total_usd < plan.all_on_demand_usd
    text = str(plan)
    assert "reserved replicas" in text and "replica-hours" in text and len(text.splitlines()) == 24 + 4
    assert json.dumps(plan.to_dict())


def test_period_length_scales_cost():
    hourly = plan_capacity(TOY, reserved_usd_per_hour=2.2, on_demand_usd_per_hour=4.0)
    half = plan_capacity(TOY, reserved_usd_per_hour=2.2, on_demand_usd_per_hour=4.0, period_s=Q("30 min"))
    assert half.total_usd == pytest.approx(hourly.total_usd / 2)


@pytest.mark.parametrize("demand, kwargs, message", [
    ([1, -2, 3], {}, "period 1 has -2.0"),
    ([[1, 2], [3, 4]], {}, "1-D curve"),
    ([], {}, "demand is empty"),
    (TOY, {"reserved_usd_per_hour": -1.0}, "reserved_usd_per_hour must be >= 0"),
    (TOY, {"min_non_spot_share": 1.5}, r"min_non_spot_share must be in \[0, 1\]"),
    (TOY, {"spot_availability": -0.1}, r"spot_availability must be in \[0, 1\]"),
    (TOY, {"reserved": -1}, "reserved must be a whole number"),
    (TOY, {"requests_per_s_per_replica": 0.0}, "requests_per_s_per_replica must be > 0"),
])
def test_capacity_errors(demand, kwargs, message):
    args = {"reserved_usd_per_hour": 2.2, "on_demand_usd_per_hour": 4.0, **kwargs}
    with pytest.raises(SpecError, match=message):
        plan_capacity(demand, **args)


# --- cold start ------------------------------------------------------------------------

def test_cold_start_llama_70b_by_hand():
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=4, precision="bf16")
    cs = cold_start(dep, storage_bytes_per_s=Q("2 GB/s"))
    # 70.55e9 parameters x 2 B = 141.1 GB; tp=4: 35.28 GB per GPU. The 4 GPUs sit in one node
    # and share its 2 GB/s: 4 x 35.28 GB / 2 GB/s = 141.1 / 2 = 70.55 s
    assert cs.weight_bytes_per_gpu == pytest.approx(141.107e9 / 4, rel=1e-4)
    assert cs.weight_load_s == pytest.approx(70.55, rel=1e-3)
    # defaults: provisioning 180 s, image 10 GB / 40 MB/s = 250 s, warm-up 60 s
    assert cs.image_pull_s == pytest.approx(250.0)
    assert cs.total_s == pytest.approx(180 + 250 + 70.55 + 60, rel=1e-4)
    same = cold_start(weight_bytes_per_gpu=cs.weight_bytes_per_gpu, num_gpus=4, storage_bytes_per_s=2e9)
    assert same.total_s == pytest.approx(cs.total_s)
    assert "weight load" in str(cs) and json.dumps(cs.to_dict())


def test_cold_start_nodes_load_in_parallel():
    # 16 GPUs in nodes of 8: each node reads 8 x W at its own rate, in parallel with the other
    one_node = cold_start(weight_bytes_per_gpu=20e9, num_gpus=8, storage_bytes_per_s=2e9, provisioning_s=0,
                          image_bytes=0, warmup_s=0)
    two_nodes = cold_start(weight_bytes_per_gpu=20e9, num_gpus=16, storage_bytes_per_s=2e9, provisioning_s=0,
                           image_bytes=0, warmup_s=0)
    assert one_node.total_s == two_nodes.total_s == pytest.approx(8 * 20e9 / 2e9)  # 80 s
    alone = cold_start(weight_bytes_per_gpu=20e9, num_gpus=8, gpus_per_node=1, storage_bytes_per_s=2e9)
    assert alone.weight_load_s == pytest.approx(10.0)


def test_cold_start_broadcasts():
    cs = cold_start(weight_bytes_per_gpu=35e9, num_gpus=4, storage_bytes_per_s=[1e9, 2e9, 4e9])
    assert np.asarray(cs.weight_load_s) == pytest.approx([140.0, 70.0, 35.0])
    assert len(str(cs).splitlines()) == 3 + 3


@settings(max_examples=40, deadline=None)
@given(st.floats(1e8, 1e10), st.floats(1e8, 1e10), st.floats(1e6, 1e9), st.floats(1e6, 1e9))
def test_more_bandwidth_never_slows_a_cold_start(s1, s2, r1, r2):
    lo, hi = sorted((s1, s2))
    rlo, rhi = sorted((r1, r2))
    slow = cold_start(weight_bytes_per_gpu=35e9, num_gpus=4, storage_bytes_per_s=lo, registry_bytes_per_s=rlo)
    fast = cold_start(weight_bytes_per_gpu=35e9, num_gpus=4, storage_bytes_per_s=hi, registry_bytes_per_s=rhi)
    assert fast.total_s <= slow.total_s


@pytest.mark.parametrize("kwargs, message", [
    ({}, "either a deployment or weight_bytes_per_gpu"),
    ({"weight_bytes_per_gpu": -1.0}, "weight_bytes_per_gpu must be >= 0"),
    ({"weight_bytes_per_gpu": 1e9, "storage_bytes_per_s": 0.0}, "storage_bytes_per_s must be > 0"),
    ({"weight_bytes_per_gpu": 1e9, "warmup_s": -5.0}, "warmup_s must be >= 0"),
])
def test_cold_start_errors(kwargs, message):
    with pytest.raises(SpecError, match=message):
        cold_start(**kwargs)


def test_cold_start_units_are_checked():
    with pytest.raises(UnitError, match="storage_bytes_per_s"):
        cold_start(weight_bytes_per_gpu=1e9, storage_bytes_per_s=Q("2 GB"))


# --- warm headroom ---------------------------------------------------------------------

def test_headroom_for_a_ramp_by_hand():
    # traffic rises 0.6 req/s per minute = 0.01 req/s^2; lead = 30 s reaction + 300 s cold start = 330 s;
    # rise 0.01 x 330 = 3.3 req/s over 2 req/s per replica = 1.65 -> keep 2 warm
    h = warm_headroom(requests_per_s_per_replica=2.0, cold_start_s=300.0, reaction_s=30.0,
                      ramp_requests_per_s2=Q("0.6 request/s/minute"), usd_per_replica_hour=11.8)
    assert isinstance(h, Headroom)
    assert h.lead_time_s == pytest.approx(330.0) and h.demand_rise == pytest.approx(3.3)
    assert h.extra_replicas == pytest.approx(1.65) and h.extra_replicas_whole == 2
    assert h.usd_per_hour == pytest.approx(23.6)
    # without headroom: 0.01 x 330^2 / 2 = 544.5 requests beyond capacity
    assert h.backlog_requests == pytest.approx(544.5)
    assert "keep warm" in str(h) and json.dumps(h.to_dict())


def test_headroom_for_a_step_and_from_a_cold_start():
    cs = cold_start(weight_bytes_per_gpu=35e9, num_gpus=4, storage_bytes_per_s=2e9)  # 560 s
    # a jump of 5 req/s needs 5 / 2 = 2.5 -> 3 replicas warm whatever the lead time; 5 x 570 s backlog
    h = warm_headroom(requests_per_s_per_replica=2.0, cold_start_s=cs, step_requests_per_s=5.0, reaction_s=10.0)
    assert h.lead_time_s == pytest.approx(570.0)
    assert h.extra_replicas_whole == 3 and h.backlog_requests == pytest.approx(2850.0)
    assert math.isnan(h.usd_per_hour)


def test_headroom_errors():
    with pytest.raises(SpecError, match="ramp_requests_per_s2 must be >= 0"):
        warm_headroom(requests_per_s_per_replica=2.0, cold_start_s=60.0, ramp_requests_per_s2=-1.0)
    with pytest.raises(SpecError, match="requests_per_s_per_replica must be > 0"):
        warm_headroom(requests_per_s_per_replica=0.0, cold_start_s=60.0)
    with pytest.raises(UnitError, match="ramp_requests_per_s2"):
        warm_headroom(requests_per_s_per_replica=2.0, cold_start_s=60.0, ramp_requests_per_s2=Q("1 request/s"))


def test_results_are_frozen():
    be = api_vs_dedicated(**OFFER)
    with pytest.raises(AttributeError):
        be.usd_per_replica_hour = 1.0  # type: ignore[misc]
    assert isinstance(be, BreakEven) and isinstance(cold_start(weight_bytes_per_gpu=1e9), ColdStart)
    assert api_usd_per_request(3.0, 15.0, 1000, 200) == pytest.approx(0.006)


def test_table_numbers_are_never_scientific_past_their_digits():
    # four significant digits up to 9,999; whole numbers with separators from 10,000 (a P99 TTFT
    # of 720,812 ms had printed as 7.208e+05)
    from inferlab.economics._common import fmt

    assert fmt(720812.3) == "720,812" and fmt(12345.6) == "12,346" and fmt(1234.56) == "1235"
    assert fmt(0.5) == "0.5" and fmt(float("nan")) == "-" and fmt(float("inf")) == "never"


def test_cold_start_takes_the_public_deployment_forms():
    import inferlab
    from inferlab.economics import cold_start

    est = inferlab.estimate("llama-3.1-70b", "h100-sxm", tp=4)
    dep = inferlab.Deployment(model="llama-3.1-70b", hardware="h100-sxm", layout={"tp": 4})
    assert cold_start(est).total_s == cold_start(dep).total_s == cold_start(est.deployment).total_s
    with pytest.raises(inferlab.SpecError, match="must be an inferlab.Deployment, an estimate"):
        cold_start("llama-3.1-70b")


def test_a_free_api_never_breaks_even_and_says_so_in_json():
    import json

    from inferlab.economics import api_vs_dedicated
    from inferlab.errors import SpecError

    b = api_vs_dedicated(usd_per_million_input=0, usd_per_million_output=0, isl=1500, osl=300,
                         usd_per_replica_hour=11.8, requests_per_s_per_replica=5)
    data = json.loads(json.dumps(b.to_dict(), allow_nan=False))  # no Infinity: null
    assert data["break_even_request_rate"] is None
    several = api_vs_dedicated(usd_per_million_input=0.6, usd_per_million_output=[1.0, 2.4, 10], isl=1500, osl=300,
                               usd_per_replica_hour=11.8, requests_per_s_per_replica=5)
    with pytest.raises(SpecError, match="one set of prices"):
        several.costs([0.5, 5])


def test_arrays_that_do_not_go_together_are_named():
    from inferlab.economics import cost_per_million_tokens
    from inferlab.errors import SpecError

    with pytest.raises(SpecError, match=r"cost_per_million_tokens: the arrays given do not go together "
                                        r"\(usd_per_gpu_hour \(2,\), tokens_per_s \(3,\)\)"):
        cost_per_million_tokens([1, 2], 1, [1000, 2000, 3000])  # had been numpy's bare broadcast error


def test_a_boolean_or_a_fraction_of_a_gpu_is_refused():
    """The scenario loader refuses booleans; the functions had read True as 1.0 and taken 1.5 GPUs."""
    from inferlab.economics import api_vs_dedicated, cold_start

    with pytest.raises(SpecError, match="requests_per_s_per_replica must be a number in request/second, got True"):
        api_vs_dedicated(usd_per_million_input=1, usd_per_million_output=1, isl=100, osl=100,
                         usd_per_replica_hour=2, requests_per_s_per_replica=True)
    with pytest.raises(SpecError, match="num_gpus must be a whole number of GPUs, got 1.5"):
        cold_start(weight_bytes_per_gpu=1e9, num_gpus=1.5)
    assert cold_start(weight_bytes_per_gpu=1e9, num_gpus=2).weight_bytes_per_gpu == 1e9
