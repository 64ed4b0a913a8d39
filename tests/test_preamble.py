"""A preamble the client does not count (a reasoning model's thinking, skipped by a benchmark that
times the first content token): a property of the workload (issue 10, deliverable 4), set by the
user (``ClientOverheads.preamble_tokens``, ``--preamble-tokens``) or by a case (``load.preamble_tokens``)."""

from __future__ import annotations

import numpy as np
import pytest

import inferlab
from inferlab import SpecError
from inferlab.serving.overheads import ClientOverheads, user_latencies
from inferlab.validation.cases import Case
from inferlab.validation.predict import predict_cases


def test_the_first_counted_token_comes_a_preamble_of_decode_steps_later():
    kw = dict(isl=512, osl=[40, 200], concurrency=4, num_requests=16, seed=1)
    r = inferlab.serve("llama-3.1-8b", "h100-sxm", overheads=ClientOverheads(preamble_tokens=30), **kw)
    u = user_latencies(r)
    # each request's own TTFT plus 30 of its decode steps; its TPOT over the gaps after them
    assert u.ttft_s == pytest.approx(r.ttft_s + 30 * r.tpot_s)
    gaps = r.trace.osl - 1 - 30
    assert u.tpot_s == pytest.approx((r.e2e_s - u.ttft_s) / gaps)
    # the end to end latency does not move: the preamble is part of the output
    assert u.e2e_s == pytest.approx(r.e2e_s)
    mixed = inferlab.serve("llama-3.1-8b", "h100-sxm", overheads=ClientOverheads(preamble_tokens=30),
                           isl=512, osl=[20, 200], concurrency=1, num_requests=2)
    # a request whose output is shorter than the preamble: its last token is the first counted
    short = mixed.trace.osl == 20
    assert short.any() and user_latencies(mixed).ttft_s[short] == pytest.approx(mixed.e2e_s[short])
    # a preamble no output outlasts leaves nothing to count: refused, as the flag names it
    with pytest.raises(SpecError, match=r"preamble_tokens 20: no request's output is longer than 20 tokens"):
        inferlab.serve("llama-3.1-8b", "h100-sxm", overheads=ClientOverheads(preamble_tokens=20), isl=512, osl=20,
                       concurrency=1, num_requests=2)
    for bad in (-1, 1.5, True):
        with pytest.raises(SpecError, match="preamble_tokens"):
            ClientOverheads(preamble_tokens=bad)


def test_a_case_stating_its_preamble_counts_it_in_the_ttft():
    base = dict(regime="closed_loop", model="llama-3.1-8b", hardware="h100-sxm", num_gpus=1, engine="vllm", isl=1024,
                osl=256, unit="ms", source="test", precision={"weights": "bf16"})
    cases = [Case(id=f"{m}-{p}", metric=m, measured=1.0, load={"concurrency": 8, "preamble_tokens": p}, **base)
             for p in (0, 20) for m in ("ttft_ms", "tpot_ms")]
    (ttft0, _), (tpot0, _), (ttft20, _), (tpot20, _) = predict_cases(cases)
    assert tpot20 == pytest.approx(tpot0)  # the pace is the same
    # the weighted mean TTFT moves by 20 of the weighted mean decode steps
    assert ttft20 - ttft0 == pytest.approx(20 * tpot0, rel=1e-9)
    with pytest.raises(ValueError, match="preamble_tokens must be an integer"):
        Case(id="x", metric="ttft_ms", measured=1.0, load={"concurrency": 8, "preamble_tokens": -3}, **base)


def test_a_preamble_passes_the_detokenizer_too():
    # a detokenizer of 10 ms a token, slower than decode (~7 ms on one H100): the preamble's 100 tokens
    # leave it at its pace, and the whole answer cannot leave before 199 of its gaps
    o = ClientOverheads(detokenize_s_per_token=0.01, preamble_tokens=100)
    r = inferlab.serve("llama-3.1-8b", "h100-sxm", isl=256, osl=200, concurrency=1, num_requests=2, overheads=o)
    u = user_latencies(r)
    first = r.ttft_s + 0.01
    assert u.ttft_s == pytest.approx(first + 100 * np.maximum(r.tpot_s, 0.01))
    assert u.e2e_s == pytest.approx(np.maximum(r.e2e_s + 0.01, first + 199 * 0.01))
    plain = user_latencies(inferlab.serve("llama-3.1-8b", "h100-sxm", isl=256, osl=200, concurrency=1, num_requests=2,
                                          overheads=ClientOverheads(detokenize_s_per_token=0.01)))
    assert u.e2e_s == pytest.approx(plain.e2e_s)  # the preamble is part of the answer: the end does not move
