"""``inferlab.serve``: workloads (rates, clients, traces, lengths, seeds, scheduler limits),
speculative decoding, shared prefixes and sessions, precision per tensor kind (the
checkpoint's by default) and the result's interval at a level, on one small deployment,
valid and invalid mixed; at most 50 requests so that each call is fast."""

from hypothesis import strategies as st

import inferlab
from inferlab.errors import InferlabError
from inferlab.inputs.workload import Lengths

from . import Entry, finite_numbers

_JUNK = st.one_of(st.none(), st.booleans(), st.text(max_size=4), st.complex_numbers(max_magnitude=10),
                  st.floats(allow_nan=True, allow_infinity=True), st.lists(st.integers(-3, 3), max_size=3),
                  st.just({}), st.integers(-2**70, 2**70))
def _mostly(valid, invalid):
    """``valid`` seven times in eight: about half the inputs reach the simulation, the rest
    probe the checks."""
    return st.integers(0, 7).flatmap(lambda i: valid if i else invalid)


_RATES = _mostly(st.floats(0.01, 1e4), st.one_of(st.sampled_from([0.0, -1.0, 1e-300, 1e300, 2e-5, 1e9, float("nan")]), _JUNK))
_CLIENTS = _mostly(st.integers(1, 64), st.one_of(st.sampled_from([0, -3, 2.5, 10**8]), _JUNK))
_TRACE = _mostly(st.lists(st.floats(0, 100), min_size=1, max_size=50),
                 st.one_of(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=8),
                           st.lists(st.lists(st.floats(0, 1), max_size=2), max_size=3), _JUNK))
_TOKENS = _mostly(st.integers(1, 4096), st.one_of(
                    st.sampled_from([0, -1, 10**9, 2**63, 64.0, 1.5]),
                    st.lists(st.integers(-2, 2048), min_size=0, max_size=5),
                    st.tuples(st.integers(1, 512), st.integers(1, 2048)).map(
                        lambda t: Lengths("uniform", low=min(t), high=max(t))),
                    st.builds(Lengths, st.just("lognormal"), mean=st.floats(1, 2048), sigma=st.floats(0, 1.5)),
                    _JUNK))
_OSL = _mostly(st.integers(1, 256), _TOKENS)
_LOAD = _mostly(st.one_of(st.fixed_dictionaries({"rate": _RATES}), st.fixed_dictionaries({"concurrency": _CLIENTS}),
                          st.fixed_dictionaries({"trace": _TRACE}), st.just({"offline": True})),
                st.one_of(st.fixed_dictionaries({"offline": _JUNK}), st.just({}),
                          st.fixed_dictionaries({"rate": _RATES, "concurrency": _CLIENTS})))
_LIMITS = st.fixed_dictionaries({}, optional={
    "max_num_seqs": st.one_of(st.integers(-1, 512), _JUNK), "max_num_batched_tokens": st.one_of(st.integers(-1, 16384), _JUNK),
    "gpu_memory_utilization": st.one_of(st.floats(0.05, 1.0), st.sampled_from([0.0, 2.0, -0.5]), _JUNK),
    "kv_block_size": st.one_of(st.sampled_from([0, 1, 16, 2**40]), _JUNK), "chunked_prefill": st.one_of(st.booleans(), _JUNK),
    "stagger": st.one_of(st.booleans(), _JUNK)})


_SPEC = _mostly(st.sampled_from(["eagle:k=4,accept=0.7", "ngram:k=3,accept=0.3", "eagle:k=2,length=2.5",
                                  "eagle:k=8,accept=0.5", "eagle3-llama-3.1-8b"]),
                st.one_of(st.sampled_from(["eagle:k=100000,accept=0.5", "eagle:k=0", "eagle:k=4,accept=1.5",
                                           "mtp:k=1,length=1.85", "draft:model=llama-3.1-70b,k=4,accept=0.6",
                                           "draft:model=nope,k=2,accept=0.5", "eagle", ""]), _JUNK))
