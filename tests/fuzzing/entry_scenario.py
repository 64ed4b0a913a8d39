"""Scenario files: YAML text written to a file and read with ``load_scenario``; one input in
eight (``plan`` drawn true) is also planned, kept small (one model, one GPU, a tiny search,
verification of at most one candidate) so that the planner's share stays within seconds.

Some scenarios are read but not planned, because their plan legitimately takes seconds: one
whose SLO percentile is above P99 (by the documented rule each probe of its verification
simulates ``ceil(20 / (1 - p))`` requests, 20,000 at P99.9), and one whose requests average
more than :data:`PLANNED_TOKENS` prompt and output tokens (each probe simulates every decode
step of 2,000 such requests). Their loading is still fuzzed."""

import math
import tempfile
from pathlib import Path

import yaml
from hypothesis import strategies as st

from inferlab.planning.planner import plan
from inferlab.planning.scenario import load_scenario

from . import Entry

#: Most prompt plus output tokens per request (expected) of a scenario that is also planned.
PLANNED_TOKENS = 4096
_JUNK = st.one_of(st.none(), st.booleans(), st.text(max_size=5), st.floats(allow_nan=True, allow_infinity=True),
                  st.integers(-2**70, 2**70), st.lists(st.integers(-2, 9), max_size=3), st.just({}))


def _mostly(valid, invalid=_JUNK):
    return st.integers(0, 7).flatmap(lambda i: valid if i else invalid)


def _valid(valid, invalid=None):
    return valid


def _scenario(m):
    """Scenario mappings; ``m(valid, invalid)`` chooses how often a field is broken."""
    _LENGTHS = m(st.one_of(st.integers(16, 4096), st.fixed_dictionaries(
        {"kind": st.just("lognormal"), "mean": st.floats(16, 4096), "sigma": st.floats(0, 1)})),
        st.one_of(_JUNK, st.fixed_dictionaries({"kind": st.text(max_size=5), "valu": st.integers()})))
    _TRAFFIC = m(st.one_of(
        st.fixed_dictionaries({"rate": m(st.floats(0.1, 200))},
                              optional={"isl": _LENGTHS, "osl": _LENGTHS, "prefix_hit": m(st.floats(0, 0.9)),
                                        "prefix": m(st.sampled_from(["shared:tokens=1000,groups=8",
                                                                     "sessions:turns=4,think=5",
                                                                     {"kind": "shared", "tokens": 500}]),
                                                    st.one_of(st.sampled_from(["shared:tokns=5", "sessions:turns=0",
                                                                               "sessions:turns=10000", "",
                                                                               {"kind": "shared", "tokens": 1.5}]),
                                                              _JUNK))}),
        st.fixed_dictionaries({"offline": st.just(True), "requests": m(st.integers(1, 10**6)),
                               "deadline_h": m(st.floats(0.1, 48))}, optional={"isl": _LENGTHS})), _JUNK)
    _SLO = st.fixed_dictionaries({}, optional={"ttft_ms": m(st.floats(10, 5000)),
                                               "tpot_ms": m(st.floats(5, 200)),
                                               "percentile": m(st.sampled_from([50, 90, 99, 99.5, 99.9]),
                                                                     st.sampled_from([0, 99.95, 100, -1, "p99"]))})
    _SEARCH = st.fixed_dictionaries({"precisions": m(st.lists(st.sampled_from(["bf16", "fp8"]), min_size=1,
                                                                     max_size=2, unique=True),
                                                            st.lists(st.sampled_from(["fp9", "", "int4"]), max_size=2)),
                                     "tp": m(st.lists(st.sampled_from([1, 2, 3, 16]), min_size=1, max_size=2,
                                                            unique=True))},
                                    optional={"pp": m(st.just([1])), "disaggregation": m(st.booleans()),
                                              "max_gpus": m(st.integers(1, 64)),
                                              "target_utilization": m(st.floats(0.1, 1.0)),
                                              "speculative": m(st.just([None]), st.lists(st.text(max_size=6),
                                                                                               max_size=1))})
    _SCENARIO = st.fixed_dictionaries(
        {"models": m(st.just(["llama-3.1-8b"]), st.one_of(st.just(["llama-9"]), st.just([]), _JUNK)),
         "hardware": m(st.just(["h100-sxm"]), st.one_of(st.just(["h100"]), _JUNK)),
         "traffic": _TRAFFIC, "verify": m(st.integers(0, 1), st.one_of(st.just(-1), st.just(True), _JUNK))},
        optional={"slo": _SLO, "search": _SEARCH, "engine": m(st.sampled_from(["vllm", "generic"])),
                  "prices": m(st.dictionaries(st.just("h100-sxm"), st.floats(0, 20)),
                                    st.dictionaries(st.sampled_from(["h100-sxm", "h100"]),
                                                    st.one_of(st.floats(allow_nan=True, allow_infinity=True), _JUNK))),
                  "budget_usd_per_hour": m(st.floats(1, 1000)),
                  "api_price": m(st.fixed_dictionaries({"input_per_million": st.floats(0, 5),
                                                              "output_per_million": st.floats(0, 20)})),
                  **({} if m is _valid else {"unknown_key": _JUNK})})
    return _SCENARIO


_TEXT = st.one_of(_scenario(_valid).map(lambda d: yaml.safe_dump(d).encode()),
                  _scenario(_mostly).map(lambda d: yaml.safe_dump(d, allow_unicode=True).encode()),
                  st.binary(max_size=40), st.text(max_size=40).map(str.encode),
                  st.just(b"models: [llama-3.1-8b]\nhardware: [h100-sxm]\ntraffic: {rate: 2}\n"))


def _inputs():
    return st.tuples(_TEXT, st.integers(0, 7).map(lambda i: i == 0))


def _call(value):
    text, planned = value
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scenario.yaml"
        path.write_bytes(text)
        scenario = load_scenario(path)
    tokens = scenario.traffic.isl.expected + scenario.traffic.osl.expected
    return plan(scenario) if planned and scenario.slo.percentile <= 99 and tokens <= PLANNED_TOKENS else None


def _numbers(result):
    """Costs, GPU counts and latencies of every feasible candidate (a ruled-out one has none),
    as ``to_dict()`` gives them: a fluid latency whose queue does not settle at the simulated
    count is None there ("sat" in the table), never infinity."""
    if result is None:
        return
    for c in result.feasible:
        row = c.to_dict()
        # a simulated count's latencies are the simulation's; the fluid model's may then be None
        # (a load it thinks beyond a replica, which the simulation shows carried)
        latencies = ("simulated_ttft_s", "simulated_tpot_s") if c.simulated else ("fluid_ttft_s", "fluid_tpot_s")
        if c.simulated and _offline(result):
            latencies = ("simulated_job_s",)
        for key in ("usd_per_hour", "usd_per_million_output", "gpus", "replicas", *latencies,
                    "tokens_per_s_per_gpu", "headroom"):
            if row[key] is not None or not c.simulated:
                yield f"{c.label}.{key}", float(row[key] if row[key] is not None else math.nan)


def _offline(result):
    return bool(result.scenario.traffic.offline)


ENTRY = Entry("scenario", _inputs, _call, outputs=_numbers)
