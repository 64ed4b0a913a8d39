"""A small batch of whole-token requests is planned from plain-float sums
(``serving/iteration.py``); the arrays it stands in for give the same numbers, bit for bit.

Each case runs twice, once as shipped and once with the plain-float forms switched off
(``SMALL_BATCH = 0``), and every per-request time must be equal, not close."""

import numpy as np
import pytest

import inferlab
import inferlab.serving.admission as admission
import inferlab.serving.engine as engine
from inferlab.inputs.workload import Lengths

M, G = "llama-3.1-8b", "h100-sxm"
LOGNORMAL_IN, LOGNORMAL_OUT = Lengths("lognormal", mean=900, sigma=0.8), Lengths("lognormal", mean=180, sigma=0.9)

CASES = {
    "vllm_lognormal": lambda: inferlab.serve(M, G, engine="vllm", isl=LOGNORMAL_IN, osl=LOGNORMAL_OUT, rate=6.0,
                                             num_requests=300),
    "vllm_preempt": lambda: inferlab.serve(M, G, engine="vllm", isl=3000, osl=800, rate=30.0, num_requests=200,
                                           gpu_memory_utilization=0.3),
    "sglang_closed_loop": lambda: inferlab.serve(M, G, engine="sglang", isl=LOGNORMAL_IN, osl=LOGNORMAL_OUT,
                                                 concurrency=12, num_requests=200),
    "trtllm_reserved": lambda: inferlab.serve(M, G, engine="trtllm", isl=LOGNORMAL_IN, osl=LOGNORMAL_OUT, rate=5.0,
                                              num_requests=200),
    "unchunked": lambda: inferlab.serve(M, G, engine="vllm", isl=LOGNORMAL_IN, osl=LOGNORMAL_OUT, rate=6.0,
                                        num_requests=200, chunked_prefill=False),
    "unchunked_unmixed": lambda: inferlab.serve(M, G, engine="vllm", isl=LOGNORMAL_IN, osl=LOGNORMAL_OUT, rate=6.0,
                                                num_requests=200, chunked_prefill=False, mixed_prefill=False),
    "sglang_mixed": lambda: inferlab.serve(M, G, engine="sglang", isl=LOGNORMAL_IN, osl=LOGNORMAL_OUT, rate=6.0,
                                           num_requests=200, mixed_prefill=True),
    "sessions": lambda: inferlab.serve(M, G, engine="vllm", isl=800, osl=120, rate=4.0, num_requests=200,
                                       prefix="sessions:turns=3,think=5"),
}


def _times(result) -> dict:
    return {k: np.asarray(v) for k, v in vars(result.trace).items() if v is not None and not isinstance(v, int)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_plain_float_plans_match_the_arrays_bit_for_bit(name, monkeypatch):
    sums = _times(CASES[name]())
    monkeypatch.setattr(engine, "SMALL_BATCH", 0)
    monkeypatch.setattr(admission, "SMALL_BATCH", 0)
    arrays = _times(CASES[name]())
    assert sums.keys() == arrays.keys()
    for key in sums:
        assert np.array_equal(sums[key], arrays[key], equal_nan=True), key


def test_the_fleet_matches_the_arrays_bit_for_bit(monkeypatch):
    def run():
        return inferlab.fleet(M, G, replicas=3, horizon_s=300.0, seed=5,
                              traffic={"rate": 9.0, "isl": 1200, "osl": 200}, admission={"timeout_s": 20.0})

    sums = run()
    monkeypatch.setattr(engine, "SMALL_BATCH", 0)
    monkeypatch.setattr(admission, "SMALL_BATCH", 0)
    arrays = run()
    for key in ("first_token", "finish", "status", "replica"):
        assert np.array_equal(np.asarray(getattr(sums, key)), np.asarray(getattr(arrays, key)), equal_nan=True), key
