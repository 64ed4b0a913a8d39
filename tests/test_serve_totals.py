"""Counts a serving result reports are every replica's, as its request count and throughput:
the simulation runs one stream (a data-parallel replica, a pipeline batch) and stands it for
``replicas`` of them."""

from __future__ import annotations

import json

import pytest

from inferlab import serve

MODEL = "llama-3.1-8b"


def test_preemptions_are_every_replicas():
    """One L4 holds about 5 GB of KV for Llama-3.1-8B in BF16: 20 prompts of 1,000 tokens each
    growing 1,000 more do not fit together, so vLLM's scheduler preempts some. With ``dp=2``
    and 40 requests each replica serves the same 20 (the workload splits evenly, one stream
    simulated), so the deployment preempts twice what one replica does, as it serves twice
    the requests and tokens; it had reported one replica's count beside every replica's
    requests and throughput."""
    kw = dict(engine="vllm", offline=True, isl=1000, osl=1000)
    one = serve(MODEL, "l4", num_requests=20, **kw)
    two = serve(MODEL, "l4", num_requests=40, dp=2, **kw)
    per_replica = one.trace.preemptions
    assert per_replica > 0 and two.trace.preemptions == per_replica  # the simulated stream is the same
    assert two.to_dict()["num_requests"] == 2 * 20
    assert two.preemptions == two.to_dict()["preemptions"] == 2 * per_replica
    assert str(two).splitlines()[-1].endswith(f"preemptions {2 * per_replica}")
    assert f"{2 * per_replica} preemptions: the KV pool ran out" in two.explain()
    assert json.loads(json.dumps(one.to_dict()))["preemptions"] == per_replica


def test_evicted_prefix_blocks_are_every_replicas():
    """The prefix cache's evictions count the same way: ``dp=2`` at twice the rate and the
    requests runs the dp=1 stream on each replica, so it evicts twice its blocks."""
    kw = dict(engine="vllm", isl=[512, 2048, 4096], osl=[64, 256], gpu_memory_utilization=0.3,
              prefix="sessions:turns=1")
    one = serve(MODEL, "h100-sxm", rate=25, num_requests=200, **kw)
    two = serve(MODEL, "h100-sxm", rate=50, num_requests=400, dp=2, **kw)
    per_replica = one.trace.evicted_blocks
    assert per_replica > 0 and two.trace.evicted_blocks == per_replica
    assert two.evicted_blocks == two.to_dict()["prefix_evicted_blocks"] == 2 * per_replica
    assert f"{2 * per_replica:,} blocks evicted" in str(two)


def test_explain_counts_a_pipelined_replicas_requests_over_its_batches():
    """With ``pp=2`` the simulated stream is one of the replica's two pipeline batches: its
    decode steps are shared with that batch's requests, and the replica holds twice as many.
    explain() had given the batch's count as the replica's."""
    r = serve(MODEL, "h100-sxm", engine="vllm", rate=10, num_requests=100, pp=2)
    line = next(x for x in r.explain().splitlines() if x.startswith("TPOT"))
    batch = float(line.split("shared with ")[1].split()[0])  # running requests of one pipeline batch
    assert 0.5 * r.mean_in_flight <= batch <= r.mean_in_flight  # (in flight: arrival to finish; running: admitted)
    assert (f"running requests in each of the replica's 2 pipeline batches ({2 * batch:.1f} per replica)") in line
    plain = serve(MODEL, "h100-sxm", engine="vllm", rate=5, num_requests=50)
    line = next(x for x in plain.explain().splitlines() if x.startswith("TPOT"))
    assert 0.5 * plain.mean_in_flight <= float(line.split("shared with ")[1].split()[0]) <= plain.mean_in_flight
    assert "running requests per replica;" in line  # nothing waits for admission at 5 req/s


def test_explain_counts_the_running_requests_not_those_waiting_for_admission():
    # 32 clients, at most 16 running (--max-num-seqs 16): the decode batches hold 16, the other 16 wait
    # (it had said "shared with 32.0 requests in flight")
    r = serve(MODEL, "h100-sxm", engine="vllm", max_num_seqs=16, concurrency=32, num_requests=200)
    assert ("decode steps shared with 16.0 running requests (of 32.0 in flight, the rest waiting for admission) "
            "per replica") in r.explain()


def test_a_stream_of_one_request_at_a_rate_lasts_its_offered_time():
    """4 requests at 0.01/s over dp=2 x pp=2 streams: one request per stream at 0.0025/s, offered
    over 1 / 0.0025 = 400 s; 4 streams x 128 tokens / 400 s = 1.28 tokens/s (the offered
    0.01/s x 128). A stream's one latency (under a second) had stood for the run: ~400 tokens/s."""
    from inferlab import serve

    r = serve("llama-3.1-8b", "h100-sxm", rate=0.01, num_requests=4, isl=512, osl=128, dp=2, pp=2)
    assert r.output_tokens_per_s == pytest.approx(1.28, rel=1e-9)
