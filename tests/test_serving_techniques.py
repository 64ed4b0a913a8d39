"""Speculative decoding and prefix caching in the serving simulation: hand checks, targets, properties."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inferlab
from inferlab.cli.main import main
from inferlab.errors import SpecError
from inferlab.inputs.resolve import deployment
from inferlab.planning.scenario import load_scenario
from inferlab.serving.serve import serve
from inferlab.serving.prefix_cache import PrefixCache
from inferlab.inputs.prefixes import Prefixes
from inferlab.serving.speculation import SpeculativeDecoding, drafter_memory
from inferlab.serving.stepmodel import StepModel
from inferlab.techniques.speculative import SpeculativeConfig

FEW = settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EAGLE = "eagle:k=4,accept=0.7"


# --- speculative decoding -------------------------------------------------------------------


@pytest.mark.parametrize("clients", [1, 4])
def test_low_load_speculation_shortens_tpot_by_the_static_factor(clients):
    # Target: at batch <= 4 the simulated TPOT ratio (speculative / plain) is the static
    # estimate's within 10%.
    kw = dict(isl=2048, osl=256, engine="vllm")
    static = (inferlab.estimate("llama-3.1-8b", "h100-sxm", batch_size=clients, speculative=EAGLE, **kw).tpot_s
              / inferlab.estimate("llama-3.1-8b", "h100-sxm", batch_size=clients, **kw).tpot_s)
    runs = [serve("llama-3.1-8b", "h100-sxm", concurrency=clients, num_requests=40, speculative=s, **kw)
            for s in (None, EAGLE)]
    simulated = np.nanmean(runs[1].tpot_s) / np.nanmean(runs[0].tpot_s)
    assert float(static) < 0.6  # it pays at this load
    assert simulated == pytest.approx(float(static), rel=0.10)


def test_speculation_at_saturation_does_not_raise_throughput():
    # Short contexts and every slot busy: the verify pass of k + 1 tokens per request is
    # compute-bound (the static break-even batch is about 240 here, well below the 384 and 1024
    # running), so speculation only adds work. (At 256 slots the run's mean batch, with its
    # ramp-up and drain, sits at the break-even: the sign there is the host overhead's.)
    dep = deployment("llama-3.1-8b", "h100-sxm", engine="vllm")
    from inferlab.techniques.speculative import break_even_batch

    assert break_even_batch(dep, 128, 256, SpeculativeConfig.parse(EAGLE)) <= 300
    for seqs in (384, 1024):
        plain, spec = (serve("llama-3.1-8b", "h100-sxm", isl=128, osl=256, offline=True, num_requests=3000,
                             engine="vllm", max_num_seqs=seqs, speculative=s) for s in (None, EAGLE))
        assert spec.output_tokens_per_s <= plain.output_tokens_per_s


@FEW
@given(clients=st.integers(1, 64), isl=st.integers(64, 4096), osl=st.integers(2, 300), k=st.integers(1, 6),
       method=st.sampled_from(["eagle", "ngram", "medusa"]))
def test_speculation_with_acceptance_zero_never_helps(clients, isl, osl, k, method):
    kw = dict(isl=isl, osl=osl, concurrency=clients, num_requests=2 * clients)
    plain = serve("llama-3.1-8b", "h100-sxm", **kw)
    spec = serve("llama-3.1-8b", "h100-sxm", speculative=f"{method}:k={k},accept=0", **kw)
    assert spec.tokens_per_step == 1.0
    assert spec.output_tokens_per_s <= plain.output_tokens_per_s * (1 + 1e-9)
    # the mean TPOT to 0.1%: every speculative step costs at least the plain one, but in a closed
    # loop the longer steps shift when clients return, and with it which prefill chunks share a
    # decode step (hypothesis found 18 clients, 198/2 tokens, EAGLE k=1: 0.012% lower, one step each)
    assert np.nanmean(spec.tpot_s) >= np.nanmean(plain.tpot_s) * (1 - 1e-3)


def test_tokens_per_step_follow_the_acceptance_model():
    # a = 0.6, k = 3: 1 + 0.6 + 0.36 + 0.216 = 2.176 tokens per step, drawn per request
    draws = SpeculativeDecoding(SpeculativeConfig.parse("eagle:k=3,accept=0.6"), seed=1)._draw((200_000,))
    assert set(np.unique(draws)) == {1.0, 2.0, 3.0, 4.0}
    assert draws.mean() == pytest.approx(2.176, rel=0.01)
    assert np.mean(draws == 4.0) == pytest.approx(0.6**3, rel=0.03)  # every draft accepted
    # a measured acceptance length is kept on average (preset: K=7, length 2.88)
    r = serve("llama-3.3-70b", "h100-sxm", tp=4, precision="fp8", isl=1024, osl=400, concurrency=4, num_requests=8,
              speculative="eagle3-llama-3.3-70b")
    assert r.tokens_per_step == pytest.approx(2.88, rel=0.05)
    assert r.to_dict()["speculative"].startswith("eagle:k=7,length=2.88")


def test_drafter_memory_by_hand_and_fewer_kv_blocks():
    # llama-3.1-8b drafting for llama-3.1-70b on tp4, bf16: 8.03e9 parameters x 2 B / 4 GPUs
    # = 4.0 GB per GPU; its KV 32 layers x 2 (K, V) x 8 heads x 128 x 2 B = 131,072 B/token,
    # a quarter (2 of its 8 KV heads) per GPU = 32,768 B; k = 4 lookahead slots per request.
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=4)
    spec = SpeculativeConfig.parse("draft:model=llama-3.1-8b,k=4,accept=0.6")
    mem = drafter_memory(dep, spec)
    assert mem.weight_bytes == pytest.approx(4.015e9, rel=0.01)
    assert mem.kv_bytes_per_token == 32768.0 and mem.lookahead_tokens == 4
    from inferlab.engines.scheduler import ENGINE_SCHEDULERS
    from inferlab.serving.replica import kv_capacity_tokens

    sched = ENGINE_SCHEDULERS["vllm"]
    plain, with_draft = kv_capacity_tokens(dep, sched), kv_capacity_tokens(dep, sched, mem)
    # the 70b's own KV: 80 layers x 2 x 8 x 128 x 2 B / 4 = 81,920 B/token per GPU
    budget = plain * 81920.0
    assert with_draft == pytest.approx((budget - 4.015e9) / (81920.0 + 32768.0), rel=0.01)
    assert drafter_memory(dep, SpeculativeConfig.parse("ngram:k=3,accept=0.3")).weight_bytes == 0.0


def test_an_eagle_head_of_a_mixture_of_experts_is_one_dense_layer():
    """EAGLE-3 heads are Llama layers whatever the target: gpt-oss-120b's (hidden 2,880, 64 query
    heads and 8 KV heads of 64) gets full attention, q 2,880 x 4,096 + k, v 2,880 x 512 each + o
    4,096 x 2,880 = 26,542,080, their biases 4,096 + 512 + 512 + 2,880 = 8,000 and 64 sinks; a
    dense MLP as wide as the 4 experts a token runs, 3 x 2,880 x 11,520 = 99,532,800; the
    2H -> H fusion 16,588,800; three norms 8,640: 142,680,384 parameters in BF16, 285.36 MB (it
    had been a whole MoE layer of 128 experts: 6.46 GB). Llama-3.1-8B's head keeps its own
    first layer (dense, 14,336 wide)."""
    from inferlab.techniques.speculative import eagle_layer

    spec = SpeculativeConfig.parse("eagle:k=3,accept=0.7")
    mem = drafter_memory(deployment("gpt-oss-120b", "h100-sxm"), spec)
    assert mem.weight_bytes == 2 * 142_680_384
    llama = deployment("llama-3.1-8b", "h100-sxm").model
    assert eagle_layer(llama) is llama.layers[0]
    assert drafter_memory(deployment("llama-3.1-8b", "h100-sxm"), spec).weight_bytes == 503_341_056


def test_an_eagle_head_keeps_its_checkpoints_bf16_beside_a_low_precision_target():
    """EAGLE heads ship in BF16 and engines load them so: Llama-3.1-8B's head is q 4,096 x 4,096, k and
    v 4,096 x 1,024, o 4,096 x 4,096 (41,943,040), its MLP 3 x 4,096 x 14,336 (176,160,768), the 2H ->
    H fusion 33,554,432 and three norms 12,288: 251,670,528 parameters, 503,341,056 B beside an FP8
    target as beside a BF16 one (it had been stored at the target's FP8, half of it); its steps run
    in BF16 over the target's FP8 KV cache."""
    from inferlab.techniques.speculative import EAGLE_HEAD_FORMAT, eagle_deployment

    spec = SpeculativeConfig.parse("eagle:k=3,accept=0.7")
    fp8 = deployment("llama-3.1-8b", "h100-sxm", precision="fp8")
    assert EAGLE_HEAD_FORMAT == "bf16" and drafter_memory(fp8, spec).weight_bytes == 2 * 251_670_528
    head = eagle_deployment(fp8)
    assert (head.precision.weights, head.precision.activations, head.precision.kv_cache) == ("bf16", "bf16", "fp8")
    bf16 = deployment("llama-3.1-8b", "h100-sxm", precision="bf16")
    assert eagle_deployment(bf16) is bf16


@pytest.mark.parametrize("spec, message", [
    ("draft:model=llama-3.1-8b,k=4,accept=0.6", "is not smaller than the target llama-3.1-8b"),
    ("draft:model=llama-3.1-70b,k=4,accept=0.6", "is not smaller than the target"),
    ("draft:model=llama-2-7b,k=4,accept=0.6", "must share the target's tokenizer"),
])
def test_drafts_that_cannot_help_are_refused(spec, message):
    with pytest.raises(SpecError, match=message):
        serve("llama-3.1-8b", "h100-sxm", rate=1, num_requests=5, speculative=spec)


def test_speculation_refuses_what_it_does_not_simulate():
    with pytest.raises(SpecError, match="drop prefix, speculative"):
        serve("llama-3.1-70b", disaggregation="prefill=h200x4,decode=h200x8:tp4", rate=1, speculative=EAGLE,
              prefix="shared:tokens=100")
    with pytest.raises(SpecError, match="pipeline stages is not simulated"):
        serve("llama-3.1-70b", "h100-sxm", tp=4, pp=2, rate=1, num_requests=5, speculative=EAGLE)


# --- prefix caching ----------------------------------------------------------------------


def test_second_request_skips_the_shared_prefix():
    # Two 1,500-token prompts share a 1,000-token prefix (125 blocks of 8). The second
    # arrives after the first is done: it finds 1,000 tokens and prefills 500 at context
    # 1,000, so its TTFT is shorter by the step model's difference between those prefills.
    r = serve("llama-3.1-8b", "h100-sxm", isl=1500, osl=16, trace=[0.0, 1.0], kv_block_size=8,
              prefix="shared:tokens=1000,groups=1")
    assert r.trace.cached.tolist() == [0.0, 1000.0]
    assert r.prefix_hit_rate == pytest.approx(1000 / 3000)
    model = StepModel(r.deployment, 8192 + 256)
    one = np.ones(1)
    full = model.time(decode_context=np.zeros(0), prefill_context=np.zeros(1), prefill_tokens=1500 * one, logits=1)
    rest = model.time(decode_context=np.zeros(0), prefill_context=1000 * one, prefill_tokens=500 * one, logits=1)
    assert r.ttft_s[0] - r.ttft_s[1] == pytest.approx(full - rest, rel=1e-9)
    assert r.tpot_s[1] == pytest.approx(r.tpot_s[0], rel=0.01)  # decode is unchanged


def test_a_whole_prompt_in_the_cache_still_computes_its_last_token():
    r = serve("llama-3.1-8b", "h100-sxm", isl=64, osl=4, trace=[0.0, 1.0], prefix="shared:tokens=64")
    assert r.trace.cached.tolist() == [0.0, 63.0]  # 4 blocks held; the last token gives the logits


def test_a_conversation_turn_finds_its_history():
    # Turn 1: 1,000 + 100 tokens; turn 2's prompt is that history plus a new 1,000-token
    # message, sent 0.5 s after turn 1 ends; it finds floor(1,100 / 16) x 16 = 1,088 tokens.
    r = serve("llama-3.1-8b", "h100-sxm", isl=1000, osl=100, offline=True, num_requests=2,
              prefix="sessions:turns=2,think=0.5")
    assert r.trace.isl.tolist() == [1000.0, 2100.0]
    assert r.trace.cached.tolist() == [0.0, 1088.0]
    assert r.trace.arrival[1] == pytest.approx(r.trace.finish[0] + 0.5)


def test_zero_hits_equal_no_cache():
    # One-turn conversations share nothing: the cache holds and evicts their blocks but
    # never hits, and every timeline equals the run without prefixes, preemptions included.
    kw = dict(isl=[512, 2048, 4096], osl=[64, 256], rate=25, num_requests=400, gpu_memory_utilization=0.3)
    plain = serve("llama-3.1-8b", "h100-sxm", **kw)
    cached = serve("llama-3.1-8b", "h100-sxm", prefix="sessions:turns=1", **kw)
    assert cached.prefix_hit_rate == 0.0 and cached.trace.evicted_blocks > 0 and plain.trace.preemptions > 0
    for name in ("first_scheduled", "first_token", "finish", "itl_values", "itl_weights"):
        np.testing.assert_array_equal(getattr(cached.trace, name), getattr(plain.trace, name))
    off = serve("llama-3.1-8b", "h100-sxm", prefix="shared:tokens=400,groups=2,cache=off", **kw)
    np.testing.assert_array_equal(off.trace.finish, plain.trace.finish)
    assert off.prefix_hit_rate == 0.0


@FEW
@given(groups=st.integers(2, 200), zipf=st.sampled_from([0.0, 1.0]), low=st.floats(0.25, 0.5),
       more=st.floats(0.02, 0.4))
def test_more_kv_memory_never_lowers_the_hit_rate(groups, zipf, low, more):
    # One request at a time, so that memory changes only what the cache keeps (with many in
    # flight, more memory also admits more requests at once, and simultaneous misses on one
    # prefix are a real effect that can lower the rate).
    kw = dict(isl=4096, osl=32, rate=4, num_requests=150, max_num_seqs=1, prefix=Prefixes(
        tokens=4000, groups=groups, zipf=zipf))
    rates = [serve("llama-3.1-8b", "h100-sxm", gpu_memory_utilization=u, **kw).prefix_hit_rate
             for u in (low, min(low + more, 0.9))]
    assert rates[1] >= rates[0]


def test_hit_rate_falls_as_distinct_prefixes_outgrow_the_pool():
    # 8,000-token prefixes in 8,192-token prompts, a pool of about 120,000 tokens (8 B on an
    # H100 at 40% of memory): 4 prefixes fit, hits approach 1 - 4/1000 first misses of
    # 8,000 / 8,192 tokens each (0.973); 1,024 prefixes do not, and almost nothing is reused.
    rates = [serve("llama-3.1-8b", "h100-sxm", isl=8192, osl=64, rate=2, num_requests=1000,
                   gpu_memory_utilization=0.4, prefix=f"shared:tokens=8000,groups={g}").prefix_hit_rate
             for g in (4, 16, 64, 256, 1024)]
    assert 0.95 < rates[0] <= (1 - 4 / 1000) * 8000 / 8192 + 1e-12
    assert all(b < a for a, b in zip(rates, rates[1:]))
    assert rates[-1] < 0.05


def test_prefix_cache_evicts_least_recently_used_unpinned_blocks():
    cache = PrefixCache(block_size=16)
    cache.pin(0, 10)  # stream 0: 10 blocks, read by a running request
    cache.pin(1, 5)
    cache.unpin(1, 5)  # stream 1 done: 5 evictable blocks
    cache.pin(2, 4)
    cache.unpin(2, 4)  # stream 2 done later
    assert (cache.held_blocks, cache.pinned_blocks, cache.evictable_blocks) == (19, 10, 9)
    assert cache.cached_tokens(1, 1000) == 80 and cache.cached_tokens(1, 40) == 32  # whole blocks of the prefix
    cache.fit(6)  # 3 must go: from stream 1, the least recently used, its tail first
    assert cache.cached_tokens(1, 1000) == 32 and cache.cached_tokens(2, 1000) == 64
    cache.fit(0)  # everything unpinned goes; the pinned stream stays
    assert cache.cached_tokens(0, 1000) == 160 and cache.cached_tokens(1, 1000) == 0
    assert cache.evicted_blocks == 9 and cache.newly_pinned(0, 12) == 2


@pytest.mark.parametrize("text, message", [
    ("shared:groups=4", "the prefix length tokens=N is missing"),
    ("shared:tokens=100,turns=3", "'turns=3' is not one of tokens="),
    ("rag:tokens=100", "start with shared: or sessions:"),
    ("sessions:turns=0", "turns must be an integer from 1 to 1,000"),
    ("sessions:turns=1001", "turns must be an integer from 1 to 1,000"),
    ("shared:tokens=100,groups=10000001", "groups must be an integer from 1 to 10,000,000"),
    ("shared:tokens=100000001", "tokens must be an integer from 1 to 100,000,000"),
    ("sessions:turns=2,think=1000001", "think_s must be a finite number from 0 to 1e[+]06"),
    ("shared:tokens=10,zipf=101", "zipf must be a finite number from 0 to 100"),
    ("shared:tokens=100,cache=maybe", "cache must be on or off"),
    ("shared:tokens=ten", "tokens='ten' is not a number"),
])
def test_bad_prefixes_are_explained(text, message):
    with pytest.raises(SpecError, match=message):
        Prefixes.parse(text)


def test_a_prefix_cache_switch_is_a_boolean():
    with pytest.raises(SpecError, match="prefix: cache must be true or false, got 'no'"):
        Prefixes(kind="shared", tokens=10, cache="no")


def test_a_conversation_longer_than_the_model_is_refused():
    # 4 turns of isl 20,000 + osl 20,000: the last prompt holds 3 x 40,000 = 120,000 tokens of history,
    # plus its own 40,000: 160,000 > llama-3.1-8b's 131,072 positions
    with pytest.raises(SpecError, match=r"the last turn of a 4-turn conversation, 4 x \(isl \+ osl\) = 160,000 tokens "
                                        "exceeds the 131,072 positions"):
        serve("llama-3.1-8b", "h100-sxm", rate=1, num_requests=8, isl=20_000, osl=20_000, prefix="sessions:turns=4")


def test_sessions_need_an_open_loop():
    with pytest.raises(SpecError, match="not closed-loop clients or a trace"):
        serve("llama-3.1-8b", "h100-sxm", concurrency=4, num_requests=8, prefix="sessions:turns=2")


def test_scenario_traffic_carries_the_prefix():
    sc = load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"],
                        "traffic": {"rate": 2, "prefix": {"kind": "sessions", "turns": 3, "think_s": 4.0}}})
    assert sc.traffic.prefix == Prefixes(kind="sessions", turns=3, think_s=4.0)
    with pytest.raises(SpecError, match="traffic.prefix: prefix 'shared:tokns=5'"):
        load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"],
                       "traffic": {"rate": 2, "prefix": "shared:tokns=5"}})


def test_cli_spec_and_prefix(capsys):
    code = main(["serve", "llama-3.1-8b", "h100-sxm", "--rate", "4", "--num-requests", "100", "--spec", EAGLE,
                 "--prefix", "shared:tokens=512,groups=4", "--json", "--explain"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    data = json.loads(out)
    assert data["speculative"] == EAGLE and 2.0 < data["tokens_per_step"] < 3.5
    assert 0.3 < data["prefix_hit_rate"] <= 0.5 and "prefix cache:" in data["explain"]
    code = main(["serve", "llama-3.1-8b", "h100-sxm", "--rate", "4", "--spec", "draft:model=llama-2-7b,k=2,accept=0.5"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "tokenizer" in err