_PREFIX = _mostly(st.one_of(
    st.builds(lambda t, g, z: f"shared:tokens={t},groups={g}" + (f",zipf={z}" if z else ""),
              st.integers(1, 4096), st.integers(1, 64), st.sampled_from([0, 0.8, 1.1])),
    st.builds(lambda n, t: f"sessions:turns={n},think={t}", st.integers(1, 6), st.sampled_from([0, 1.5, 30])),
    st.just("shared:tokens=500,groups=4,cache=off"),
    st.fixed_dictionaries({"kind": st.just("shared"), "tokens": st.integers(1, 2048)},
                          optional={"groups": st.integers(1, 16), "zipf": st.floats(0, 2), "cache": st.booleans()})),
    st.one_of(st.sampled_from(["shared:tokens=0", "shared:groups=4", "shared:tokens=1e3", "sessions:turns=0",
                               "sessions:turns=10000", "shared:tokens=100,groups=1000000000000",
                               "sessions:turns=4,think=inf", "sessions:turns=500", "private:tokens=5", "",
                               "shared:tokens=100,cache=maybe"]),
              st.fixed_dictionaries({"kind": st.sampled_from(["shared", "sessions", "x"])},
                                    optional={"tokens": _JUNK, "groups": _JUNK, "turns": _JUNK, "zipf": _JUNK,
                                              "think_s": _JUNK, "cache": _JUNK, "other": _JUNK}),
              _JUNK))
_FORMATS = ["bf16", "fp8", "int4", "nvfp4", "mxfp4", "fp8_block"]
_PRECISION = _mostly(st.one_of(
    st.none(), st.sampled_from(["checkpoint", "fp8", "fp8 kv:bf16", "checkpoint kv:fp8", "w:int4 kv:fp8", "nvfp4",
                                "checkpoint moe:fp8"]),
    st.fixed_dictionaries({}, optional={k: st.one_of(st.none(), st.sampled_from(_FORMATS))
                                        for k in ("weights", "activations", "kv_cache")})),
    st.one_of(st.sampled_from(["fp7", "", "  ", "kv:", "x:fp8", "moe:mxfp4", "fp8 fp8"]),
              st.fixed_dictionaries({}, optional={"moe_weights": st.sampled_from(["mxfp4", "bf16"]),
                                                  "weights": _JUNK, "kv_cache": st.sampled_from(["fp9", ""]),
                                                  "bogus": st.just("fp8")}),
              _JUNK))
_LEVEL = st.one_of(st.sampled_from([0.5, 0.8, 0.9]), st.sampled_from([0.0, 1.0, 0.95, -0.8, float("nan"), True]),
                   _JUNK)


#: Request counts that are invalid, or valid but small: a simulation serves every request asked
#: for (100,000 take ~15 s, by design, up to MAX_REQUESTS), so the valid ones stay at most 50.
_BAD_REQUESTS = st.one_of(st.sampled_from([0, -1, 10.0, 2.5, 10**13, 10**7 + 1]),
                          _JUNK.filter(lambda v: not (isinstance(v, int) and 50 < v <= 10**7)))


def _inputs():
    extras = st.fixed_dictionaries({}, optional={"speculative": _SPEC, "prefix": _PREFIX, "precision": _PRECISION,
                                                 "allow_long_context": _mostly(st.booleans(), _JUNK)})
    return st.tuples(st.builds(
        lambda load, isl, osl, n, seed, limits, more: {**load, "isl": isl, "osl": osl, "num_requests": n, "seed": seed,
                                                       **limits, **more},
        _LOAD, _TOKENS, _OSL, _mostly(st.integers(1, 50), _BAD_REQUESTS),
        _mostly(st.integers(0, 2**32), st.one_of(st.sampled_from([-1, 1.5, "x", 2**70]), _JUNK)),
        _mostly(st.just({}), _LIMITS), extras), _LEVEL, _mostly(st.just("llama-3.1-8b"), st.just("gpt-oss-20b")))


def _call(value):
    kwargs, level, model = value
    result = inferlab.serve(model, "h100-sxm", **kwargs)
    str(result)
    try:  # a level the error-band table does not hold is a clean error of interval() alone
        result.interval(level).to_dict()
    except InferlabError:
        pass
    return result


def _numbers(result):
    """Every number of ``to_dict()``; TPOT and ITL only when some output has a second token
    (for one-token outputs they are undefined, NaN by design: ``ServeResult.tpot_s``)."""
    decodes = bool((result.trace.osl > 1).any())
    return ((label, x) for label, x in finite_numbers(result)
            if decodes or not any(k in label for k in ("tpot", "itl")))


ENTRY = Entry("serve", _inputs, _call, outputs=_numbers)
