"""Disaggregated prefill and decode against hand derivations, and its invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import InfeasibleError, SpecError
from inferlab.techniques.step import decode, mean_decode_step_s, prefill
from inferlab.inputs.resolve import deployment
from inferlab.phases.compare import compare_with_aggregated
from inferlab.phases.disaggregated import estimate_disaggregated
from inferlab.techniques.disaggregation import NETWORK_LATENCY_S, Disaggregation, Pool
from inferlab.techniques.kv_transfer import exposed_transfer_s, kv_link, kv_transfer

LLAMA_70B_KV_BF16 = 327_680  # B/token: 80 layers x 2 (K, V) x 8 KV heads x 128 x 2 B
NIC = 50e9  # B/s: a 400 Gb/s NIC per direction


@pytest.fixture(scope="module")
def h200_70b():
    return {tp: deployment("llama-3.1-70b", "h200-sxm", tp=tp) for tp in (1, 4, 8)}


def test_kv_transfer_of_an_8k_llama_70b_prompt_by_hand(h200_70b):
    """BF16 KV of 8192 tokens: 327,680 B/token x 8192 = 2,684,354,560 B.

    One 400 Gb/s NIC (50 GB/s): 2,684,354,560 / 50e9 = 53.687 ms. A tp=4 prefill replica
    sends its four KV shards over four NICs at once to a tp=8 decode replica (eight NICs
    receiving): min(4, 8) x 50 GB/s = 200 GB/s -> 13.422 ms. Plus the 20 us network latency.
    """
    kv = LLAMA_70B_KV_BF16 * 8192
    assert kv == 2_684_354_560
    d = Disaggregation(Pool("h200-sxm", 1), Pool("h200-sxm", 1), link="network")
    one = kv_transfer(d, h200_70b[1], h200_70b[1], 1, 8192, prefill_s=1.0)
    assert float(one.bytes) == kv
    assert float(one.time_s) == pytest.approx(NETWORK_LATENCY_S + kv / NIC, rel=1e-12)
    assert float(one.time_s) == pytest.approx(53.707e-3, rel=1e-4)
    d = Disaggregation(Pool("h200-sxm", 4), Pool("h200-sxm", 8))  # 12 GPUs > the 8-GPU domain: network
    four = kv_transfer(d, h200_70b[4], h200_70b[8], 1, 8192, prefill_s=1.0)
    assert four.link.name == "network" and four.bandwidth == 4 * NIC
    assert float(four.bytes) == kv  # TP splits the KV heads; the total is the same
    assert float(four.time_s) == pytest.approx(NETWORK_LATENCY_S + kv / (4 * NIC), rel=1e-12)
    row = four.row()
    assert row["op"] == "kv_transfer" and row["comm_bytes"] == kv and row["bound"] == "communication"


def test_overlap_hides_all_but_the_last_layer():
    """80 layers; the transfer 53.687 ms (0.671 ms per layer) behind a 1 s prefill (12.5 ms
    per layer): each layer's KV leaves before the next layer is done, so only the last
    layer's 0.671 ms shows. Without overlap all 53.687 ms shows."""
    x = 2_684_354_560 / NIC
    assert float(exposed_transfer_s(x, 1.0, 80)) == pytest.approx(x / 80, rel=1e-12)
    assert float(exposed_transfer_s(x, 1.0, 80, overlap=False)) == pytest.approx(x, rel=1e-12)
    # Link-bound: X = 1 s, P = 0.5 s, 10 layers: the link starts after the first layer
    # (0.05 s) and is busy for 1 s: finishes at 1.05 s, 0.55 s after the prefill.
    assert float(exposed_transfer_s(1.0, 0.5, 10)) == pytest.approx(0.55, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(x=st.floats(1e-6, 10.0), p=st.floats(1e-6, 10.0), layers=st.integers(1, 128))
def test_exposed_transfer_matches_a_layer_by_layer_simulation(x, p, layers):
    link_free = 0.0
    for layer in range(1, layers + 1):
        link_free = max(link_free, layer * p / layers) + x / layers
    assert float(exposed_transfer_s(x, p, layers)) == pytest.approx(link_free - p, rel=1e-9, abs=1e-12)
    assert 0.0 <= float(exposed_transfer_s(x, p, layers)) <= float(exposed_transfer_s(x, p, layers, overlap=False))


def test_ttft_tpot_and_pd_ratio_by_hand(h200_70b):
    """Llama-3.1-70B, isl 8192, osl 512, prefill 4 x H200 (batch 1), decode 8 x H200 (batch 64).

    TTFT = prefill P + exposed KV + the decode pool's first step F (vLLM's P/D recomputes the
    last prompt token on the decode side): exposed = 20 us + 13.42 ms / 80 layers = 0.188 ms
    because a layer of prefill (P / 80 ~ 7 ms) outlasts a layer of transfer.
    Prefill GPU-s per request: 4 x max(P, 13.44 ms) / 1; decode: 8 x (F + 511 x TPOT) / 64.
    The ratio of the two is the P:D ratio; at 10 requests/s the pools need
    ceil(10 x P) x 4 and ceil(10 x (F + 511 TPOT) / 64) x 8 GPUs.
    """
    e = estimate_disaggregated("llama-3.1-70b", "prefill=h200x4,decode=h200x8", isl=8192, osl=512,
                               prefill_batch=1, decode_batch=64, request_rate=10)
    p = float(prefill(h200_70b[4], np.array(1.0), np.array(8192.0)).time_s)
    f = float(decode(h200_70b[8], np.array(64.0), np.array(8191.0)).time_s)
    tpot = float(mean_decode_step_s(h200_70b[8], np.array(64.0), np.array(8192.0), np.array(512.0)))
    exposed = NETWORK_LATENCY_S + 2_684_354_560 / (4 * NIC) / 80
    assert float(e.transfer.exposed_s) == pytest.approx(exposed, rel=1e-9)
    assert float(e.ttft_s) == pytest.approx(p + exposed + f, rel=1e-9)
    assert float(e.tpot_s) == pytest.approx(tpot, rel=1e-12)
    prefill_gpu_s, decode_gpu_s = 4 * p / 1, 8 * (f + 511 * tpot) / 64
    assert float(e.pd_ratio) == pytest.approx(prefill_gpu_s / decode_gpu_s, rel=1e-9)
    assert float(e.balanced_output_tokens_per_s_per_gpu) == pytest.approx(512 / (prefill_gpu_s + decode_gpu_s))
    # the pools as given: 1 prefill replica at 1 / P requests/s, 1 decode replica at 64 / (F + 511 TPOT)
    rate = min(1 / p, 64 / (f + 511 * tpot))
    assert float(e.output_tokens_per_s_per_gpu) == pytest.approx(512 * rate / 12, rel=1e-9)
    assert e.gpus_needed["prefill"] == np.ceil(10 * p) * 4
    assert e.gpus_needed["decode"] == np.ceil(10 * (f + 511 * tpot) / 64) * 8
    assert "kv_transfer" not in str(e) and "P:D" in str(e)


def test_first_token_from_prefill_skips_the_decode_step():
    on_decode = estimate_disaggregated("llama-3.1-8b", "prefill=h100-sxm,decode=h100-sxm", isl=2048, osl=64)
    on_prefill = estimate_disaggregated("llama-3.1-8b", "prefill=h100-sxm,decode=h100-sxm,first_token=prefill",
                                        isl=2048, osl=64)
    assert float(on_decode.ttft_s - on_prefill.ttft_s) == pytest.approx(float(on_decode.first_token_step_s))


def test_small_scale_disaggregation_is_a_net_loss():
    """Llama-3.1-8B at batch 1 on 1 + 1 H100 vs 1 aggregated H100: the same TPOT, a TTFT
    longer by the transfer and the decode pool's first step, and two GPUs where one did
    both phases: about half the tokens per GPU."""
    c = compare_with_aggregated("llama-3.1-8b", "prefill=h100-sxm,decode=h100-sxm", isl=2048, osl=256)
    dis = c.disaggregated
    assert dis.transfer.link.name == "nvlink"  # 2 GPUs of one 8-GPU NVLink domain
    assert float(dis.tpot_s) == pytest.approx(float(c.aggregated.tpot_s), rel=1e-12)
    assert float(c.ttft_delta_s) == pytest.approx(float(dis.transfer.exposed_s + dis.first_token_step_s), rel=1e-9)
    assert 0.4 < float(c.per_gpu_throughput_ratio) < 0.6
    assert "disaggregation: TTFT +" in str(c)


def test_link_choice():
    dep8 = deployment("llama-3.1-8b", "h100-sxm")
    same = Disaggregation(Pool("h100-sxm", 2, tp=1), Pool("h100-sxm", 4))
    assert kv_link(same, dep8, dep8).send_bandwidth == 450e9  # NVLink per direction
    assert kv_link(Disaggregation(Pool("h100-sxm", 4), Pool("h100-sxm", 8)), dep8, dep8).name == "network"
    with pytest.raises(InfeasibleError, match="scale-up domain"):
        kv_link(Disaggregation(Pool("h100-sxm", 4), Pool("h100-sxm", 8), link="nvlink"), dep8, dep8)
    forced = Disaggregation(Pool("h100-sxm"), Pool("h100-sxm"), link_bandwidth="100 Gb/s", link_latency_s=0.0)
    assert kv_link(forced, dep8, dep8).send_bandwidth == 12.5e9



def test_pools_on_a_gpu_without_a_nic_in_its_spec_ask_for_the_link_as_bad_input(capsys):
    # MI300X's spec names no scale-out NIC: the link's bandwidth is missing input (exit 2, naming
    # the --disagg key), not a deployment that cannot run (it had exited 1 naming a Python keyword)
    from inferlab.cli.main import main

    mi = deployment("llama-3.1-8b", "mi300x")
    with pytest.raises(SpecError, match="give the link's bandwidth"):
        kv_link(Disaggregation(Pool("mi300x", 1), Pool("mi300x", 1), link="network"), mi, mi)
    argv = ["serve", "llama-3.1-8b", "--rate", "5", "--num-requests", "8", "--disagg"]
    assert main(argv + ["prefill=mi300xx1,decode=h100-sxmx1"]) == 2
    assert "(--disagg ...,bw=400Gb/s; link_bandwidth= in Python)" in capsys.readouterr().err
    assert main(argv + ["prefill=mi300xx1,decode=h100-sxmx1,bw=400Gb/s"]) == 0


@settings(max_examples=15, deadline=None)
@given(a=st.floats(1e8, 1e12), b=st.floats(1e8, 1e12), overlap=st.booleans())
def test_a_faster_link_never_slows_ttft(a, b, overlap):
    slow, fast = sorted((a, b))
    ttft = [float(estimate_disaggregated(
        "llama-3.1-8b", Disaggregation(Pool("h100-sxm"), Pool("h100-sxm"), link_bandwidth=bw, overlap=overlap),
        isl=4096, osl=16).ttft_s) for bw in (slow, fast)]
    assert ttft[1] <= ttft[0] * (1 + 1e-12)


def test_prefix_cache_shortens_the_prefill_but_not_the_transfer():
    base = estimate_disaggregated("llama-3.1-8b", "prefill=h100-sxm,decode=h100-sxm", isl=4096, osl=16)
    cached = estimate_disaggregated("llama-3.1-8b", "prefill=h100-sxm,decode=h100-sxm", isl=4096, osl=16,
                                    prefix_cache="0.5")
    assert float(cached.prefill_s) < float(base.prefill_s)
    assert float(cached.transfer.bytes) == float(base.transfer.bytes)


def test_a_decode_batch_that_does_not_fit_says_what_does():
    with pytest.raises(InfeasibleError, match="largest decode batch that fits is") as err:
        estimate_disaggregated("llama-3.1-8b", "prefill=h100-sxm,decode=h100-sxm", isl=32768, osl=1024,
                               decode_batch=4096)
    assert err.value.suggestion["decode_batch"] > 0


def test_parse_and_round_trip():
    d = Disaggregation.parse("prefill=h200x4:fp8, decode=h200x8:tp4:fp8, link=network, bw=400Gb/s, "
                             "latency=5us, overlap=off")
    assert d.prefill == Pool("h200-sxm", 4, tp=4, precision="fp8")
    assert d.decode.replicas == 2 and d.decode.tp == 4
    assert d.link_bandwidth == 50e9 and d.link_latency_s == pytest.approx(5e-6) and not d.overlap
    assert Disaggregation.parse(str(d)) == d
    assert Pool.parse("mi300xx8").hardware == "mi300x" and Pool.parse("mi300x").num_gpus == 1
    # an id ending in x before its count, as people write it: mi300x times 8, not 'mi300' times 8
    assert Pool.parse("mi300x8") == Pool("mi300x", 8) and Pool.parse("mi355x8:tp4").replicas == 2


@pytest.mark.parametrize("text, fragment", [
    ("", "expected e.g."),
    ("prefill=h200x4", "decode=POOL missing"),
    ("prefill=h200x4,decode=h200x8,speed=fast", "cannot read 'speed=fast'"),
    ("prefill=h200x4,prefill=h200x2,decode=h200x8", "given twice"),
    ("prefill=h100x4,decode=h100x8", "ambiguous"),
    ("prefill=h999x4,decode=h200x8", "unknown hardware"),
    ("prefill=h200x4:tp3,decode=h200x8", "does not divide"),
    ("prefill=h200x4:fp7,decode=h200x8", "neither tpN, epN, adp nor a precision"),
    ("prefill=h200x4,decode=h200x8,bw=400", "is not a bandwidth"),
    ("prefill=h200x4,decode=h200x8,link=pcie", "link must be auto, nvlink or network"),
    ("prefill=h200x4,decode=h200x8,overlap=maybe", "overlap must be on or off"),
    ("prefill=h200x4,decode=h200x8,first_token=both", "first_token must be decode or prefill"),
    ("prefill=h200 x4,decode=h200x8", "expected HARDWARE[xCOUNT]"),
])
def test_parse_errors_are_spec_errors(text, fragment):
    with pytest.raises(SpecError) as err:
        Disaggregation.parse(text)
    assert fragment in str(err.value)


# --- request-level simulation of both pools ---------------------------------------------------


def test_serve_disaggregated_alone_is_the_estimate():
    """One request at a time: its TTFT is the server's per-request work, the prefill, the exposed
    KV transfer and the decode pool's first step (estimate_disaggregated's TTFT plus the
    first), and its TPOT the decode step at batch 1 over its context; each in-flight-batching
    iteration (the prefill pool's one, then each decode step) adds the engine's
    ``serving_step_overhead_s``, which a static estimate has not."""
    from inferlab import serve
    from inferlab.calibration.profile import load_profile

    pools = "prefill=h200x4:tp4,decode=h200x8:tp4"
    kw = {"isl": 2048, "osl": 256, "engine": "vllm", "precision": "fp8"}
    r = serve("llama-3.1-70b", disaggregation=pools, trace=[0.0, 100.0, 200.0], **kw)
    est = estimate_disaggregated("llama-3.1-70b", pools, **kw)
    server = r.request_overhead_s
    prof = load_profile("default", "vllm", "h200-sxm", "hopper")
    iteration = prof.serving_step_overhead_s - prof.step_overhead_s  # vLLM overlaps the step's host work
    assert server > 0 and r.num_gpus == 12
    # rel 3e-3: the serving step table interpolates 96 geometric token counts up to the engine's
    # budget plus its sequences (here 8,192 + 1,024), within 0.3% of the op graph at 2,048
    assert r.ttft_s == pytest.approx(float(est.ttft_s) + server + 2 * iteration, rel=3e-3)
    assert r.tpot_s == pytest.approx(float(est.tpot_s) + iteration, rel=2e-3)
    assert np.allclose(r.queue_s, 0.0, atol=1e-9) and np.all(r.transfer_s >= 0.0)  # to rounding of arrival + overhead
    assert "disaggregated" in str(r) and "exposed KV transfer" in r.explain()


def test_serve_disaggregated_forwarded_first_token_and_load():
    from inferlab import serve

    kw = {"isl": 1024, "osl": 128, "engine": "vllm", "precision": "fp8", "num_requests": 400}
    via_decode = serve("llama-3.1-8b", disaggregation="prefill=h100-sxmx1,decode=h100-sxmx1", rate=4, **kw)
    forwarded = serve("llama-3.1-8b", disaggregation="prefill=h100-sxmx1,decode=h100-sxmx1,first_token=prefill",
                      rate=4, **kw)
    # the prefill's own token reaches the user first: TTFT ends when the prefill does
    assert forwarded.ttft_s == pytest.approx(forwarded.prefill_done - forwarded.trace.arrival)
    assert forwarded.ttft_s.mean() < via_decode.ttft_s.mean()
    # every request finishes, and more decode replicas never make the decode pool slower
    wider = serve("llama-3.1-8b", disaggregation="prefill=h100-sxmx1,decode=h100-sxmx2:tp1", rate=4, **kw)
    assert np.isfinite(via_decode.e2e_s).all() and np.isfinite(wider.e2e_s).all()
    assert np.percentile(wider.tpot_s, 99) <= np.percentile(via_decode.tpot_s, 99) * 1.001


def test_serve_disaggregated_refuses_what_does_not_apply():
    from inferlab import serve

    # each refusal says why for what was given only
    with pytest.raises(SpecError, match="^serve with a disaggregation: the pools set the hardware and layout; "
                                        "drop hardware$"):
        serve("llama-3.1-8b", "h100-sxm", disaggregation="prefill=h100-sxmx1,decode=h100-sxmx1", concurrency=4)
    with pytest.raises(SpecError, match="^serve with a disaggregation: speculation, .* over separate pools; "
                                        "drop speculative$"):
        serve("llama-3.1-8b", disaggregation="prefill=h100-sxmx1,decode=h100-sxmx1", concurrency=4,
              speculative="eagle:k=2,accept=0.7")
    with pytest.raises(SpecError, match="give the hardware"):
        serve("llama-3.1-8b", rate=1.0)


def test_serve_disaggregated_with_more_prefill_replicas_than_requests():
    from inferlab import serve

    r = serve("llama-3.1-8b", disaggregation="prefill=h100-sxmx4:tp1,decode=h100-sxmx1", rate=1.0, num_requests=2)
    assert np.isfinite(r.e2e_s).all() and len(r.e2e_s) == 2
    # queueing counts from reaching the prefill pool's scheduler: that pool's server overhead
    assert r.request_overhead_s == r.prefill_deployment.profile.request_overhead_s


def test_engine_limits_reach_both_pools_of_a_served_disaggregation():
    """serve() with pools takes the engine's limits (a Deployment's engine carries them) and sets
    them on each pool's scheduler: the same run as serve_disaggregated given that scheduler."""
    from dataclasses import replace as with_fields

    from inferlab import Deployment, Workload, serve
    from inferlab.engines.scheduler import ENGINE_SCHEDULERS
    from inferlab.serving.disaggregated import serve_disaggregated

    pools = "prefill=h100-sxm,decode=h100-sxmx2"
    d = Deployment(model="llama-3.1-8b", disaggregation=pools, engine={"name": "vllm", "max_num_seqs": 1})
    typed = serve(d, Workload(rate=4.0, num_requests=80, isl=800, osl=60))
    sched = with_fields(ENGINE_SCHEDULERS["vllm"], max_num_seqs=1)
    direct = serve_disaggregated("llama-3.1-8b", pools, rate=4.0, num_requests=80, isl=800, osl=60, engine="vllm",
                                 scheduler=sched)
    unlimited = serve("llama-3.1-8b", disaggregation=pools, rate=4.0, num_requests=80, isl=800, osl=60, engine="vllm")
    assert list(typed.ttft_s) == list(direct.ttft_s)
    assert list(typed.ttft_s) != list(unlimited.ttft_s)  # one sequence per replica: requests wait for the decode pool


def test_closed_loop_over_two_pools():
    """Closed-loop clients over separate pools, both on one clock: a client's next prompt is
    sent when the decode pool ends its last answer, so one client's requests follow each other
    end to start, and c clients never have more than c requests in the system."""
    from inferlab import serve

    kw = dict(disaggregation="prefill=h100-sxmx1,decode=h100-sxmx2:tp1", isl=1024, osl=64, engine="vllm")
    one = serve("llama-3.1-8b", concurrency=1, num_requests=6, **kw)
    t = one.trace
    assert np.array_equal(t.arrival[1:], t.finish[:-1])
    assert (t.arrival[0], np.isfinite(t.finish).all()) == (0.0, True)
    # each request: queued, prefilled, its KV moved, then decoded on the decode pool
    assert (one.prefill_done < one.decode_arrival + 1e-12).all() and (one.decode_arrival < t.first_token).all()
    many = serve("llama-3.1-8b", concurrency=8, num_requests=64, **kw)
    t = many.trace
    ends = np.sort(t.finish)
    in_system = [np.sum((t.arrival <= x) & (t.finish > x)) for x in np.r_[t.arrival, ends - 1e-9]]
    assert max(in_system) <= 8
    # the decode pool's two replicas share the answers: TPOT is a decode-only batch's
    assert np.isfinite(many.tpot_s).all() and many.tpot_s.max() < 0.1


def test_closed_loop_over_two_pools_keeps_clients_in_step_when_asked():
    """serve(stagger=False) over separate pools sends each client's second request the moment
    its first ends, as over one pool; by default the second round is spread over a period."""
    from inferlab import serve

    kw = dict(disaggregation="prefill=h100-sxmx1,decode=h100-sxmx1", isl=512, osl=32, concurrency=4,
              num_requests=8)
    lockstep, spread = (serve("llama-3.1-8b", stagger=s, **kw).trace for s in (False, True))
    assert np.isin(lockstep.arrival[4:], lockstep.finish[:4]).all()
    assert not np.isin(spread.arrival[5:], spread.finish[:4]).all()


def test_pools_with_experts_and_attention_dp():
    """A pool takes a MoE layout (TensorRT-LLM's tp8 ep8 with attention DP): the text form
    round-trips, the decode replica's deployment has the layout, and the KV cache of a prompt
    crosses whole to the one attention-DP rank that holds it."""
    from inferlab.phases.disaggregated import pool_deployments
    from inferlab.techniques.disaggregation import Disaggregation, Pool
    from inferlab.techniques.kv_transfer import kv_transfer

    d = Disaggregation.parse("prefill=b200x8:tp8:ep8,decode=b200x16:tp8:ep8:adp")
    assert str(d.decode) == "b200x16:tp8:ep8:adp" and d.decode.replicas == 2
    assert Pool.parse(str(d.decode)) == d.decode
    _, dep_p, dep_d = pool_deployments("deepseek-v3", d, engine="trtllm", profile="roofline", precision="fp8")
    assert (dep_d.parallel.tp, dep_d.parallel.ep, dep_d.parallel.attention_dp) == (8, 8, True)
    assert (dep_p.parallel.ep, dep_p.parallel.attention_dp) == (8, False)
    # 1024 tokens of DeepSeek-V3's 576-wide FP8 latent over 61 layers: 1024 x 576 x 61 B
    moved = kv_transfer(d, dep_p, dep_d, 1.0, np.array([1024.0]), np.array([0.1])).bytes
    assert float(moved[0]) == pytest.approx(1024 * 576 * 61)
    with pytest.raises(SpecError, match="neither tpN, epN, adp"):
        Pool.parse("b200x8:dp8")


def test_attention_dp_ranks_send_their_own_prompts_kv_in_parallel():
    """A batch of 8 prompts over tp8 attention-DP pools: each rank prefills (and each decode
    rank keeps) one prompt, so the 8 KV caches cross in the time one does, not 8 times it."""
    from inferlab.phases.disaggregated import pool_deployments
    from inferlab.techniques.disaggregation import Disaggregation
    from inferlab.techniques.kv_transfer import kv_transfer

    d = Disaggregation.parse("prefill=b200x8:tp8:ep8:adp,decode=b200x16:tp8:ep8:adp")
    _, dep_p, dep_d = pool_deployments("deepseek-v3", d, engine="trtllm", profile="roofline", precision="fp8")
    one, eight = (kv_transfer(d, dep_p, dep_d, b, np.array([8192.0]), np.array([1.0])) for b in (1.0, 8.0))
    assert float(eight.bytes[0]) == pytest.approx(8 * float(one.bytes[0]))
    assert float(eight.time_s[0]) == pytest.approx(float(one.time_s[0]))
    sixteen = kv_transfer(d, dep_p, dep_d, 16.0, np.array([8192.0]), np.array([1.0]))
    assert float(sixteen.time_s[0] - one.link.latency_s) == pytest.approx(2 * float(one.time_s[0] - one.link.latency_s))


@settings(max_examples=8, deadline=None)
@given(clients=st.integers(1, 12), isl=st.integers(16, 2048), osl=st.integers(1, 64),
       decode=st.sampled_from(["h100-sxmx1", "h100-sxmx2:tp1"]))
def test_closed_loop_over_pools_never_holds_more_than_its_clients(clients, isl, osl, decode):
    from inferlab import serve

    r = serve("llama-3.1-8b", disaggregation=f"prefill=h100-sxmx1,decode={decode}", concurrency=clients,
              isl=isl, osl=osl, num_requests=3 * clients, engine="vllm")
    t = r.trace
    assert np.isfinite(t.finish).all() and (t.first_token <= t.finish).all() and (t.arrival <= t.first_token).all()
    probes = np.r_[t.arrival, t.finish - 1e-9]
    assert max(int(np.sum((t.arrival <= x) & (t.finish > x))) for x in probes) <= clients


def test_a_pool_layout_error_names_the_pool():
    from inferlab import serve

    with pytest.raises(InfeasibleError, match=r"^decode pool h100-sxmx2:ep2: .*no experts"):
        serve("llama-3.1-8b", disaggregation="prefill=h100-sxmx1,decode=h100-sxmx2:tp2:ep2", rate=1.0, num_requests=4)


def test_each_pool_holds_the_kv_pool_its_engine_holds_whatever_the_batch():
    # each pool's engine reserves activation memory for its whole token budget at start-up, as the
    # serving simulation's pools do: the prefill pool's sequences do not depend on its batch
    import inferlab

    e = inferlab.estimate("llama-3.1-8b", None, disaggregation="prefill=h100-sxmx1,decode=h100-sxmx1",
                          prefill_batch=[1, 4], batch_size=16, isl=1024, osl=128)
    first, second = np.ravel(e.prefill_memory.max_sequences)[:2]
    assert first == second
    assert float(np.ravel(e.prefill_memory.workspace)[0]) == float(np.ravel(e.prefill_memory.workspace)[-1])


POOLS_70B = "prefill=h100-sxmx4:tp4,decode=h100-sxmx8:tp4"


def test_a_grid_keeps_the_points_whose_batches_fit():
    """Decode pool: 70B BF16 at tp4 leaves ~40 GB per H100 after weights; 512 sequences of 33,280
    tokens need 512 x 33,280 x 327,680 B / 4 GPUs = 1,396 GB per GPU: that point cannot run.
    It had failed the whole grid; the 2,048-token point runs."""
    est = estimate_disaggregated("llama-3.1-70b", POOLS_70B, isl=[2048, 32768], osl=512, decode_batch=[64, 512])
    assert list(np.ravel(est.feasible)) == [True, False]
    assert "1395.9 GB" in est.reason[1] and "largest decode batch that fits is" in est.reason[1]
    assert np.isfinite(est.ttft_s[0]) and np.isnan(est.ttft_s[1]) and np.isnan(est.tpot_s[1])
    data = est.to_dict()
    assert data["ttft_s"][1] is None and data["feasible"] == [True, False] and data["bottleneck"][1] == "-"
    assert "does not run" in str(est) and est.first_feasible() == 0
    with pytest.raises(InfeasibleError, match="grid point 1 does not run"):
        est.explain(point=1)
    with pytest.raises(InfeasibleError, match="none of the 2 grid points runs"):
        estimate_disaggregated("llama-3.1-70b", POOLS_70B, isl=[2048, 32768], osl=512, decode_batch=512)


def test_cost_of_the_pools_by_hand():
    """12 GPUs at 2 USD/hour: 24 USD/hour as given. In the balanced ratio each GPU-second costs
    2/3600 USD whichever pool it is in, so USD per million output tokens is
    2 / 3600 / (balanced tok/s per GPU) x 1e6."""
    from inferlab import Q

    est = estimate_disaggregated("llama-3.1-70b", POOLS_70B, isl=2048, osl=512, decode_batch=64,
                                 price_per_gpu_hour=Q(2, "USD/hour"))
    assert est.usd_per_hour == pytest.approx(24.0)
    assert float(est.balanced_usd_per_million_output) == pytest.approx(
        2.0 / 3600.0 / float(est.balanced_output_tokens_per_s_per_gpu) * 1e6, rel=1e-9)
    # as given, the idle share of the faster pool is paid too: dearer than balanced
    assert float(est.usd_per_million_output) > float(est.balanced_usd_per_million_output)
    catalog = estimate_disaggregated("llama-3.1-70b", POOLS_70B, isl=2048, osl=512, decode_batch=64)
    assert catalog.usd_per_gpu_hour == (2.95, 2.95)  # the h100-sxm catalog price (specs/hardware)
    assert catalog.to_dict()["cost"]["usd_per_hour"] == pytest.approx(12 * 2.95)


def test_explain_op_table_and_interval_of_a_disaggregated_estimate():
    est = estimate_disaggregated("llama-3.1-70b", POOLS_70B, isl=2048, osl=512, decode_batch=64)
    text = est.explain()
    assert "= prefill" in text and "exposed KV transfer" in text and "first step" in text
    assert f"the {est.bottleneck.flat[0]} pool limits" in text
    assert "prefill step:" in text and "decode step at mid generation:" in text and "memory per decode GPU" in text
    rows = est.op_table("prefill")
    assert rows[-1]["op"] == "kv_transfer" and rows[-1]["comm_bytes"] == pytest.approx(LLAMA_70B_KV_BF16 * 2048 / 1)
    assert any(r["op"] == "attention" for r in est.op_table("decode"))
    from inferlab.calibration.error_band import MissingBandError

    with pytest.raises(MissingBandError, match="no validation case"):  # as for disaggregated serving
        est.interval(0.8)
    assert "no validation case" in est.to_dict()["interval"]["unavailable"] and "no 80% interval" in text


def test_disaggregated_cli_explains_and_refuses_a_plot(capsys):
    from inferlab.cli.main import main

    assert main(["estimate", "llama-3.1-70b", "--disagg", POOLS_70B, "--isl", "2048", "--batch", "64",
                 "--explain"]) == 0
    assert "exposed KV transfer" in capsys.readouterr().out
    assert main(["estimate", "llama-3.1-70b", "--disagg", POOLS_70B, "--plot", "x.png"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--ops prefill" in err


def test_a_deployment_with_pools_takes_a_price():
    from inferlab import Deployment, Workload, estimate

    dep = Deployment(model="llama-3.1-70b", disaggregation=POOLS_70B, price_per_gpu_hour=3.0)
    est = estimate(dep, Workload(isl=2048, osl=512, batch_size=64))
    assert est.usd_per_gpu_hour == (3.0, 3.0)


@pytest.mark.parametrize("engine, first", [("vllm", "decode"), ("generic", "decode"), ("sglang", "prefill"),
                                           ("trtllm-pytorch", "prefill"), ("trtllm", "prefill")])
def test_the_first_tokens_pool_is_the_decode_engines_way_unless_given(engine, first):
    # vLLM's connectors recompute the last prompt token on the decode instance; SGLang's prefill
    # server and TensorRT-LLM's context server sample the first token and hand it over. It had been
    # the decode pool's step for every engine, against this module's own notes on SGLang
    split = "prefill=h100-sxm,decode=h100-sxm"
    dis = estimate_disaggregated("llama-3.1-8b", split, isl=1024, osl=64, engine=engine)
    assert dis.disaggregation.first_token == first
    assert (float(dis.first_token_step_s) > 0) == (first == "decode")
    given = estimate_disaggregated("llama-3.1-8b", split + ",first_token=decode", isl=1024, osl=64, engine=engine)
    assert float(given.first_token_step_s) > 0  # as given
