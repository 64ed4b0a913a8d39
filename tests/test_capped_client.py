"""A rate capped at a number of requests in flight (``vllm bench serve --request-rate R
--max-concurrency C``, GuideLLM's ``max_concurrency``): the client sends each request when it
falls due, unless ``C`` are in flight; then it holds it until one finishes, and the request's
latencies count from when it is sent. Before, such runs were simulated at the rate alone."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from inferlab import serve
from inferlab.errors import SpecError
from inferlab.inputs.workload import Workload

MODEL, GPU = "llama-3.1-8b", "h100-sxm"


def _in_flight_at_sends(arrival, finish):
    """Requests in flight at each send, the one sent included."""
    return np.array([np.sum((arrival <= t) & (finish > t)) for t in arrival])


@settings(max_examples=12, deadline=None)
@given(cap=st.integers(1, 12), rate=st.sampled_from([2.0, 20.0, 200.0]), seed=st.integers(0, 3))
def test_never_more_in_flight_than_the_cap_and_each_request_sent_when_due_or_at_a_finish(cap, rate, seed):
    r = serve(MODEL, GPU, engine="vllm", rate=rate, max_concurrency=cap, isl=512, osl=64, num_requests=60, seed=seed)
    t = r.trace
    assert _in_flight_at_sends(t.arrival, t.finish).max() <= cap
    due = Workload(rate=rate, num_requests=60, isl=512, osl=64, seed=seed).draw()[0]
    sent = t.arrival
    assert np.all(sent >= due - 1e-12)  # never before it falls due
    held = sent > due + 1e-12
    # a held request goes at the moment a slot frees: some request's finish
    assert all(np.isclose(s, t.finish, rtol=0, atol=1e-9).any() for s in sent[held])
    assert np.all(np.diff(sent) >= -1e-12)  # in order


def test_a_cap_above_the_requests_changes_nothing():
    kw = dict(engine="vllm", rate=50.0, isl=1024, osl=128, num_requests=40)
    free, capped = serve(MODEL, GPU, **kw), serve(MODEL, GPU, **kw, max_concurrency=40)
    np.testing.assert_array_equal(free.trace.first_token, capped.trace.first_token)
    np.testing.assert_array_equal(free.trace.finish, capped.trace.finish)


def test_one_in_flight_runs_the_requests_one_by_one_each_as_if_alone():
    """All 10 requests fall due within 1 ms (rate 10,000/s) but one goes at a time: each is
    timed from its own send, so its TTFT and end-to-end latency are those of a request served
    alone (the same prompt at a rate of 0.01/s, one request every ~100 s, as the reference),
    and the run lasts ten of them back to back."""
    kw = dict(engine="vllm", isl=1024, osl=64)
    alone = serve(MODEL, GPU, **kw, rate=0.01, num_requests=3)
    capped = serve(MODEL, GPU, **kw, rate=1e4, num_requests=10, max_concurrency=1)
    e2e_alone = float(np.mean(alone.trace.finish - alone.trace.arrival))
    ttft_alone = float(np.mean(alone.trace.first_token - alone.trace.arrival))
    t = capped.trace
    np.testing.assert_allclose(t.finish - t.arrival, e2e_alone, rtol=1e-6)
    np.testing.assert_allclose(t.first_token - t.arrival, ttft_alone, rtol=1e-6)
    # back to back: each sent as the one before finishes (10 x e2e from the first send)
    np.testing.assert_allclose(t.arrival[1:], t.finish[:-1], rtol=0, atol=1e-9)
    assert t.finish[-1] - t.arrival[0] == pytest.approx(10 * e2e_alone, rel=1e-6)
    # the uncapped burst queues: its mean TTFT is far above one request's alone
    burst = serve(MODEL, GPU, **kw, rate=1e4, num_requests=10)
    assert np.mean(burst.trace.first_token - burst.trace.arrival) > 2 * ttft_alone


def test_a_cap_splits_over_data_parallel_replicas_and_shows_in_the_summary():
    r = serve(MODEL, GPU, engine="vllm", rate=40.0, max_concurrency=8, dp=2, isl=256, osl=32, num_requests=100)
    assert r.workload.max_concurrency == 4  # each replica's client holds its share of the cap
    assert "at most 4 in flight a stream" in str(r).splitlines()[0]
    r1 = serve(MODEL, GPU, engine="vllm", rate=20.0, max_concurrency=8, isl=256, osl=32, num_requests=50)
    assert str(r1).splitlines()[0].endswith("20 req/s, at most 8 in flight")
    assert Workload.from_dict(r1.workload.to_dict()) == r1.workload


def test_a_cap_below_the_replicas_holds_that_many_in_flight_in_all():
    """``--max-concurrency 1`` against two data-parallel replicas: one request is in flight in
    the whole system, so the replicas serve the 10 requests one by one, each as if alone
    (requests/s = 1 / e2e_alone, tokens/s = 64 / e2e_alone), as one replica does. Each replica
    had been given a cap of its own (ceil(1 / 2) = 1, two in flight in all): twice the
    throughput the client allows."""
    kw = dict(engine="vllm", isl=1024, osl=64, rate=1e4, num_requests=10, max_concurrency=1)
    one, two = serve(MODEL, GPU, **kw), serve(MODEL, GPU, **kw, dp=2)
    e2e_alone = float(np.mean(serve(MODEL, GPU, engine="vllm", isl=1024, osl=64, rate=0.01, num_requests=3).e2e_s))
    for r in (one, two):
        assert r.requests_per_s == pytest.approx(1.0 / e2e_alone, rel=1e-6)
        assert r.output_tokens_per_s == pytest.approx(64.0 / e2e_alone, rel=1e-6)
        assert r.to_dict()["num_requests"] == 10


def test_an_uneven_cap_over_replicas_counts_the_slots_it_has():
    """A cap of 3 over 2 replicas: each stream holds ceil(3 / 2) = 2 and takes 2/3 of the
    requests and of the rate, standing for 3 / 2 = 1.5 streams. Bound by the cap (10,000 req/s
    due at once), that is 1.5 x a replica with 2 in flight, 3 slots' worth; it had been
    2 streams x 2 = 4 slots, a third more throughput than the client's 3 in flight allow."""
    capped = serve(MODEL, GPU, engine="vllm", isl=256, osl=32, rate=1e4, num_requests=90, max_concurrency=3, dp=2)
    # the stream: 90 x 2/3 = 60 requests at 1e4 x 2/3 req/s with 2 in flight
    stream = serve(MODEL, GPU, engine="vllm", isl=256, osl=32, rate=1e4 * 2 / 3, num_requests=60, max_concurrency=2)
    assert capped.replicas == 1.5
    np.testing.assert_array_equal(capped.trace.finish, stream.trace.finish)
    assert capped.output_tokens_per_s == pytest.approx(1.5 * stream.output_tokens_per_s, rel=1e-12)


