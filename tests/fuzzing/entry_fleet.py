"""``inferlab.fleet``: replicas, routers, admission, autoscalers, failures and traffic
classes, valid and invalid mixed, over at most a minute of traffic so each call is fast."""

from hypothesis import strategies as st

import inferlab

from . import Entry, finite_numbers

_JUNK = st.one_of(st.none(), st.booleans(), st.text(max_size=4), st.floats(allow_nan=True, allow_infinity=True),
                  st.integers(-2**40, 2**40), st.just({}), st.lists(st.integers(-2, 2), max_size=2))


#: junk for a rate: invalid values, never a valid rate far past the minute of traffic this
#: entry keeps each call to (262,208 req/s is valid, and simulating it takes minutes)
_JUNK_RATE = st.one_of(st.none(), st.booleans(), st.text(max_size=4), st.just(float("nan")), st.just(float("inf")),
                       st.just(1e30), st.integers(-2**40, -1), st.just({}))


def _mostly(valid, invalid):
    return st.integers(0, 7).flatmap(lambda i: valid if i else invalid)


_SHAPES = st.sampled_from(["constant", "daily", "ramp", "burst", "square"])
_CLASS = st.fixed_dictionaries(
    {"rate": _mostly(st.floats(0.0, 30.0), _JUNK_RATE)},
    optional={"shape": _mostly(_SHAPES, _JUNK), "peak_rate": _mostly(st.floats(0.0, 30.0), _JUNK_RATE),
              "start_s": _mostly(st.floats(0.0, 30.0), _JUNK), "end_s": _mostly(st.floats(0.0, 60.0), _JUNK),
              "isl": _mostly(st.integers(1, 3000), _JUNK), "osl": _mostly(st.integers(1, 300), _JUNK),
              "prefix": _mostly(st.sampled_from(["sessions:turns=2,think=1", "shared:tokens=256,groups=4"]), _JUNK),
              "amplitude": _mostly(st.floats(0.0, 1.0), _JUNK), "bogus": _JUNK})
_INPUTS = st.fixed_dictionaries(
    {"traffic": _mostly(st.one_of(_CLASS, st.lists(_CLASS, min_size=1, max_size=2)), _JUNK),
     "horizon_s": _mostly(st.floats(1.0, 60.0), _JUNK)},
    optional={"replicas": _mostly(st.integers(0, 4), _JUNK),
              "router": _mostly(st.sampled_from(["round_robin", "random", "least_outstanding", "least_kv",
                                                 "cache_aware", "cache_awre"]), _JUNK),
              "admission": _mostly(st.fixed_dictionaries({}, optional={
                  "queue_limit": _mostly(st.integers(0, 64), _JUNK), "timeout_s": _mostly(st.floats(0.1, 30), _JUNK),
                  "at": _mostly(st.sampled_from(["replica", "router"]), _JUNK)}), _JUNK),
              "autoscaler": _mostly(st.fixed_dictionaries({}, optional={
                  "signal": _mostly(st.sampled_from(["queue", "utilization", "concurrency", "kv", "rate"]), _JUNK),
                  "target": _mostly(st.floats(0.1, 64), _JUNK), "max_replicas": _mostly(st.integers(1, 6), _JUNK),
                  "period_s": _mostly(st.floats(1.0, 30.0), _JUNK)}), _JUNK),
              "failures": _mostly(st.fixed_dictionaries({}, optional={
                  "replica_mtbf_h": _mostly(st.floats(0.001, 1e4), _JUNK),
                  "restart_s": _mostly(st.floats(0.0, 60.0), _JUNK)}), _JUNK),
              "ttft_slo_s": _mostly(st.floats(0.01, 10.0), _JUNK),
              "seed": _mostly(st.integers(0, 2**31), _JUNK)})


def _call(kwargs):
    return inferlab.fleet("llama-3.1-8b", "h100-sxm", **kwargs)


ENTRY = Entry("fleet", lambda: _INPUTS, _call, outputs=finite_numbers)
