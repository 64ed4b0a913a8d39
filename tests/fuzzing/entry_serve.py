"""``inferlab.serve``: workloads (rates, clients, traces, lengths, seeds, scheduler limits) on
one small deployment, valid and invalid mixed; at most 50 requests so that each call is fast."""

from hypothesis import strategies as st

import inferlab
from inferlab.serving.workload import Lengths

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


def _inputs():
    return st.builds(
        lambda load, isl, osl, n, seed, limits: {**load, "isl": isl, "osl": osl, "num_requests": n, "seed": seed, **limits},
        _LOAD, _TOKENS, _OSL, _mostly(st.integers(1, 50), st.one_of(st.sampled_from([0, -1, 10.0, 2.5, 10**13]), _JUNK)),
        _mostly(st.integers(0, 2**32), st.one_of(st.sampled_from([-1, 1.5, "x", 2**70]), _JUNK)),
        _mostly(st.just({}), _LIMITS))


def _call(kwargs):
    return inferlab.serve("llama-3.1-8b", "h100-sxm", **kwargs)


def _numbers(result):
    """Every number of ``to_dict()``; TPOT and ITL only when some output has a second token
    (for one-token outputs they are undefined, NaN by design: ``ServeResult.tpot_s``)."""
    decodes = bool((result.trace.osl > 1).any())
    return ((label, x) for label, x in finite_numbers(result)
            if decodes or not any(k in label for k in ("tpot", "itl")))


ENTRY = Entry("serve", _inputs, _call, outputs=_numbers)
