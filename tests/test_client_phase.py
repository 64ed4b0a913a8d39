"""explain() of a closed loop: the opening burst beside the later rounds, and the clients' phase."""

import re

import numpy as np
import pytest

import inferlab


def _loop(**kw):
    args = dict(engine="vllm", concurrency=8, isl=4096, osl=256, num_requests=32)
    args.update(kw)
    return inferlab.serve("llama-3.1-8b", "h100-sxm", **args)


def _burst_and_later(text: str) -> tuple[float, float]:
    m = re.search(r"mean TTFT ([\d,.]+) ms\), the later ([\d,]+) requests wait ([\d,.]+) ms", text)
    assert m, text
    return float(m.group(1).replace(",", "")), float(m.group(3).replace(",", ""))


def test_burst_and_later_rounds_are_said_apart():
    result = _loop()
    text = result.explain()
    assert "closed loop of 8 clients, 4.0 requests each" in text
    burst, later = _burst_and_later(text)
    # the first round is the 8 requests sent at the start; the two means make up the run's
    assert np.all(result.trace.arrival[:8] == 0.0) and np.all(result.trace.arrival[8:] > 0.0)
    assert (8 * burst + 24 * later) / 32 == pytest.approx(result.summary()["ttft"]["mean"] * 1e3, rel=1e-3)
    assert "the later 24 requests" in text
    # by hand: the burst is 8 x 4,096 = 32,768 prompt tokens, four of vLLM's 8,192-token
    # iterations on H100 (two prompts each) to prefill, its prompts done after 1, 1, 2, 2, 3, 3,
    # 4 and 4 of them (2.5 on average: five prompts' prefill); a later prompt arrives mostly
    # alone (a request lasts its prefill and 255 decode steps, so 8 clients send one every
    # few prefills' time), one prefill beside the decodes. So the burst's mean TTFT is at
    # least twice a later request's.
    assert burst >= 2.0 * later
    assert "spread out of step" in text and "--lockstep" in text


def test_lockstep_is_said_and_keeps_later_rounds_bursty():
    staggered = _burst_and_later(_loop().explain())[1]
    text = _loop(stagger=False).explain()
    assert "the clients stay in step (lockstep)" in text
    # in step, every round's 8 prompts arrive together again: later rounds wait like the first
    assert _burst_and_later(text)[1] > 1.5 * staggered


@pytest.mark.parametrize("load", [dict(rate=2.0, concurrency=None), dict(offline=True, concurrency=None),
                                  dict(num_requests=8), dict(concurrency=1)])
def test_no_line_without_rounds(load):
    assert "closed loop of" not in _loop(**load).explain()


def test_streams_and_disaggregated_pools_say_it_too():
    piped = inferlab.serve("llama-3.1-8b", "h100-sxm", engine="vllm", concurrency=8, isl=2048, osl=128,
                           num_requests=32, pp=2).explain()
    assert "closed loop of 4 clients in the simulated stream (one of 2)" in piped
    pools = inferlab.serve("llama-3.1-8b", disaggregation="prefill=h200x1,decode=h200x1", concurrency=8, isl=2048,
                           osl=128, num_requests=32).explain()
    assert "closed loop of 8 clients, 4.0 requests each" in pools


def test_uneven_client_split_names_the_clients_not_a_fraction_of_streams():
    # 20 clients over 3 replicas: the busiest holds ceil(20 / 3) = 7; the stream stands for 20 / 7 of them
    r = inferlab.serve("llama-3.1-8b", "h100-sxm", dp=3, concurrency=20, num_requests=60)
    assert "(20 simulated on one stream, 7 of the 20 clients), 20 clients" in str(r)
    assert "closed loop of 7 clients in the simulated stream (of the 20 in all)" in r.explain()
    assert "2.85714" not in str(r) + r.explain()
