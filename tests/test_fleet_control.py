"""The fleet's control loop and its inputs, from a bug hunt: the autoscaler acts every
``period_s`` and sees the router's queue, the start count is held to ``max_replicas``,
availability counts only replicas taking requests, the router's queue hands a request only
to a pool of its model, and fleet_of's pools and regions refuse what they cannot use."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import inferlab
from inferlab.fleet import fleet_of

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