@pytest.mark.parametrize("kw, match", [
    (dict(concurrency=8, max_concurrency=8), "caps the requests in flight of a rate or a trace"),
    (dict(offline=True, max_concurrency=8), "caps the requests in flight of a rate or a trace"),
    (dict(rate=5.0, max_concurrency=0), "max_concurrency must be"),
    (dict(rate=5.0, max_concurrency=2.5), "max_concurrency"),
    (dict(rate=5.0, max_concurrency=4, prefix="sessions:turns=3,think=1"), "turns follow each other"),
])
def test_meaningless_caps_are_refused(kw, match):
    with pytest.raises(SpecError, match=match):
        serve(MODEL, GPU, isl=256, osl=32, num_requests=20, **kw)


def test_a_cap_with_separate_pools_is_refused():
    with pytest.raises(SpecError, match="concurrency cap"):
        serve(MODEL, disaggregation="prefill=h100-sxmx1,decode=h100-sxmx1", rate=5.0, max_concurrency=4,
              num_requests=20)


def test_the_json_cap_is_the_clients_not_a_streams():
    """``--max-concurrency 8`` over dp=2: each replica's stream holds 4, the client 8; the curve's
    JSON had said 4 (a stream's) under the name of the client's flag."""
    from inferlab.serving.curve import load_sweep

    curve = load_sweep(MODEL, GPU, rates=[10.0, 20.0], max_concurrency=8, dp=2, engine="vllm", isl=256, osl=32,
                       num_requests=40)
    assert curve.results[0].workload.max_concurrency == 4
    assert curve.to_dict()["max_concurrency"] == 8 == curve.results[0].to_dict()["max_concurrency"]
    assert "max_concurrency" not in serve(MODEL, GPU, rate=10.0, isl=256, osl=32, num_requests=20).to_dict()


def test_the_slo_rate_search_refuses_a_cap_in_its_own_words():
    """Above the cap's throughput a capped client's latencies no longer grow with the rate (the
    excess waits untimed at the client), so a search for the highest rate meeting an SLO has no
    answer; it had failed on its lone-request probe with the closed-loop message ("a closed
    loop's clients are its concurrency"), naming a concurrency the caller never gave."""
    from inferlab.serving.goodput import max_rate_meeting_slo

    with pytest.raises(SpecError, match="max_rate_meeting_slo: a client capped at max_concurrency"):
        max_rate_meeting_slo(MODEL, GPU, ttft_slo_s=0.5, tpot_slo_s=0.05, isl=256, osl=32, num_requests=20,
                             max_concurrency=2)
